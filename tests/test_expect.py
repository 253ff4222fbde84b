"""Expectations: verdicts from intervals, records that round-trip, loud errors on bad input."""

from __future__ import annotations

import json
import math

import pytest
import torch

from effpt.bench import Timing
from effpt.device import this_machine
from effpt.expect import EXPECTATIONS_ENV, expect, read_expectations
from effpt.machine import Machine
from effpt.records import Ratio

H100 = Machine("cuda", "NVIDIA H100 80GB HBM3", None, "12.8", "2.13.0")


@pytest.mark.parametrize(
    ("measured", "kwargs", "verdict"),
    [
        (Ratio(3.0, 2.5, 3.5), {"above": 2.0}, "holds here"),
        (Ratio(1.5, 1.2, 1.8), {"above": 2.0}, "does not hold here"),
        (Ratio(2.1, 1.8, 2.4), {"above": 2.0}, "inconclusive"),
        (Ratio(0.4, 0.3, 0.45), {"below": 0.5}, "holds here"),
        (Ratio(0.6, 0.55, 0.7), {"below": 0.5}, "does not hold here"),
        ((12.0, 11.0, 13.0), {"above": 10.0}, "holds here"),
        (7.5, {"below": 8.0}, "holds here"),
        (8.5, {"below": 8.0}, "does not hold here"),
        # six repeats: the fewest whose median has an interval at 95 % (issue 34)
        (Timing(per_call=(1e-3, 1.1e-3, 1.2e-3) * 2, number=1), {"below": 2e-3}, "holds here"),
    ],
)
def test_verdict_follows_the_interval(measured, kwargs, verdict):
    assert expect("x", measured, device="cpu", show=False, **kwargs).verdict == verdict


def test_one_sample_is_inconclusive_whatever_its_value():
    one = Timing(per_call=(1e-3,), number=1)
    assert expect("one sample", one, below=1.0, device="cpu", show=False).verdict == "inconclusive"


@pytest.mark.parametrize("bad", [math.nan, 0.0, -1.0, math.inf, -math.inf])
def test_a_broken_measurement_names_the_expectation_and_the_value(bad):
    with pytest.raises(ValueError, match=r"expectation 'gather speed-up'.*" + repr(bad)[:3]):
        expect("gather speed-up", bad, above=1.0, device="cpu")


@pytest.mark.parametrize("bad", [Ratio(math.nan, 1.0, 2.0), Ratio(1.5, -1.0, 2.0), (1.0, 0.0, 2.0)])
def test_a_broken_interval_is_refused(bad):
    with pytest.raises(ValueError, match="expectation 'gather speed-up'"):
        expect("gather speed-up", bad, above=1.0, device="cpu")


@pytest.mark.parametrize("bound", ["1.5", None, math.nan, math.inf, 0.0, -2.0, True])
def test_a_bound_that_is_not_a_positive_number_names_the_expectation(bound):
    with pytest.raises((TypeError, ValueError), match=r"expectation 'copy rate'"):
        expect("copy rate", 2.0, above=bound, device="cpu")


def test_both_or_neither_bound_is_refused():
    with pytest.raises(TypeError, match="exactly one of above= and below="):
        expect("x", 2.0, above=1.0, below=3.0, device="cpu")
    with pytest.raises(TypeError, match="exactly one of above= and below="):
        expect("x", 2.0, device="cpu")


def test_prints_the_verdict_and_records_it(tmp_path, monkeypatch, capsys):
    path = tmp_path / "page.jsonl"
    monkeypatch.setenv(EXPECTATIONS_ENV, str(path))
    first = expect("sum beats the loop", Ratio(41.0, 38.0, 44.0), above=10, device="cpu")
    expect("copy bandwidth", (12.0, 11.0, 13.0), above=20, unit="GB/s", device="cpu")
    out = capsys.readouterr().out
    assert "sum beats the loop" in out
    assert "holds here" in out
    assert "does not hold here" in out
    again = read_expectations(path)
    assert again[0] == first
    assert [e.verdict for e in again] == ["holds here", "does not hold here"]


def test_a_missing_device_is_refused():
    # issue 31, finding 6: a page on a GPU timed CPU work and the verdict named the GPU
    with pytest.raises(TypeError, match="device"):
        expect("x", 2.0, above=1.0, show=False)
    with pytest.raises(TypeError, match=r"device= must name the device .* got None"):
        expect("x", 2.0, above=1.0, device=None, show=False)


def test_the_record_names_the_device_the_caller_gave():
    cpu = expect("x", 2.0, above=1.0, device="cpu", show=False).machine
    assert cpu == this_machine("cpu")
    assert expect("x", 2.0, above=1.0, device=torch.device("meta"), show=False).machine.kind == (
        "meta"
    )
    assert expect("x", 2.0, above=1.0, device=H100, show=False).machine == H100


def test_a_record_stores_the_machine_as_fields(tmp_path, monkeypatch):
    path = tmp_path / "page.jsonl"
    monkeypatch.setenv(EXPECTATIONS_ENV, str(path))
    e = expect("x", 2.0, above=1.0, device=H100, show=False)
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert stored["machine"] == H100.to_dict()
    assert "on NVIDIA H100 80GB HBM3 · CUDA 12.8 · torch 2.13.0:" in str(e)


def test_a_record_written_with_the_machine_line_still_reads(tmp_path):
    new = expect("x", 2.0, above=1.0, device=H100, show=False).to_dict()
    path = tmp_path / "page.jsonl"
    path.write_text(json.dumps({**new, "machine": str(H100)}) + "\n", encoding="utf-8")
    assert read_expectations(path)[0].machine == H100


def test_a_record_with_a_bad_machine_names_file_line_and_field(tmp_path):
    new = expect("x", 2.0, above=1.0, device=H100, show=False).to_dict()
    path = tmp_path / "page.jsonl"
    path.write_text(json.dumps({**new, "machine": "a fast box"}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"page.jsonl:1.*field 'machine'.*a fast box"):
        read_expectations(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "page.jsonl:1"),
        ("[1, 2]", "a JSON object"),
        ('{"statement": "x"}', "missing fields"),
    ],
)
def test_a_malformed_record_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "page.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_expectations(path)


def test_a_record_with_a_verdict_that_contradicts_nothing_still_validates_its_fields(tmp_path):
    good = expect("x", 2.0, above=1.0, device="cpu", show=False).to_dict()
    path = tmp_path / "page.jsonl"
    path.write_text(json.dumps({**good, "verdict": "maybe"}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="verdict must be one of"):
        read_expectations(path)


def test_a_unitless_measurement_prints_without_a_double_space():
    e = expect("slope", (1.02, 1.01, 1.04), above=0.8, unit="", device="cpu", show=False)
    assert e.measured == "1.02 (1.01–1.04)"
