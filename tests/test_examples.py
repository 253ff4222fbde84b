"""Every gallery script runs as a plain ``python`` process, as a reader who copied it would.

Each is copied alone into an empty folder and runs as ``__main__`` in a fresh
interpreter (the page runner, docs/_tools/page_runner.py: clean environment,
non-interactive matplotlib backend), under the docs build's warning policy
(deprecations from torch, NumPy, effpt or the page itself are errors; see
effpt_site.hooks.apply_warning_policy).
"""

from __future__ import annotations

import pytest
from page_runner import SCRIPTS, page_id, run_page

TIMEOUT_S = 600


def test_gallery_is_not_empty():
    assert SCRIPTS, "no examples/**/plot_*.py found"


@pytest.mark.gallery
@pytest.mark.parametrize("script", SCRIPTS, ids=page_id)
def test_script_runs_as_plain_python(script, tmp_path):
    result = run_page(
        script,
        tmp_path,  # a reader's own folder: nothing may depend on the repository layout
        env={"PYTHONHASHSEED": "0"},
        warning_policy=True,
        timeout_s=TIMEOUT_S,
    )
    if not result.ok:
        pytest.fail(result.failure(), pytrace=False)
