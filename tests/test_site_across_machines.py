"""effpt_site/across_machines.py: the columns of evidence, computed once per build.

Every example page's verdict box and the measurements page ask for the same columns
(this build's run and each evidence record); they are read once and read again only
when a record, a page's output or a page's source changed. The columns' contents are
tested in test_site_evidence.py.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from minisite import family_of_one, stub_app

from effpt.expect import expect
from effpt.machine import Machine
from effpt_site import across_machines as across

CPU = Machine("cpu", "x86_64 CPU (AMD EPYC)", 2, None, "2.13.0")
PAGE = '"""\nA\n=\n"""\n'


def _expectation(statement, value):
    return expect(
        statement, (value, value * 0.95, value * 1.05), above=1.0, device="cpu", show=False
    ).to_dict()


def record(*, expectations=()):
    """A FIXTURE record (no real machine's evidence) of page fam/plot_a, run from PAGE."""
    machine = {
        **Machine("cpu", "x86_64 CPU (Fixture CPU)", 4, None, "2.13.0").to_dict(),
        "cpu_model": "Fixture CPU",
        "capability": "AVX2",
        "flags": ["avx2", "fma"],
    }
    page = {
        "source_sha256": hashlib.sha256(PAGE.encode()).hexdigest(),
        "ran": True,
        "error": None,
        "seconds": 1.5,
        "peak_gpu_bytes": None,
        "device": "cpu",
        "expectations": list(expectations),
        "claims": [],
    }
    return {
        "format": 1,
        "machine": machine,
        "standin": "fixture",
        "environment": {},
        "created": "2026-11-27",
        "source": "standins",
        "pages": {"fam/plot_a": page},
    }


def write(folder: Path, name: str, data) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")


def records_dir(app) -> Path:
    return Path(app.srcdir) / "evidence"


@pytest.fixture
def app(tmp_path):
    """A one-family gallery (page plot_a) with this build's run of it."""
    family_of_one(tmp_path, PAGE)
    out = tmp_path / "docs" / "auto"
    (out / "_records").mkdir(parents=True)
    (out / "_expectations").mkdir()
    stamp = {"executed_at": "2026-11-27 11:00 UTC", "machine": CPU.to_dict()}
    (out / "_records" / "plot_a.stamp.json").write_text(json.dumps(stamp), encoding="utf-8")
    line = json.dumps(_expectation("x beats y", 2.0)) + "\n"
    (out / "_expectations" / "plot_a.jsonl").write_text(line, encoding="utf-8")
    return stub_app(tmp_path, effpt_evidence_dir="evidence", language="en")


def _counting(monkeypatch):
    calls = []
    real = across.read_records

    def counted(app):
        calls.append(app)
        return real(app)

    monkeypatch.setattr(across, "read_records", counted)
    return calls


def test_the_columns_are_read_once_while_nothing_changes(app, monkeypatch):
    write(records_dir(app), "box", record(expectations=[_expectation("x beats y", 0.5)]))
    calls = _counting(monkeypatch)
    first = across.columns(app)
    assert [c.key for c in across.columns(app)] == [c.key for c in first] == ["this-build", "box"]
    assert len(calls) == 1


def test_the_columns_follow_a_new_record_a_rewritten_output_and_an_edited_page(app, monkeypatch):
    calls = _counting(monkeypatch)
    assert [c.key for c in across.columns(app)] == ["this-build"]
    write(records_dir(app), "box", record(expectations=[_expectation("x beats y", 0.5)]))
    cols = across.columns(app)
    assert [c.key for c in cols] == ["this-build", "box"]
    assert cols[1].pages["plot_a"].current
    # this build's run: another expectation written by the page
    out = records_dir(app).parent / "auto" / "_expectations" / "plot_a.jsonl"
    out.write_text(json.dumps(_expectation("q beats r", 2.0)) + "\n", encoding="utf-8")
    (here,) = [c for c in across.columns(app) if c.key == "this-build"]
    assert [e.statement for e in here.pages["plot_a"].expectations] == ["q beats r"]
    # the page's source edited: the record no longer ran the current page
    page = records_dir(app).parents[1] / "examples" / "fam" / "plot_a.py"
    page.write_text(page.read_text() + "# edited\n", encoding="utf-8")
    assert not across.columns(app)[1].pages["plot_a"].current
    assert len(calls) == 4
