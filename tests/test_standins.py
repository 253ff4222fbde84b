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


def page(seconds: float | None, ok: bool | None = True) -> dict:
    return {"ok": ok, "seconds": seconds, "expectations": []}


def test_pages_over_their_budget_are_named_with_seconds_and_stand_in(capsys):
    columns = {
        "native": {"pages": {"data/plot_a.py": {"ok": None, "expectations": []}}},
        "one-thread": {
            "pages": {
                "data/plot_a.py": page(40.04),
                "data/plot_b.py": page(15.0),  # at the budget: within it
                "data/plot_c.py": page(15.1),
            }
        },
        "busy": {"pages": {"data/plot_a.py": page(16.26), "data/plot_c.py": page(99.0, ok=False)}},
    }
    lines = standins.over_budget(columns)
    assert lines == [
        "over budget (15 s): data/plot_a.py 40.0 s on one-thread",
        "over budget (15 s): data/plot_c.py 15.1 s on one-thread",
        "over budget (15 s): data/plot_a.py 16.3 s on busy",
    ]
    standins.print_table(columns, {}, {})
    printed = capsys.readouterr().out
    assert printed.rstrip().endswith("over budget (15 s): data/plot_a.py 16.3 s on busy")
    assert "over budget (15 s): data/plot_b.py" not in printed


def test_a_run_within_budget_says_so(capsys):
    columns = {"avx2": {"pages": {"data/plot_a.py": page(3.2)}}}
    assert standins.over_budget(columns) == []
    standins.print_table(columns, {}, {})
    assert "every page within its budget (15 s) on every stand-in" in capsys.readouterr().out
