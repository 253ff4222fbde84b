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

import pytest
from page_runner import ROOT, run_page

PAGES = sorted((ROOT / "examples" / "data").glob("plot_*.py"))
TIMEOUT_S = 900

MODES = ["gallery"]


@pytest.mark.gallery
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_runs_under_every_start_method(page, mode, tmp_path):
    method = "spawn" if mode == "gallery" else mode
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"start method {method!r} is not available here")
    # The shared page runner (docs/_tools/page_runner.py): the page alone in tmp_path, a
    # clean environment, the docs build's warning policy; "gallery" runs its code as
    # sphinx-gallery does (no __file__), any other mode as `python plot_x.py` would.
    result = run_page(
        page,
        tmp_path,
        start_method=method,
        as_gallery=mode == "gallery",
        warning_policy=True,
        timeout_s=TIMEOUT_S,
    )
    assert result.ok, result.failure()
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
