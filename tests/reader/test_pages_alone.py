"""The reader's test: every gallery page, copied alone into an empty folder, runs.

``nox -s reader`` builds effpt's wheel, installs it (and nothing else of this
repository) into a fresh virtual environment, and points ``EFFPT_READER_PYTHON`` at
that environment's interpreter. Each page is then copied alone into an empty folder
and run there with ``python plot_x.py``, exactly as its install line tells a reader.
Pages that start processes also run under each start method, as they would on
macOS and Windows (spawn) and on Linux from Python 3.14 (forkserver).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "examples").rglob("plot_*.py"))
PYTHON = os.environ.get("EFFPT_READER_PYTHON", "")
# Spawned workers re-import torch; on a busy 2-core machine a data page took 500 s.
TIMEOUT_S = 900
#: Pages whose code starts processes (DataLoader workers, distributed ranks).
STARTS_PROCESSES = re.compile(r"num_workers\s*=\s*[1-9a-z]|multiprocessing|torch\.distributed")
START_METHODS = ("fork", "forkserver", "spawn")
# Runs a page as `python plot_x.py` would, after choosing the start method.
WITH_START_METHOD = (
    "import multiprocessing as mp, runpy, sys; mp.set_start_method(sys.argv[1], force=True); "
    "sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def page_id(path: Path) -> str:
    return str(path.relative_to(ROOT / "examples"))


def imported_roots(script: Path) -> set[str]:
    """The top-level modules a script imports (``import a.b`` and ``from a import b``)."""
    roots = set()
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def run_alone(script: Path, folder: Path, *launcher: str) -> subprocess.CompletedProcess:
    """Copy ``script`` alone into ``folder`` and run it there with the reader's Python."""
    shutil.copy2(script, folder / script.name)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "EFFPT_", "VIRTUAL_ENV", "NOX_"))
    }
    env.update(MPLBACKEND="Agg", OMP_WAIT_POLICY="PASSIVE")
    return subprocess.run(
        [PYTHON, *launcher, script.name],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def fail_with(script: Path, result: subprocess.CompletedProcess, how: str) -> None:
    missing = re.search(r"ModuleNotFoundError: No module named '([^']+)'", result.stderr)
    if missing:
        pytest.fail(
            f"{page_id(script)} imports {missing.group(1)!r}, which its install line "
            "does not provide",
            pytrace=False,
        )
    pytest.fail(
        f"{page_id(script)} ({how}) exited with {result.returncode}\n"
        f"--- stderr (last 3000 chars) ---\n{result.stderr[-3000:]}",
        pytrace=False,
    )


def test_the_reader_environment_has_no_access_to_the_repository():
    probe = subprocess.run(
        [PYTHON, "-c", "import effpt, sys; print(effpt.__file__); print(sys.path)"],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    effpt_file, path = probe.stdout.splitlines()
    assert not Path(effpt_file).is_relative_to(ROOT), effpt_file
    assert not any(Path(p).is_relative_to(ROOT) for p in ast.literal_eval(path) if p), path


@pytest.mark.parametrize("script", SCRIPTS, ids=page_id)
def test_page_imports_only_what_its_install_line_provides(script):
    roots = sorted(imported_roots(script) - set(sys.stdlib_module_names))
    probe = "import importlib.util, sys; print([m for m in sys.argv[1:] if not importlib.util.find_spec(m)])"
    result = subprocess.run(
        [PYTHON, "-c", probe, *roots], capture_output=True, text=True, check=True, cwd="/"
    )
    missing = ast.literal_eval(result.stdout.strip())
    assert not missing, (
        f"{page_id(script)} imports {missing}, which its install line does not provide"
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=page_id)
def test_page_runs_alone_in_an_empty_folder(script, tmp_path):
    result = run_alone(script, tmp_path)
    if result.returncode != 0:
        fail_with(script, result, "python " + script.name)


WORKER_PAGES = [s for s in SCRIPTS if STARTS_PROCESSES.search(s.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("method", START_METHODS)
@pytest.mark.parametrize("script", WORKER_PAGES, ids=page_id)
def test_page_that_starts_processes_runs_under_each_start_method(script, method, tmp_path):
    result = run_alone(script, tmp_path, "-c", WITH_START_METHOD, method)
    if result.returncode != 0:
        fail_with(script, result, f"start method {method}")


def test_worker_pages_were_found():
    assert WORKER_PAGES, "no page starts processes? the STARTS_PROCESSES pattern is stale"
