"""The build, the tests and the stand-ins measure what a reader's plain run measures.

Every place that runs pages sets a few variables of its own: each must be one that
changes no timing (a matplotlib backend, a log level). A timing variable
(:data:`effpt.machine.TIMING_VARIABLES`) is set only by a stand-in, where it is the
machine stood in for, and the stamp then names it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import gpu_build
import page_runner
import pytest

from effpt.machine import TIMING_VARIABLES

ROOT = Path(__file__).resolve().parents[1]
#: What the build may set, and why it changes no measurement.
ALLOWED = {
    "MPLBACKEND": "figures drawn off-screen (Agg): no window, and no timed cell draws",
    "KINETO_LOG_LEVEL": "the profiler's own log lines silenced: what it records is unchanged",
}


def _noxfile_run_env() -> dict[str, str]:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "RUN_ENV" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    pytest.fail("noxfile.py has no RUN_ENV")
    return {}


def test_the_build_sets_only_what_changes_no_measurement():
    assert set(_noxfile_run_env()) == set(ALLOWED)
    assert set(page_runner.BASE_ENV) == {"MPLBACKEND"}
    assert _noxfile_run_env() == gpu_build.RUN_ENV  # the GPU build measures as nox -s docs does
    assert not set(ALLOWED) & set(TIMING_VARIABLES)


def _sources() -> list[Path]:
    files = [ROOT / "noxfile.py", ROOT / ".ci" / "run", ROOT / "docs" / "conf.py"]
    files += sorted((ROOT / "docs" / "_ext").rglob("*.py"))
    files += sorted((ROOT / "docs" / "_tools").rglob("*.py"))
    files += sorted((ROOT / "tests").rglob("*.py"))
    # The stand-ins set the variables of the machines they stand in for (their stamps
    # name them); these tests name the variables to check them (test_machine caps oneDNN
    # in a child process to check that a capped oneDNN is seen; test_site_build_machine
    # changes a thread variable to check that the remembered machine line is asked again).
    skip = {
        "standins.py",
        "test_build_environment.py",
        "test_device.py",
        "test_evidence.py",
        "test_machine.py",
        "test_site_build_machine.py",
    }
    return [f for f in files if f.is_file() and f.name not in skip]


def test_nothing_that_runs_pages_sets_a_timing_variable():
    names = "|".join(map(re.escape, TIMING_VARIABLES))
    setting = re.compile(
        rf"""["']({names})["']\s*:\s*[^\s,N]|\b({names})=|setenv\(\s*["']({names})|environ\[["']({names})["']\]\s*="""
    )
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if setting.search(line)
    ]
    assert found == []


def test_the_stamp_and_the_records_name_the_timing_variables_set(tmp_path, monkeypatch):
    """A stand-in's or a reader's setting shows beside its numbers, on the page and in files."""
    from effpt.device import this_machine
    from effpt.records import Record, read_records, save_records
    from effpt_site.decorations import stamp_text

    for name in TIMING_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    machine = this_machine("cpu")
    stamp = {"executed_at": "2026-11-27 11:00 UTC", "machine": machine.to_dict()}
    assert stamp_text("en", stamp, 3.0, None).endswith(
        " · OMP_NUM_THREADS=1 · OMP_WAIT_POLICY=PASSIVE in 3.0 s."
    )
    record = Record("add", "loop", 2e-3, 1e-4, 1.9e-3, 2.1e-3, 5, 10, "loop", machine)
    path = tmp_path / "records.jsonl"
    monkeypatch.setenv("EFFPT_RECORDS_FILE", str(path))
    save_records([record])
    (read,) = read_records(path)
    assert read.machine.environment == {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
