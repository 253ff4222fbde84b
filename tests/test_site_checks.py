"""The site's build checks (docs/_ext/effpt_site.py) fail loudly and name what is wrong."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from sphinx.errors import ExtensionError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "_ext"))
import effpt_site

GOOD = {
    "task": "t",
    "variant": "v",
    "median_s": 0.001,
    "iqr_s": 0.0001,
    "q1_s": 0.00095,
    "q3_s": 0.00105,
    "repeats": 3,
    "number": 10,
    "baseline": "v",
    "machine": "cpu",
}


@pytest.fixture
def app(tmp_path):
    family = tmp_path / "examples" / "fam"
    family.mkdir(parents=True)
    (family / "GALLERY_HEADER.rst").write_text(
        "Fam\n---\n\nIntro.\n\n.. reading order:\n   plot_a.py\n", encoding="utf-8"
    )
    (tmp_path / "docs" / "auto" / "_records").mkdir(parents=True)
    config = SimpleNamespace(
        sphinx_gallery_conf={"examples_dirs": "../examples", "gallery_dirs": "auto"},
        effpt_families=["fam"],
    )
    return SimpleNamespace(srcdir=str(tmp_path / "docs"), config=config)


def write_records(app, stem, lines):
    path = Path(app.srcdir) / "auto" / "_records" / f"{stem}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_valid_records_load_with_their_page(app):
    write_records(app, "plot_a", [json.dumps(GOOD)])
    (row,) = effpt_site.load_records(app)
    assert row["page"] == "plot_a"
    assert row["docname"] == "auto/fam/plot_a"


@pytest.mark.parametrize(
    "line",
    [
        "{not json",
        json.dumps({k: v for k, v in GOOD.items() if k != "median_s"}),
        json.dumps({**GOOD, "median_s": "fast"}),
        json.dumps({**GOOD, "median_s": -1.0}),
    ],
)
def test_malformed_record_fails_naming_the_file(app, line):
    path = write_records(app, "plot_a", [json.dumps(GOOD), line])
    with pytest.raises(ExtensionError, match=rf"malformed measurement record {path}:2"):
        effpt_site.load_records(app)


def test_record_from_an_unknown_page_fails(app):
    path = write_records(app, "plot_gone", [json.dumps(GOOD)])
    with pytest.raises(ExtensionError, match=rf"{path} comes from an unknown page 'plot_gone'"):
        effpt_site.load_records(app)


def test_page_without_closing_summary_fails(tmp_path):
    page = tmp_path / "plot_x.py"
    page.write_text('"""\nT\n=\n\nIntro.\n"""\n\n# %%\n# Details\n# -------\nx = 1\n')
    with pytest.raises(
        ExtensionError, match=r"plot_x\.py: the last cell must be a closing summary"
    ):
        effpt_site._check_example_source(page)
    page.write_text(page.read_text() + "\n# %%\n# Summary\n# -------\n# - done\n")
    effpt_site._check_example_source(page)  # no error


def test_figure_that_did_not_render_fails(tmp_path):
    broken = tmp_path / "sphx_glr_plot_x_001.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    with pytest.raises(ExtensionError, match=r"auto/fam/plot_x: figure sphx_glr_plot_x_001\.png"):
        effpt_site._check_image(broken, "auto/fam/plot_x")


def test_claim_whose_page_ran_without_the_task_fails(monkeypatch):
    monkeypatch.setattr(
        effpt_site, "CLAIMS", [("claim", "plot_a", "other task", "slow", "fast", 2.0)]
    )
    rows = [{**GOOD, "page": "plot_a", "docname": "auto/fam/plot_a"}]
    with pytest.raises(ExtensionError, match="claim 'claim': no records"):
        effpt_site.claim_lines(rows)


def test_claim_is_judged_against_the_measured_ratio(monkeypatch):
    monkeypatch.setattr(
        effpt_site, "CLAIMS", [("claim", "plot_a", "size …", "slow", "fast|faster", 2.0)]
    )
    base = {**GOOD, "page": "plot_a", "docname": "d", "baseline": "slow"}
    rows = [
        {**base, "task": "size 1", "variant": "slow", "median_s": 1.0},
        {**base, "task": "size 1", "variant": "fast", "median_s": 0.1},
        {**base, "task": "size 2", "variant": "slow", "median_s": 1.0},
        {**base, "task": "size 2", "variant": "faster", "median_s": 0.8},
    ]
    text = "\n".join(effpt_site.claim_lines(rows))
    assert "1.25× on cpu" in text  # the largest size ("size 2") is the one judged
    assert text.rstrip().endswith("- no")
