"""effpt.claims: each source claim is stated once and held against the records a page names."""

from __future__ import annotations

import json

import pytest

from effpt import claims
from effpt.machine import Machine
from effpt.records import Record

CPU = Machine("cpu", "x86_64 CPU", 2, None, "2.13.0")
H100 = Machine("cuda", "NVIDIA H100 80GB HBM3", None, "12.8", "2.13.0")


def record(variant, median, machine=CPU, task="batch gather, batch 4096"):
    repeats = tuple(median * f for f in (0.98, 0.99, 1.0, 1.01, 1.02))  # quartiles ±1 %
    return Record(
        task,
        variant,
        median,
        median / 50,
        median * 0.99,
        median * 1.01,
        5,
        10,
        "loop",
        machine,
        repeats,
    )


def test_every_claim_names_a_gallery_page_that_checks_it():
    from pathlib import Path

    examples = Path(__file__).parents[1] / "examples"
    for c in claims.CLAIMS:
        (page,) = examples.glob(f"*/{c.page}.py")
        assert f'claim("{c.key}")' in page.read_text(encoding="utf-8"), (c.key, page)
    assert len({c.key for c in claims.CLAIMS}) == len(claims.CLAIMS)


def test_a_gpu_claim_checked_on_a_cpu_is_not_comparable_but_shows_the_ratio(capsys):
    c = claims.claim("guide: vectorised batch gather")
    outcome = c.check(record("python loop", 1e-2), record("flat + offset", 1e-4))
    assert outcome.verdict == "not comparable"
    out = capsys.readouterr().out
    claimed = "The Effective PyTorch guide, on a GPU: A vectorised batch gather is about 100×"
    assert out.startswith(f"{claimed} faster than the loop. Speed-up claimed: 100×.\n")
    here = (
        "here: flat + offset ran 100× (97–103) the speed of python loop (batch gather, batch 4096;"
    )
    assert f"{here} x86_64 CPU, 2 threads · torch 2.13.0)." in out
    assert out.rstrip().endswith("Not comparable: the source measured on a GPU.")


def test_the_same_claim_on_a_gpu_is_scored_against_the_promise():
    c = claims.claim("guide: TorchScript batch gather")
    slow, fast = record("python loop", 1e-2, H100), record("TorchScript loop", 1.2e-2, H100)
    assert c.check(slow, fast, show=False).verdict == "no"  # 0.83×, promised 1.1×
    fast = record("TorchScript loop", 0.98e-2, H100)
    assert c.check(slow, fast, show=False).verdict == "nearly"  # 1.02× (1.00–1.04)
    fast = record("TorchScript loop", 0.85e-2, H100)
    assert c.check(slow, fast, show=False).verdict == "yes"


def test_records_of_two_tasks_or_two_machines_cannot_test_a_claim():
    c = claims.claim("guide: TorchScript batch gather")
    with pytest.raises(
        ValueError,
        match="must time one task on one machine, got 'batch gather, batch 4096' on x86_64",
    ):
        c.check(record("python loop", 1e-2), record("TorchScript loop", 1e-2, task="batch 16"))
    with pytest.raises(ValueError, match="on NVIDIA H100"):
        c.check(record("python loop", 1e-2), record("TorchScript loop", 1e-2, H100))
    with pytest.raises(TypeError, match=r"slow must be an effpt\.records\.Record, got float"):
        c.check(1e-2, None)


def test_outcomes_go_to_the_file_the_build_names_and_read_back(tmp_path, monkeypatch):
    path = tmp_path / "plot_batch_gather.jsonl"
    monkeypatch.setenv(claims.CLAIMS_ENV, str(path))
    c = claims.claim("notebook: fused box IoU")
    written = [
        c.check(record("eager", 2e-4), None, show=False),
        claims.claim("guide: vectorised batch gather").check(
            record("python loop", 1e-2), record("flat + offset", 1e-4), show=False
        ),
    ]
    assert claims.read_outcomes(path) == written
    assert written[0].ratio is None
    assert written[1].ratio.value == pytest.approx(100)


def test_a_damaged_outcome_names_file_line_and_what_is_wrong(tmp_path, monkeypatch):
    path = tmp_path / "page.jsonl"
    monkeypatch.setenv(claims.CLAIMS_ENV, str(path))
    claims.claim("notebook: fused box IoU").check(record("eager", 2e-4), None, show=False)
    good = json.loads(path.read_text(encoding="utf-8"))
    damaged = {
        "verdict": "probably",
        "slow": {**good["slow"], "median_s": -1.0},
        "key": "guide: a claim nobody made",
    }
    for field, value in damaged.items():
        path.write_text(json.dumps({**good, field: value}) + "\n", encoding="utf-8")
        with pytest.raises(
            ValueError,
            match=rf"malformed claim outcome {path}:1: .*{value if field != 'slow' else 'median_s=-1.0'}",
        ):
            claims.read_outcomes(path)
    path.write_text(json.dumps(good)[:50] + "\n", encoding="utf-8")  # a line cut short
    with pytest.raises(ValueError, match=rf"{path}:1"):
        claims.read_outcomes(path)


def test_a_claim_with_a_device_the_sources_never_used_is_refused():
    with pytest.raises(
        ValueError, match="claim 'k': device must be 'cpu', 'cuda' or 'not stated', got 'gpu'"
    ):
        claims.Claim("k", "text", "a source", "gpu", "plot_a", 2.0)


def test_a_claim_whose_source_names_no_device_says_so_and_is_scored_here(capsys):
    """The guide's TorchScript claim names no device: "not stated", scored on this run's."""
    c = claims.claim("guide: TorchScript batch gather")
    assert c.device == "not stated"
    slow, fast = (
        record("python loop", 1e-2),
        record("TorchScript loop", 0.8e-2),
    )  # 1.25×: clear of the claim at 95 %
    outcome = c.check(slow, fast)
    assert outcome.verdict == "yes"
    out = capsys.readouterr().out
    assert out.startswith(
        "The Effective PyTorch guide, device not stated: A TorchScript loop is about 10 %"
    )
    assert "on a GPU" not in out
    fast = record("TorchScript loop", 0.8e-2, H100)
    assert c.check(record("python loop", 1e-2, H100), fast, show=False).verdict == "yes"
