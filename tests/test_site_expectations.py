"""Each page's expectations (docs/_ext/effpt_site/expectations.py) load with their page and
the build log ends with what did not hold, never failing the build.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from sphinx.errors import ExtensionError


def _write_expectations(app, stem, lines):
    folder = Path(app.srcdir) / "auto" / "_expectations"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _expectation(verdict_ratio, **kwargs):
    from effpt.expect import expect

    return expect("x beats y", verdict_ratio, device="cpu", show=False, **kwargs).to_dict()


def test_expectations_load_with_their_page_in_reading_order(app):
    from effpt_site import expectations

    _write_expectations(app, "plot_a", [json.dumps(_expectation(2.0, above=1.0))])
    (row,) = expectations.load_expectations(app)
    assert (row.page, row.docname, row.expectation.verdict) == (
        "plot_a",
        "auto/fam/plot_a",
        "holds here",
    )


def test_expectations_of_an_unknown_page_fail_the_build(app):
    from effpt_site import expectations

    _write_expectations(app, "plot_gone", [json.dumps(_expectation(2.0, above=1.0))])
    with pytest.raises(ExtensionError, match="unknown page 'plot_gone'"):
        expectations.load_expectations(app)


def test_a_malformed_expectation_fails_the_build_naming_file_and_line(app):
    from effpt_site import expectations

    path = _write_expectations(app, "plot_a", ['{"statement": "x"}'])
    with pytest.raises(ExtensionError, match=rf"{path}:1: missing fields"):
        expectations.load_expectations(app)


def test_the_build_log_ends_with_what_did_not_hold_and_never_fails(app, caplog):
    from effpt_site import expectations

    lines = [_expectation(2.0, above=1.0), _expectation(0.5, above=1.0)]
    _write_expectations(app, "plot_a", [json.dumps(e) for e in lines])
    app.builder = SimpleNamespace(name="html")
    app.config.language = "en"
    with caplog.at_level("INFO"):
        expectations.report(app, None)
    text = caplog.text
    assert "2 expectations: 1 hold here, 1 do not, 0 inconclusive" in text
    assert "did not hold: plot_a: x beats y (expected above 1×, measured 0.5×)" in text
