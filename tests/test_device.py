"""effpt.device: the device choice, its override, and the stamp."""

from __future__ import annotations

import pytest
import torch

from effpt import device as dev
from effpt.machine import TIMING_VARIABLES


@pytest.fixture(autouse=True)
def _no_timing_variables(monkeypatch):
    """Each test starts with none of the timing variables set, whatever the shell has."""
    for name in TIMING_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_env_override_selects_cpu(monkeypatch):
    monkeypatch.setenv("EFFPT_DEVICE", "CPU ")
    assert dev.pick_device() == torch.device("cpu")


def test_auto_prefers_cuda_then_mps_then_cpu(monkeypatch):
    monkeypatch.delenv("EFFPT_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(dev, "_mps_available", lambda: True)
    assert dev.pick_device() == torch.device("mps")
    monkeypatch.setattr(dev, "_mps_available", lambda: False)
    assert dev.pick_device() == torch.device("cpu")


def test_misspelt_env_lists_the_valid_names(monkeypatch):
    monkeypatch.setenv("EFFPT_DEVICE", "cdua")
    with pytest.raises(ValueError, match="EFFPT_DEVICE='cdua'") as info:
        dev.pick_device()
    for name in dev.DEVICE_CHOICES:
        assert repr(name) in str(info.value)


def test_missing_device_is_loud_not_a_fallback(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="cuda"):
        dev.device_from_name("cuda")


def test_non_string_name_raises_type_error():
    with pytest.raises(TypeError, match="int"):
        dev.device_from_name(0)


@pytest.mark.parametrize(
    ("name", "dtype"),
    [("cpu", torch.bfloat16), ("cuda", torch.float16), ("mps", torch.float16)],
)
def test_autocast_dtype(name, dtype):
    assert dev.autocast_dtype(name) is dtype


def test_autocast_dtype_unknown_device():
    with pytest.raises(ValueError, match="'meta'"):
        dev.autocast_dtype("meta")


def test_describe_cpu_names_threads_and_torch(monkeypatch):
    monkeypatch.setattr(dev, "_cpu_name", lambda: "Test CPU 9000")
    line = dev.describe("cpu")
    assert "Test CPU 9000" in line
    assert f"{torch.get_num_threads()} thread" in line
    assert line.endswith(f" · torch {dev.torch_version()}")
    assert "+" not in dev.torch_version()


def test_describe_cuda_uses_the_gpu_name(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _d: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    line = dev.describe(torch.device("cuda"))
    assert line == f"NVIDIA H100 80GB HBM3 · CUDA 13.0 · torch {dev.torch_version()}"


def test_env_asking_for_a_missing_device_names_the_variable(monkeypatch):
    monkeypatch.setenv("EFFPT_DEVICE", "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(dev, "_mps_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"EFFPT_DEVICE='cuda'") as info:
        dev.pick_device()
    assert "available here: 'cpu'" in str(info.value)


@pytest.mark.parametrize("name", ["meta", "xpu"])
def test_describe_names_devices_it_does_not_know_instead_of_the_cpu(name):
    line = dev.describe(name)
    assert "CPU" not in line
    assert name in line
    assert line.endswith(f" · torch {dev.torch_version()}")


def test_a_machine_is_fields_and_prints_as_describe(monkeypatch):
    monkeypatch.setattr(dev, "_cpu_name", lambda: "Test CPU 9000")
    cpu = dev.this_machine("cpu")
    assert (cpu.kind, cpu.threads, cpu.cuda) == ("cpu", torch.get_num_threads(), None)
    assert str(cpu) == dev.describe("cpu")
    assert dev.Machine.from_dict(cpu.to_dict()) == cpu
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _d: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    gpu = dev.this_machine("cuda")
    assert (gpu.kind, gpu.name, gpu.threads, gpu.cuda) == (
        "cuda",
        "NVIDIA H100 80GB HBM3",
        None,
        "12.8",
    )
    assert str(gpu) == dev.describe("cuda")


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ("x86_64 CPU", "not a JSON object|machine must be"),
        ({"kind": "cpu", "name": "x", "threads": 2, "cuda": None}, r"missing fields \['torch'\]"),
        (
            {"kind": "cpu", "name": "x", "threads": 2, "cuda": None, "torch": "2.6", "gpu": 1},
            r"unknown fields \['gpu'\]",
        ),
        ({"kind": "cpu", "name": "x", "threads": "2", "cuda": None, "torch": "2.6"}, "'threads'"),
        ({"kind": "cuda", "name": "x", "threads": None, "cuda": None, "torch": "2.6"}, "'cuda'"),
        ({"kind": "mps", "name": "", "threads": None, "cuda": None, "torch": "2.6"}, "'name'"),
    ],
)
def test_a_bad_machine_names_its_field(data, error):
    with pytest.raises((TypeError, ValueError), match=error):
        dev.Machine.from_dict(data)


@pytest.mark.parametrize(
    "line",
    [
        "x86_64 CPU (Intel(R) Xeon(R) Processor), 2 threads · torch 2.6.0",
        "x86_64 CPU, 1 thread · torch 2.13.0",
        "NVIDIA H100 80GB HBM3 · CUDA 12.8 · torch 2.13.0",
        "Apple arm64 GPU (MPS) · torch 2.13.0",
        "meta device · torch 2.13.0",
    ],
)
def test_an_old_files_machine_line_reads_back_to_the_same_line(line):
    assert str(dev.Machine.read(line)) == line


@pytest.mark.parametrize(
    "line", ["x86_64 CPU, 2 threads", "NVIDIA H100 · CUDA 13.0", "NVIDIA H100 · torch 2.13.0", ""]
)
def test_a_line_describe_never_writes_is_rejected(line):
    with pytest.raises(ValueError, match=r"is not one that effpt\.device\.describe"):
        dev.Machine.read(line)


def test_timing_environment_names_only_the_variables_that_change_timings():
    from effpt.machine import timing_environment

    environ = {
        "OMP_WAIT_POLICY": "PASSIVE",
        "MPLBACKEND": "Agg",
        "KMP_BLOCKTIME": "0",
        "HOME": "/root",
        "ATEN_CPU_CAPABILITY": "avx2",
    }
    assert timing_environment(environ) == {
        "ATEN_CPU_CAPABILITY": "avx2",
        "KMP_BLOCKTIME": "0",
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    assert {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY"} <= set(TIMING_VARIABLES)
    assert "MPLBACKEND" not in TIMING_VARIABLES


def test_the_machine_of_a_run_names_the_timing_variables_set(monkeypatch):
    monkeypatch.setattr(dev, "_cpu_name", lambda: "Test CPU 9000")
    plain = dev.this_machine("cpu")
    assert plain.environment == {}
    assert "=" not in str(plain)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    cpu = dev.this_machine("cpu")
    assert cpu.environment["OMP_WAIT_POLICY"] == "PASSIVE"
    line = dev.describe("cpu")
    assert line.endswith(" · OMP_NUM_THREADS=1 · OMP_WAIT_POLICY=PASSIVE")
    assert dev.Machine.read(line) == cpu
    assert dev.Machine.from_dict(cpu.to_dict()) == cpu
    assert cpu.to_dict()["environment"] == {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    assert hash(cpu) != hash(plain)


def test_a_machine_file_without_environment_reads_as_none_set():
    old = {"kind": "cpu", "name": "x", "threads": 2, "cuda": None, "torch": "2.6.0"}
    assert dev.Machine.from_dict(old).environment == {}


@pytest.mark.parametrize(
    ("environment", "error"),
    [
        ({"OMP_WAIT_POLICY": 1}, "'environment'"),
        ({"omp wait": "PASSIVE"}, "'environment'"),
        (["OMP_WAIT_POLICY=PASSIVE"], "'environment'"),
    ],
)
def test_a_bad_machine_environment_names_its_field(environment, error):
    data = {
        "kind": "cpu",
        "name": "x",
        "threads": 2,
        "cuda": None,
        "torch": "2.6.0",
        "environment": environment,
    }
    with pytest.raises((TypeError, ValueError), match=error):
        dev.Machine.from_dict(data)
