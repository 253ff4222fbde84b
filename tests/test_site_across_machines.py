"""Evidence records beside this build's run (docs/_ext/effpt_site/across_machines.py).

docs/_tools/evidence.py reads the records (docs/evidence/*.json; its tests, the
hand-written fixture's included, are in tests/test_evidence.py); across_machines.py
makes this build and each record a column of the measurements page's grid and links
each page's verdict lines to their rows. The records here are FIXTURES made by the
tests (tests/evidence_fixtures holds one written by hand): none of them is a real
machine's evidence.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from minisite import (
    BUILT_EXTENSIONS,
    BUILT_PAGE,
    build,
    family_of_one,
    one_page_gallery,
    stub_app,
)
from sphinx.errors import ExtensionError

from effpt.expect import expect
from effpt.machine import Machine
from effpt_site import across_machines as across
from effpt_site.i18n import translator

FIXTURES = Path(__file__).resolve().parent / "evidence_fixtures"
CPU = Machine("cpu", "x86_64 CPU (AMD EPYC)", 2, None, "2.13.0")
PAGE = '"""\nA\n=\n"""\n'


def _expectation(statement, value, above=1.0, device="cpu"):
    ratio = (value, value * 0.95, value * 1.05)
    return expect(statement, ratio, above=above, device=device, show=False).to_dict()


def record(page_source=PAGE, *, expectations=(), claims=(), standin=None, name="Fixture CPU"):
    """A fixture record of one page, ``fam/plot_a``, run from ``page_source``."""
    machine = {
        **Machine("cpu", f"x86_64 CPU ({name})", 4, None, "2.13.0").to_dict(),
        "cpu_model": name,
        "capability": "AVX2",
        "flags": ["avx2", "fma"],
    }
    page = {
        "source_sha256": hashlib.sha256(page_source.encode()).hexdigest(),
        "ran": True,
        "error": None,
        "seconds": 1.5,
        "peak_gpu_bytes": None,
        "device": "cpu",
        "expectations": list(expectations),
        "claims": list(claims),
    }
    return {
        "format": 1,
        "machine": machine,
        "standin": standin,
        "environment": {},
        "created": "2026-11-27",
        "source": "standins" if standin else "docs build",
        "pages": {"fam/plot_a": page},
    }


def write(folder: Path, name: str, data) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# The reader (docs/_tools/evidence.py) and its damaged records: tests/test_evidence.py.
# The catalogue template of the records' statements: tests/test_site_messages.py.


# -- the columns and cells (effpt_site/across_machines.py) ----------------------------


@pytest.fixture
def app(tmp_path):
    """A one-family gallery (page plot_a) with this build's run of it and a records folder."""
    family_of_one(tmp_path, PAGE)
    out = tmp_path / "docs" / "auto"
    (out / "_records").mkdir(parents=True)
    (out / "_expectations").mkdir()
    stamp = {"executed_at": "2026-11-27 11:00 UTC", "machine": CPU.to_dict()}
    (out / "_records" / "plot_a.stamp.json").write_text(json.dumps(stamp), encoding="utf-8")
    lines = [_expectation("x beats y", 2.0), _expectation("z beats w", 3.0)]
    (out / "_expectations" / "plot_a.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8"
    )
    return stub_app(
        tmp_path,
        effpt_evidence_dir="evidence",
        effpt_measurements_doc="measurements",
        language="en",
    )


def records_dir(app) -> Path:
    return Path(app.srcdir) / "evidence"


T = translator("en")


def test_this_build_and_each_record_are_columns_and_every_expectation_a_row(app):
    write(records_dir(app), "b-box", record(expectations=[_expectation("x beats y", 0.5)]))
    write(records_dir(app), "a-box", record(expectations=[_expectation("only there", 2.0)]))
    cols = across.columns(app)
    assert [c.key for c in cols] == ["this-build", "a-box", "b-box"]
    assert cols[0].machine == CPU
    rows = across.rows(app, cols)
    assert [r.key for r in rows if r.kind == "expect"] == ["x beats y", "z beats w", "only there"]
    x = rows[0]
    assert across.cell(x, cols[0], T).text == "2.0× (1.9–2.1) holds"
    assert across.cell(x, cols[2], T).text == "0.50× (0.47–0.53) does not hold"
    # a-box ran this version of the page and did not state it: it does not apply there
    assert across.cell(x, cols[1], T).text == "not applicable here"
    assert not across.cell(x, cols[2], T).older


def test_evidence_from_an_older_version_of_the_page_is_marked_never_current(app):
    old = record("an older page\n", expectations=[_expectation("x beats y", 2.0)])
    write(records_dir(app), "box", old)
    cols = across.columns(app)
    x = across.rows(app, cols)[0]
    cell = across.cell(x, cols[1], T)
    assert cell.older
    assert cell.text == "2.0× (1.9–2.1) holds"
    # and the page's sentence does not count it as current evidence
    assert across.summary(x, cols, T) == (
        "Not yet recorded on another machine with this version of the page. "
        "1 more recorded an older version of the page."
    )


def test_the_summary_counts_the_records_and_names_where_it_did_not_hold(app):
    write(records_dir(app), "a", record(expectations=[_expectation("x beats y", 2.0)], name="A"))
    write(records_dir(app), "b", record(expectations=[_expectation("x beats y", 0.5)], name="B"))
    write(
        records_dir(app),
        "c",
        record(standin="one thread", expectations=[_expectation("x beats y", 1.0)]),
    )
    cols = across.columns(app)
    x = across.rows(app, cols)[0]
    assert across.summary(x, cols, T) == (
        "Elsewhere: holds on 1 of 3 machines recorded; does not hold on B (AVX2); "
        "inconclusive on the one thread stand-in."
    )
    assert cols[3].header(T) == (
        "Stand-in one thread: x86_64 CPU (Fixture CPU), 4 threads · AVX2 · torch 2.13.0"
    )


def test_a_claim_from_another_device_class_is_not_applicable_there(app):
    claims_dir = Path(app.srcdir) / "auto" / "_claims"
    claims_dir.mkdir()
    # plot_a stands in for the page of a GPU claim: effpt.claims names its page plot_timing_pytorch_code
    family = Path(app.srcdir).parent / "examples" / "fam"
    (family / "plot_a.py").rename(family / "plot_timing_pytorch_code.py")
    header = family / "GALLERY_HEADER.rst"
    header.write_text(header.read_text().replace("plot_a.py", "plot_timing_pytorch_code.py"))
    out = Path(app.srcdir) / "auto"
    for folder in ("_records", "_expectations"):
        for p in (out / folder).glob("plot_a*"):
            p.rename(p.with_name(p.name.replace("plot_a", "plot_timing_pytorch_code")))
    outcome = _scored_then("not comparable")
    (claims_dir / "plot_timing_pytorch_code.jsonl").write_text(json.dumps(outcome) + "\n")
    cols = across.columns(app)
    (row,) = [r for r in across.rows(app, cols) if r.kind == "claim"]
    assert across.cell(row, cols[0], T).text == "not applicable here"
    assert across.expected(row, cols, T) == "Thomas Viehmann's ACDL 2020 notebook: 8.58×"


def test_a_malformed_expectation_inside_a_record_names_file_and_field(app):
    bad = _expectation("x beats y", 2.0)
    bad["verdict"] = "maybe"
    path = write(records_dir(app), "box", record(expectations=[bad]))
    with pytest.raises(ExtensionError) as info:
        across.columns(app)
    message = str(info.value)
    assert str(path) in message
    assert "field 'pages['fam/plot_a'].expectations[0]'" in message
    assert "verdict must be one of" in message


def test_a_bad_machine_in_a_record_fails_the_build_naming_file_and_field(app):
    data = record()
    data["machine"]["cuda"] = "12.8"  # a CPU with a CUDA version
    path = write(records_dir(app), "box", data)
    with pytest.raises(
        ExtensionError, match=r"box\.json: field 'machine.cuda': machine field 'cuda'"
    ):
        across.columns(app)
    assert path.is_file()


def test_a_record_of_a_page_that_no_longer_exists_is_reported_not_dropped(app, caplog):
    data = record(expectations=[_expectation("x beats y", 2.0)])
    data["pages"]["fam/plot_gone"] = copy.deepcopy(data["pages"]["fam/plot_a"])
    path = write(records_dir(app), "box", data)
    assert across.unknown_pages(app) == [(path, "fam/plot_gone")]
    app.builder = SimpleNamespace(name="html")
    with caplog.at_level("INFO"):
        across.report_unknown(app, None)
    assert f"{path} holds page 'fam/plot_gone', which the gallery no longer has" in caplog.text
    assert len(across.columns(app)) == 2  # the rest of the record still counts


def test_row_anchors_are_stable_and_distinct():
    a = across.Row("expect", "fam", "plot_a_b", "auto/fam/plot_a_b", "x beats y")
    b = across.Row("expect", "fam", "plot_a_b", "auto/fam/plot_a_b", "x beats z")
    assert a.anchor.startswith("expect-a-b-")
    assert a.anchor != b.anchor
    assert a.anchor == across.Row("expect", "other", "plot_a_b", "d", "x beats y").anchor


# -- a one-page site: the grid, and the page's verdict line linked to its row ----------


def site(tmp_path) -> Path:
    """A one-page gallery (the page and extensions of tests/minisite.py's one small real
    build), a measurements page and one fixture record.

    The page is named as the page of two of effpt.claims's claims, so that they are rows.
    """
    script = BUILT_PAGE
    measurements = "Measurements\n============\n\nThe grid\n--------\n\n.. effpt-expectations::\n"
    docs = one_page_gallery(
        tmp_path,
        "plot_batch_gather.py",
        script,
        extensions=BUILT_EXTENSIONS,
        pages={"measurements": measurements},
        conf_extra='effpt_evidence_dir = "records"',
    )
    statement = "the fixture sum beats the loop"
    data = record(script, expectations=[_expectation(statement, 0.5)], name="Slow")
    data["pages"] = {"fam/plot_batch_gather": data["pages"]["fam/plot_a"]}
    write(docs / "records", "slow-box", data)
    return docs


@pytest.mark.parametrize(
    ("language", "words"),
    [
        (
            "en",
            (
                "This build: ",
                "does not hold",
                "Elsewhere: holds on 0 of 1 machines recorded; does not hold on Slow (AVX2).",
                "Claim: ",
                "Expected above 1×. This build: 2.0× (1.9–2.1) on x86_64 CPU",
                '<strong class="effpt-verdict-word effpt-holds">holds here</strong>',
            ),
        ),
        (
            "zh_CN",
            (
                "本次构建：",
                "不成立",
                "其他机器上：在有记录的 1 台机器中的 0 台上成立；在 Slow (AVX2) 上不成立。",
                "说法：",
                "预期高于 1×。本次构建在 x86_64 CPU",
                '<strong class="effpt-verdict-word effpt-holds">在此成立</strong>',
            ),
        ),
    ],
)
def test_a_page_links_its_verdict_to_its_row_and_the_grid_names_each_machine_once(
    tmp_path, language, words
):
    docs = site(tmp_path)
    out = tmp_path / f"html-{language}"
    build(docs, out, language=language)
    grid = (out / "measurements.html").read_text(encoding="utf-8")
    page = (out / "auto" / "fam" / "plot_batch_gather.html").read_text(encoding="utf-8")
    anchor = across.Row(
        "expect",
        "fam",
        "plot_batch_gather",
        "auto/fam/plot_batch_gather",
        "the fixture sum beats the loop",
    ).anchor
    assert f'<tr class="row-odd" id="{anchor}">' in grid or f'id="{anchor}"' in grid
    this_build, missed, link, claim_row, here, verdict = words
    head = grid[grid.index("<thead>") : grid.index("</thead>")]
    assert this_build in head
    assert head.count("Slow") == 1  # the record's machine, named once, in the header
    body = grid[grid.index("<tbody>") : grid.index("</tbody>")]
    assert "Slow" not in body  # and not in its cells
    assert "0.50× (0.47–0.53) " + missed in body
    # the page's claims (effpt.claims names plot_batch_gather for two) are rows too
    assert body.count(claim_row) == 2
    # the verdict box: the statement leads to its row; this build's value and verdict
    # in the build's language; how it fared elsewhere
    statement = "the fixture sum beats the loop"
    box = page[page.index('class="effpt-verdict-box') :]
    box = box[: box.index("</ul>")]
    assert f'href="../../measurements.html#{anchor}">{statement}</a>' in box
    assert here in box
    assert verdict in box
    assert link in box
    # the box sits right after the output that printed the verdict, which stays printed
    printed = page.index("Expectation: the fixture sum beats the loop")
    assert printed < page.index('class="effpt-verdict-box')
    between = page[printed : page.index('class="effpt-verdict-box')]
    assert between.count("<p>") == 0  # no prose between the output and its box


def _scored_then(verdict: str) -> dict:
    """A GPU claim's outcome on a CPU, given ``verdict`` by the rules of its day."""
    rec = {
        "task": "uniformity loss",
        "variant": "pdist",
        "median_s": 0.002,
        "iqr_s": 0.0001,
        "q1_s": 0.00195,
        "q3_s": 0.00205,
        "repeats": 5,
        "number": 10,
        "baseline": "pdist",
        "machine": CPU.to_dict(),
    }
    fast = {**rec, "variant": "matmul", "median_s": 0.001, "q1_s": 0.00095, "q3_s": 0.00105}
    return {
        "key": "notebook: uniformity loss by matmul",
        "verdict": verdict,
        "slow": rec,
        "fast": fast,
    }


def test_an_older_page_versions_claim_is_scored_again_under_todays_rules(app):
    """Rules change (a device class, the interval): an older version's outcome is history,
    read and scored again from its own records, never a reason to stop the build."""
    write(records_dir(app), "box", record("an older page", claims=[_scored_then("yes")]))
    (col,) = [c for c in across.columns(app) if c.key == "box"]
    run = col.pages["plot_a"]
    assert not run.current
    assert run.outcomes["notebook: uniformity loss by matmul"].verdict == "not comparable"


def test_a_current_page_versions_claim_must_be_what_its_records_give(app):
    path = write(records_dir(app), "box", record(claims=[_scored_then("yes")]))
    with pytest.raises(ExtensionError) as info:
        across.columns(app)
    assert str(path) in str(info.value)
    assert "claims[0]" in str(info.value)


def test_a_record_of_this_builds_own_machine_is_not_another_column(app):
    """This build is its machine's newest run: its record would repeat it as 'elsewhere'."""
    mine = record(expectations=[_expectation("x beats y", 2.0)])
    mine["machine"] = {**mine["machine"], **CPU.to_dict()}
    write(records_dir(app), "this-box", mine)
    write(records_dir(app), "other-box", record(expectations=[_expectation("x beats y", 0.5)]))
    standin = record(expectations=[_expectation("x beats y", 3.0)], standin="one-thread")
    standin["machine"] = {**standin["machine"], **CPU.to_dict()}
    write(records_dir(app), "this-box-standin", standin)
    cols = across.columns(app)
    assert [c.key for c in cols] == ["this-build", "other-box", "this-box-standin"]
    (x,) = [r for r in across.rows(app, cols) if r.key == "x beats y"]
    text = across.summary(x, cols, T)
    assert "holds on 1 of 2 machines recorded" in text


# -- the columns, computed once per build ---------------------------------------------


def test_the_columns_are_read_once_while_nothing_changes(app, calls_to):
    write(records_dir(app), "box", record(expectations=[_expectation("x beats y", 0.5)]))
    calls = calls_to(across, "read_records")
    first = across.columns(app)
    assert [c.key for c in across.columns(app)] == [c.key for c in first] == ["this-build", "box"]
    assert len(calls) == 1


def test_the_columns_follow_a_new_record_a_rewritten_output_and_an_edited_page(app, calls_to):
    calls = calls_to(across, "read_records")
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
