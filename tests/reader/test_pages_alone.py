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
import subprocess
import sys
from pathlib import Path

import pytest
from page_runner import ROOT, SCRIPTS, START_METHODS, page_id, run_page, starts_processes

PYTHON = os.environ.get("EFFPT_READER_PYTHON", "")
# Spawned workers re-import torch; on a busy 2-core machine a data page took 500 s.
TIMEOUT_S = 900
#: Where each page's expectations from this run land, for the stand-ins' report
#: (nox -s standins prints them as the "native" column).
NATIVE = ROOT / "docs" / "_build" / "standins" / "native"


def imported_roots(script: Path) -> set[str]:
    """The top-level modules a script imports (``import a.b`` and ``from a import b``)."""
    roots = set()
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


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
    result = run_page(script, tmp_path, python=PYTHON, timeout_s=TIMEOUT_S)
    NATIVE.mkdir(parents=True, exist_ok=True)
    (NATIVE / f"{script.stem}.jsonl").write_text(
        result.expectations_file.read_text(encoding="utf-8"), encoding="utf-8"
    )
    if not result.ok:
        pytest.fail(result.failure(), pytrace=False)


WORKER_PAGES = [s for s in SCRIPTS if starts_processes(s)]


# nox -s standins runs these pages under every start method too (one per stand-in), so
# CI deselects this test; `nox -s reader` alone still covers all three.
@pytest.mark.parametrize("method", START_METHODS)
@pytest.mark.parametrize("script", WORKER_PAGES, ids=page_id)
def test_page_that_starts_processes_runs_under_each_start_method(script, method, tmp_path):
    result = run_page(script, tmp_path, python=PYTHON, start_method=method, timeout_s=TIMEOUT_S)
    if not result.ok:
        pytest.fail(result.failure(), pytrace=False)


def test_worker_pages_were_found():
    assert WORKER_PAGES, "no page starts processes? the STARTS_PROCESSES pattern is stale"
