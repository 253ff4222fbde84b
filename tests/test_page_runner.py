"""The page runner (docs/_tools/page_runner.py) that every page-running test and tool uses."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest
from page_runner import busy_cores, clean_env, run_page


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a parent that does not reap is dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def page(tmp_path, code: str):
    path = tmp_path / "src" / "plot_probe.py"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(code), encoding="utf-8")
    return path


def test_a_page_runs_alone_in_a_clean_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.setenv("EFFPT_RECORDS_FILE", "/tmp/x")
    monkeypatch.setenv("NOX_CURRENT_SESSION", "tests")
    script = page(
        tmp_path,
        """
        import json, os
        keys = ("PYTHONPATH", "EFFPT_RECORDS_FILE", "NOX_CURRENT_SESSION", "MPLBACKEND",
                "OMP_WAIT_POLICY", "EXTRA")
        print(json.dumps({k: os.environ.get(k) for k in keys} | {"files": os.listdir()}))
        with open(os.environ["EFFPT_EXPECTATIONS_FILE"], "a") as f:
            f.write('{"statement": "x"}\\n')
        with open(os.environ["EFFPT_CLAIMS_FILE"], "a") as f:
            f.write('{"key": "k"}\\n')
        """,
    )
    run = run_page(script, tmp_path / "alone", env={"EXTRA": "1"}, timeout_s=60)
    assert run.ok, run.failure()
    seen = json.loads(run.stdout)
    assert seen == {
        "PYTHONPATH": None,
        "EFFPT_RECORDS_FILE": None,
        "NOX_CURRENT_SESSION": None,
        "MPLBACKEND": "Agg",
        "OMP_WAIT_POLICY": None,
        "EXTRA": "1",
        "files": sorted(
            ["plot_probe.py", "expectations.jsonl", "claims.jsonl"], key=seen["files"].index
        ),
    }
    assert run.expectation_dicts() == [{"statement": "x"}]
    assert run.claims_file.read_text() == '{"key": "k"}\n'
    assert "PYTHONPATH" not in clean_env()


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_the_start_method_is_the_one_asked_for(tmp_path, method):
    script = page(tmp_path, "import multiprocessing as mp\nprint(mp.get_start_method())\n")
    run = run_page(script, tmp_path / "alone", start_method=method, timeout_s=60)
    assert run.ok, run.failure()
    assert run.stdout.strip() == method
    assert run.how == f"start method {method}"


def test_a_page_runs_as_sphinx_gallery_runs_it_without_a_file(tmp_path):
    """sphinx-gallery executes a page's code in a dict of globals with no ``__file__``."""
    code = "print(__name__, '__file__' in globals())\n"
    script = page(tmp_path, code)
    run = run_page(script, tmp_path / "gallery", as_gallery=True, timeout_s=60)
    assert run.ok, run.failure()
    assert run.stdout.strip() == "__main__ False"
    assert run.how == "as sphinx-gallery runs it"
    spawned = run_page(
        script, tmp_path / "spawned", as_gallery=True, start_method="spawn", timeout_s=60
    )
    assert spawned.stdout.strip() == "__main__ False"
    assert spawned.how == "as sphinx-gallery runs it, start method spawn"
    plain = run_page(script, tmp_path / "plain", timeout_s=60)
    assert plain.stdout.strip() == "__main__ True"


def test_a_missing_module_names_the_install_line(tmp_path):
    script = page(tmp_path, "import not_a_module_anyone_installs\n")
    run = run_page(script, tmp_path / "alone", timeout_s=60)
    assert not run.ok
    assert run.failure() == (
        "plot_probe.py imports 'not_a_module_anyone_installs', which its install line "
        "does not provide"
    )


def test_a_timeout_ends_the_page_and_what_it_started(tmp_path):
    script = page(
        tmp_path,
        """
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(child.pid, flush=True)
        time.sleep(60)
        """,
    )
    began = time.monotonic()
    run = run_page(script, tmp_path / "alone", timeout_s=3)
    assert run.timed_out
    assert not run.ok
    assert time.monotonic() - began < 30
    assert "timed out after 3 s" in run.failure()
    child = int(run.stdout.split()[0])
    time.sleep(0.5)
    assert not alive(child)


def test_the_load_runs_while_inside_and_is_gone_after():
    with busy_cores(2, at_most_s=60) as load:
        time.sleep(1.5)
        used = load.cores_used()
        pids = load.pids
    assert used is None or used > 0, used
    assert not any(alive(pid) for pid in pids)
