"""Every gallery script runs as a plain ``python`` process, as a reader who copied it would.

The interpreter runs with deprecation warnings as errors, the same policy the docs
build applies, and a non-interactive matplotlib backend.
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


def test_gallery_is_not_empty():
    assert SCRIPTS, "no examples/**/plot_*.py found"


@pytest.mark.gallery
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT / "examples")))
def test_script_runs_as_plain_python(script, tmp_path):
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0"}
    env.pop("EFFPT_RECORDS_FILE", None)
    result = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-W", "error::FutureWarning", script],
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
