"""The data pages start worker processes: each must run without a ``__file__`` too.

The reader's test (tests/reader, ``nox -s reader``) runs each page copied alone under
fork, forkserver and spawn. This test adds the way the docs build and a notebook run a
page: executed without a ``__file__`` (sphinx-gallery never sets one) while the default
start method is spawn, where the page must start its workers by fork because nothing
could re-import it. Deprecation warnings are errors, as in the docs build. (The other
modes stay available here for a quick local check: ``-k "fork or spawn"`` after
adding them to MODES.)
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "examples" / "data").glob("plot_*.py"))
TIMEOUT_S = 900

AS_SCRIPT = (
    "import multiprocessing as mp, runpy, sys; mp.set_start_method({method!r}, force=True); "
    "sys.argv = [{name!r}]; runpy.run_path({name!r}, run_name='__main__')"
)
# sphinx-gallery's way: the page's code in a dict of globals with no __file__.
AS_GALLERY = (
    "import multiprocessing as mp; mp.set_start_method('spawn', force=True); "
    "code = compile(open({name!r}).read(), {name!r}, 'exec'); exec(code, {{'__name__': '__main__'}})"
)
WARNINGS = [
    "-W",
    "error::DeprecationWarning",
    "-W",
    "error::FutureWarning",
    # Python >= 3.12 warns about fork() in a process with threads; that is Python's
    # warning about the fork start method, not a deprecation the pages teach.
    "-W",
    "ignore:This process:DeprecationWarning",
]


MODES = ["gallery"]


@pytest.mark.gallery
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_runs_under_every_start_method(page, mode, tmp_path):
    method = "spawn" if mode == "gallery" else mode
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"start method {method!r} is not available here")
    shutil.copy(page, tmp_path / page.name)
    template = AS_GALLERY if mode == "gallery" else AS_SCRIPT
    code = template.format(method=method, name=page.name)
    env = {**os.environ, "MPLBACKEND": "Agg"}
    env.pop("EFFPT_RECORDS_FILE", None)
    result = subprocess.run(
        [sys.executable, *WARNINGS, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, f"{page.name} ({mode}):\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
