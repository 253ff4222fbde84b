"""The build's machine is remembered while what it is made of is unchanged (build_machine.py).

A no-change rebuild spent a third of its time importing torch to write the machine
line into the pages Sphinx writes at every build; torch is now asked only when an
input of the answer changed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from effpt.machine import Machine
from effpt_site import build_machine

EXT = Path(__file__).resolve().parents[1] / "docs" / "_ext"
ASKED = Machine("cpu", "x86_64 CPU (Test)", 2, None, "2.13.0", {})


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """build_machine with torch's answer counted, no GPU driver, and its files in tmp_path."""
    calls = []

    def ask():
        calls.append(1)
        return ASKED, "2.13.0+cpu"

    monkeypatch.setattr(build_machine, "_ask_torch", ask)
    monkeypatch.setattr(build_machine, "GPU_DEVICE_FILES", (str(tmp_path / "nvidiactl"),))
    monkeypatch.setattr(build_machine, "CPUINFO", tmp_path / "cpuinfo")
    (tmp_path / "cpuinfo").write_text("model name\t: Test\n", encoding="utf-8")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    return calls


def _app(tmp_path):
    return SimpleNamespace(doctreedir=str(tmp_path / "doctrees"))


@pytest.mark.skipif(sys.platform != "linux", reason="the fingerprint is trusted on Linux only")
def test_an_unchanged_machine_is_not_asked_again(counted, tmp_path):
    first = build_machine.machine(_app(tmp_path))
    again = build_machine.machine(_app(tmp_path))  # a new build: a new app
    assert first == again == (ASKED, "2.13.0+cpu")
    assert len(counted) == 1


@pytest.mark.skipif(sys.platform != "linux", reason="the fingerprint is trusted on Linux only")
@pytest.mark.parametrize("change", ["environment", "cpu", "code", "torch"])
def test_a_changed_input_asks_torch_again(counted, tmp_path, monkeypatch, change):
    build_machine.machine(_app(tmp_path))
    if change == "environment":
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
    elif change == "cpu":
        (tmp_path / "cpuinfo").write_text("model name\t: Other\n", encoding="utf-8")
    elif change == "code":
        monkeypatch.setattr(build_machine, "_code", lambda: "another version")
    else:
        monkeypatch.setattr(build_machine, "_torch_installed", lambda: "torch 9.9 elsewhere")
    build_machine.machine(_app(tmp_path))
    assert len(counted) == 2


@pytest.mark.skipif(sys.platform != "linux", reason="the fingerprint is trusted on Linux only")
def test_a_cpu_clock_that_moves_is_no_change(counted, tmp_path):
    """A laptop's /proc/cpuinfo gives another ``cpu MHz`` at every read."""
    info = tmp_path / "cpuinfo"
    info.write_text("model name\t: Test\ncpu MHz\t\t: 2596.150\n", encoding="utf-8")
    build_machine.machine(_app(tmp_path))
    info.write_text("model name\t: Test\ncpu MHz\t\t: 3791.002\n", encoding="utf-8")
    build_machine.machine(_app(tmp_path))
    assert len(counted) == 1


def test_a_gpu_driver_means_torch_is_always_asked(counted, tmp_path):
    (tmp_path / "nvidiactl").touch()
    build_machine.machine(_app(tmp_path))
    build_machine.machine(_app(tmp_path))
    assert len(counted) == 2


@pytest.mark.skipif(sys.platform != "linux", reason="the fingerprint is trusted on Linux only")
def test_a_damaged_record_is_asked_again(counted, tmp_path):
    build_machine.machine(_app(tmp_path))
    (tmp_path / "doctrees" / build_machine.RECORD).write_text("{not json", encoding="utf-8")
    assert build_machine.machine(_app(tmp_path)) == (ASKED, "2.13.0+cpu")
    assert len(counted) == 2


def test_the_real_answer_is_this_machine():
    from effpt.device import this_machine

    machine, version = build_machine._ask_torch()
    assert machine == this_machine()
    import torch

    assert version == torch.__version__


@pytest.mark.skipif(sys.platform != "linux", reason="the fingerprint is trusted on Linux only")
def test_a_remembered_machine_imports_no_torch(tmp_path, imports_torch):
    if any(Path(p).exists() for p in build_machine.GPU_DEVICE_FILES):
        pytest.skip("this machine has a GPU driver: torch is always asked")
    code = (
        "import types\n"
        "from effpt_site import build_machine\n"
        f"build_machine.machine(types.SimpleNamespace(doctreedir={str(tmp_path)!r}))"
    )
    assert imports_torch(code)  # the first build asks torch
    assert not imports_torch(code)  # the next one remembers
