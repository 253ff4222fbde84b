"""effpt.bench: timing statistics, comparisons, records, errors."""

from __future__ import annotations

import json
import time

import pytest
import torch

from effpt import bench


def test_median_and_iqr_of_known_values():
    timing = bench.Timing(per_call=(1.0, 2.0, 3.0, 4.0, 5.0), number=1)
    assert timing.median == 3.0
    assert timing.iqr == pytest.approx(2.0)
    assert bench.Timing(per_call=(7.0,), number=1).iqr == 0.0


def test_time_callable_measures_a_known_sleep():
    timing = bench.time_callable(lambda: time.sleep(0.01), device="cpu", repeats=3, number=1)
    assert 0.009 < timing.median < 0.05


def test_warmup_is_not_timed():
    calls = []

    def fn():
        calls.append(None)
        if len(calls) == 1:
            time.sleep(0.2)  # a slow first call, like lazy initialisation

    timing = bench.time_callable(fn, device="cpu", repeats=3, warmup=1, number=1)
    assert timing.median < 0.1
    # one warm-up, then three timed repeats (number given: no calibration run)
    assert len(calls) == 1 + 3


def test_number_is_calibrated_for_fast_callables():
    timing = bench.time_callable(lambda: None, device="cpu", repeats=2, min_block_s=0.001)
    assert timing.number > 10


@pytest.mark.parametrize("kwargs", [{"repeats": 0}, {"warmup": -1}, {"number": 0}])
def test_bad_counts_raise_value_error(kwargs):
    with pytest.raises(ValueError, match="must be >="):
        bench.time_callable(lambda: None, device="cpu", **kwargs)


def test_count_must_be_int():
    with pytest.raises(TypeError, match="repeats must be an int"):
        bench.time_callable(lambda: None, device="cpu", repeats=2.0)


def test_compare_ratios_and_records(capsys, monkeypatch, tmp_path):
    path = tmp_path / "records.jsonl"
    monkeypatch.setenv(bench.RECORDS_ENV, str(path))
    records = bench.compare(
        "sleep",
        {"long": lambda: time.sleep(0.004), "short": lambda: time.sleep(0.001)},
        device="cpu",
        repeats=3,
        number=2,
    )
    table = capsys.readouterr().out
    for word in ("long", "short", "speed-up"):
        assert word in table
    long, short = records
    assert long.median_s > short.median_s
    assert long.baseline == short.baseline == "long"
    assert "CPU" in long.machine
    saved = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["variant"] for r in saved] == ["long", "short"]


def test_compare_names_the_variant_that_raised():
    def bad():
        raise KeyError("missing")

    with pytest.raises(bench.VariantError, match="variant 'bad' of task 't'") as info:
        bench.compare("t", {"ok": lambda: None, "bad": bad}, device="cpu", show=False)
    assert isinstance(info.value.__cause__, KeyError)


def test_compare_rejects_unknown_baseline_and_empty():
    with pytest.raises(ValueError, match="baseline 'x'"):
        bench.compare("t", {"a": lambda: None}, baseline="x", show=False)
    with pytest.raises(ValueError, match="at least one"):
        bench.compare("t", {}, show=False)


def test_format_seconds_units():
    assert bench.format_seconds(1.5e-9) == "1.50 ns"
    assert bench.format_seconds(0.25) == "250 ms"


def test_peak_helpers_return_plausible_cpu_numbers():
    assert bench.copy_bandwidth("cpu", nbytes=2**22, repeats=2) > 1e8  # > 0.1 GB/s
    flops = bench.matmul_throughput("cpu", n=256, repeats=2, dtype=torch.float32)
    assert 1e8 < flops < 1e14
