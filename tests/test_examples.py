"""Every gallery script runs as a plain ``python`` process, as a reader who copied it would.

Each runs as ``__main__`` in a fresh interpreter with a non-interactive matplotlib
backend, under the docs build's warning policy (deprecations from torch, NumPy, effpt
or the page itself are errors; see effpt_site.hooks.apply_warning_policy).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "examples").rglob("plot_*.py"))
TIMEOUT_S = 600

# `python -W` cannot scope a filter to a module pattern, so a two-line runner applies
# the policy and then runs the script exactly as `python script.py` would.
RUNNER = (
    "import runpy, sys; from effpt_site.hooks import apply_warning_policy; "
    "apply_warning_policy(); sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def test_gallery_is_not_empty():
    assert SCRIPTS, "no examples/**/plot_*.py found"


@pytest.mark.gallery
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT / "examples")))
def test_script_runs_as_plain_python(script, tmp_path):
    # The runner takes the warning policy from the site's extension (docs/_ext).
    ext = str(ROOT / "docs" / "_ext")
    pythonpath = os.pathsep.join(filter(None, [ext, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0", "PYTHONPATH": pythonpath}
    env.pop("EFFPT_RECORDS_FILE", None)
    result = subprocess.run(
        [sys.executable, "-c", RUNNER, str(script)],
        cwd=tmp_path,  # a reader's own folder: nothing may depend on the repository layout
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"{script.relative_to(ROOT)} exited with {result.returncode}\n"
            f"--- stderr (last 3000 chars) ---\n{result.stderr[-3000:]}",
            pytrace=False,
        )
