"""The measurements page's records and claims table (docs/_ext/effpt_site/measurements.py)
load, fail naming the file and line, and read naturally.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sphinx.errors import ExtensionError

from effpt import claims
from effpt.machine import Machine
from effpt.records import Record
from effpt_site import measurements

CPU = Machine("cpu", "x86_64 CPU", 2, None, "2.13.0")
H100 = Machine("cuda", "NVIDIA H100 80GB HBM3", None, "12.8", "2.13.0")

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
    "machine": CPU.to_dict(),
}


def write_records(app, stem, lines):
    path = Path(app.srcdir) / "auto" / "_records" / f"{stem}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_valid_records_load_with_their_page(app):
    write_records(app, "plot_a", [json.dumps(GOOD)])
    (row,) = measurements.load_records(app)
    assert row.page == "plot_a"
    assert row.docname == "auto/fam/plot_a"


@pytest.mark.parametrize(
    "line",
    [
        "{not json",
        json.dumps({k: v for k, v in GOOD.items() if k != "median_s"}),
        json.dumps({**GOOD, "median_s": "fast"}),
        json.dumps({**GOOD, "median_s": -1.0}),
        json.dumps({**GOOD, "machine": {**CPU.to_dict(), "threads": None}}),
        json.dumps({**GOOD, "machine": "a fast box"}),
    ],
)
def test_malformed_record_fails_naming_the_file(app, line):
    path = write_records(app, "plot_a", [json.dumps(GOOD), line])
    with pytest.raises(ExtensionError, match=rf"malformed measurement record {path}:2"):
        measurements.load_records(app)


def test_record_from_an_unknown_page_fails(app):
    path = write_records(app, "plot_gone", [json.dumps(GOOD)])
    with pytest.raises(ExtensionError, match=rf"{path} comes from an unknown page 'plot_gone'"):
        measurements.load_records(app)


def test_quartiles_out_of_order_fail(app):
    path = write_records(app, "plot_a", [json.dumps({**GOOD, "q1_s": 0.002})])
    with pytest.raises(ExtensionError, match=rf"{path}:1: .*quartiles out of order"):
        measurements.load_records(app)


def test_a_cuda_record_loads_with_its_machine_fields(app):
    write_records(app, "plot_a", [json.dumps({**GOOD, "machine": H100.to_dict()})])
    (row,) = measurements.load_records(app)
    assert row.machine == H100


def test_a_record_written_before_machines_had_fields_still_loads(app):
    line = "x86_64 CPU (AMD EPYC), 2 threads · torch 2.13.0"
    write_records(app, "plot_a", [json.dumps({**GOOD, "machine": line})])
    (row,) = measurements.load_records(app)
    assert (row.machine.kind, row.machine.threads, str(row.machine)) == ("cpu", 2, line)


# The claims table: each claim with the outcome its own page recorded (effpt.claims).


def _fake_claims(monkeypatch, device="cpu"):
    fake = (claims.Claim("fake", "x is twice as fast", "a source", device, "plot_a", 2.0),)
    monkeypatch.setattr(claims, "CLAIMS", fake)
    monkeypatch.setattr(measurements, "CLAIMS", fake)
    return fake[0]


def _records(machine=CPU, fast_s=0.4):
    def one(variant, median):
        data = {**GOOD, "variant": variant, "baseline": "slow", "machine": machine.to_dict()}
        data |= {"median_s": median, "q1_s": median * 0.99, "q3_s": median * 1.01}
        data["per_call_s"] = [median * f for f in (0.98, 0.99, 1.0, 1.01, 1.02)]  # issue 34
        data["repeats"] = 5
        return Record.from_dict(data)

    return one("slow", 1.0), one("fast", fast_s)


def _check_on_page(app, monkeypatch, stem, *outcomes):
    """Check outcomes as page ``stem`` would in the build: into its claims file."""
    folder = Path(app.srcdir) / "auto" / "_claims"
    folder.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv(claims.CLAIMS_ENV, str(folder / f"{stem}.jsonl"))
    for c, slow, fast in outcomes:
        c.check(slow, fast, show=False)
    return folder / f"{stem}.jsonl"


def test_the_claims_table_shows_what_the_page_recorded(app, monkeypatch):
    c = _fake_claims(monkeypatch)
    _check_on_page(app, monkeypatch, "plot_a", (c, *_records()))
    text = "\n".join(measurements.claim_lines(app))
    assert "x is twice as fast" in text
    assert (
        "2.5× (2.4–2.6) on x86_64 CPU, 2 threads · torch 2.13.0 (:doc:`/auto/fam/plot_a`, t)"
        in text
    )
    assert text.rstrip().endswith("- yes")


def test_a_claim_whose_page_ran_without_checking_it_fails_the_build(app, monkeypatch):
    _fake_claims(monkeypatch)
    write_records(app, "plot_a", [json.dumps(GOOD)])
    with pytest.raises(ExtensionError, match="claim 'fake': plot_a ran but did not check it"):
        measurements.claim_lines(app)


def test_a_claim_whose_page_did_not_run_is_not_measured(app, monkeypatch):
    _fake_claims(monkeypatch)
    text = "\n".join(measurements.claim_lines(app))
    assert text.rstrip().endswith("     - not measured\n     - —")


def test_a_claim_checked_by_another_page_or_twice_fails_naming_the_file(app, monkeypatch):
    c = _fake_claims(monkeypatch)
    path = _check_on_page(app, monkeypatch, "plot_b", (c, *_records()))
    with pytest.raises(ExtensionError, match=rf"{path}: claim 'fake' belongs to plot_a"):
        measurements.claim_lines(app)
    path.unlink()
    path = _check_on_page(app, monkeypatch, "plot_a", (c, *_records()), (c, *_records()))
    with pytest.raises(ExtensionError, match=rf"{path}: claim 'fake' was checked twice"):
        measurements.claim_lines(app)


def test_a_damaged_outcome_file_fails_the_build_naming_file_and_line(app, monkeypatch):
    c = _fake_claims(monkeypatch)
    path = _check_on_page(app, monkeypatch, "plot_a", (c, *_records()))
    path.write_text(path.read_text(encoding="utf-8")[:-40] + "\n", encoding="utf-8")  # cut short
    with pytest.raises(ExtensionError, match=rf"malformed claim outcome {path}:1"):
        measurements.claim_lines(app)


def test_a_gpu_claim_on_a_cpu_build_and_a_fast_variant_that_did_not_run(app, monkeypatch):
    c = _fake_claims(monkeypatch, device="cuda")
    _check_on_page(app, monkeypatch, "plot_a", (c, *_records()))
    text = "\n".join(measurements.claim_lines(app))
    assert "not comparable on this machine: the source measured on a GPU" in text
    assert "yes" not in text.split("not comparable")[1]
    Path(app.srcdir, "auto", "_claims", "plot_a.jsonl").unlink()
    _check_on_page(app, monkeypatch, "plot_a", (c, _records()[0], None))
    text = "\n".join(measurements.claim_lines(app))
    assert "not measured: the faster variant was not timed on x86_64 CPU" in text
    assert "(:doc:`/auto/fam/plot_a`, t)" in text.split("not measured")[1]


def test_a_cpu_claim_on_a_gpu_build_names_the_gpu(app, monkeypatch):
    c = _fake_claims(monkeypatch)
    _check_on_page(app, monkeypatch, "plot_a", (c, *_records(machine=H100)))
    text = "\n".join(measurements.claim_lines(app))
    assert (
        "the source measured on a CPU, this build ran on NVIDIA H100 80GB HBM3 · CUDA 12.8" in text
    )


def test_the_timings_name_each_machine_once_with_its_thread_counts():
    one = Machine("cpu", "x86_64 CPU (AMD EPYC)", 1, None, "2.13.0")
    two = Machine("cpu", "x86_64 CPU (AMD EPYC)", 2, None, "2.13.0")
    rows = [measurements._Row(**{**GOOD, "machine": m}) for m in (two, one, H100)]
    line = measurements._machines_line(rows, lambda text, **values: text.format(**values))
    assert line == (
        "All timings below were taken on NVIDIA H100 80GB HBM3 · CUDA 12.8 · torch 2.13.0; "
        "x86_64 CPU (AMD EPYC) · torch 2.13.0, with 1 or 2 threads."
    )


def test_the_repeats_column_counts_the_calls_that_ran():
    """Issue 35: a block that stopped early ran fewer calls than planned; the table says so."""
    full = measurements._Row(**{**GOOD, "machine": CPU})
    assert measurements._repeats_cell(full) == "3 × 10"
    stopped = measurements._Row(**{**GOOD, "machine": CPU, "calls": (10, 4, 10)})
    assert measurements._repeats_cell(stopped) == "3 × 4–10"
    every = measurements._Row(**{**GOOD, "machine": CPU, "calls": (6, 6, 6)})
    assert measurements._repeats_cell(every) == "3 × 6"
