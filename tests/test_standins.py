"""docs/_tools/standins.py: the stand-ins are defined once, in STANDINS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import standins

ROOT = Path(__file__).resolve().parent.parent
NAMES = [s.name for s in standins.STANDINS]


def test_the_listing_names_each_stand_in_with_what_it_sets():
    lines = standins.listing().splitlines()
    assert [line.split(":")[0] for line in lines] == NAMES
    for line, stand_in in zip(lines, standins.STANDINS, strict=True):
        for key, value in stand_in.env.items():
            assert f"{key}={value}" in line
        assert line.endswith(stand_in.start_method)


def test_a_name_that_is_no_stand_in_is_refused():
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "_tools" / "standins.py"), "--only", "avx3"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "invalid choice: 'avx3'" in result.stderr
