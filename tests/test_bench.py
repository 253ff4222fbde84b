"""effpt.bench: timing statistics, comparisons, records, errors."""

from __future__ import annotations

import json
import time

import pytest
import torch

from effpt import bench
from effpt.device import this_machine
from effpt.records import read_records


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


def compare_sleeps(monkeypatch, tmp_path, long_s: float, repeats: int, number: int):
    """compare() of a long and a 1 ms sleep, recording to a file; its records and the file."""
    path = tmp_path / "records.jsonl"
    monkeypatch.setenv(bench.RECORDS_ENV, str(path))
    records = bench.compare(
        "sleep",
        {"long": lambda: time.sleep(long_s), "short": lambda: time.sleep(0.001)},
        device="cpu",
        repeats=repeats,
        number=number,
    )
    return records, path


def test_compare_ratios_and_records(capsys, monkeypatch, tmp_path):
    records, path = compare_sleeps(monkeypatch, tmp_path, 0.004, repeats=3, number=2)
    table = capsys.readouterr().out
    for word in ("long", "short", "speed-up over long"):
        assert word in table
    long, short = records
    assert long.median_s > short.median_s
    assert long.baseline == short.baseline == "long"
    assert long.machine.kind == "cpu"
    assert "CPU" in long.machine.name
    saved = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["variant"] for r in saved] == ["long", "short"]
    assert saved[0]["machine"] == long.machine.to_dict()


def test_compare_names_the_variant_that_raised():
    def bad():
        raise KeyError("missing")

    with pytest.raises(bench.VariantError, match="variant 'bad' of task 't'") as info:
        bench.compare("t", {"ok": lambda: None, "bad": bad}, device="cpu", show=False)
    assert isinstance(info.value.__cause__, KeyError)


def test_compare_rejects_unknown_baseline_and_empty():
    with pytest.raises(ValueError, match="baseline 'x'"):
        bench.compare("t", {"a": lambda: None}, baseline="x", device="cpu", show=False)
    with pytest.raises(ValueError, match="at least one"):
        bench.compare("t", {}, device="cpu", show=False)


def test_format_seconds_units():
    assert bench.format_seconds(1.5e-9) == "1.50 ns"
    assert bench.format_seconds(0.25) == "250 ms"


def test_peak_helpers_return_plausible_cpu_numbers():
    assert bench.copy_bandwidth("cpu", nbytes=2**22, repeats=2) > 1e8  # > 0.1 GB/s
    flops = bench.matmul_throughput("cpu", n=256, repeats=2, dtype=torch.float32)
    assert 1e8 < flops < 1e14


# -- arguments are checked before anything runs, and errors name the argument ---------
@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"repeats": 0}, "repeats"), ({"number": 0}, "number"), ({"warmup": -1}, "warmup")],
)
def test_compare_blames_the_argument_not_the_first_variant(kwargs, name):
    ran = []
    with pytest.raises(ValueError, match=rf"^{name} must be >= ") as info:
        bench.compare("t", {"first": lambda: ran.append(1)}, device="cpu", show=False, **kwargs)
    assert not isinstance(info.value, bench.VariantError)
    assert ran == []  # nothing was timed


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 0.0, -1.0])
@pytest.mark.parametrize("name", ["min_block_s", "budget_s", "target_spread"])
def test_time_callable_names_a_bad_float_argument(name, value):
    with pytest.raises(ValueError, match=rf"^{name} must be a positive finite number"):
        bench.time_callable(lambda: None, device="cpu", **{name: value})


def test_compare_names_a_variant_that_is_not_callable():
    with pytest.raises(TypeError, match="variant 'b' of task 't' is not callable"):
        bench.compare("t", {"a": lambda: None, "b": 3}, device="cpu", show=False)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.9995, "1.00 s"),
        (0.09996, "100 ms"),
        (0.00099996, "1.00 ms"),
        (999.4e-9, "999 ns"),
        (999.6e-9, "1.00 µs"),
        (123.4, "123 s"),
    ],
)
def test_format_seconds_rounds_before_choosing_the_unit(seconds, text):
    assert bench.format_seconds(seconds) == text


def test_format_table_survives_a_zero_median():
    cpu = this_machine("cpu")
    rows = [
        bench.Record("t", "a", 1e-3, 0.0, 1e-3, 1e-3, 5, 1, "a", cpu),
        bench.Record("t", "b", 0.0, 0.0, 0.0, 0.0, 5, 1, "a", cpu),
    ]
    assert "n/a (median is 0)" in bench.format_table(rows)
    zero_baseline = [bench.Record("t", "a", 0.0, 0.0, 0.0, 0.0, 5, 1, "a", cpu), rows[0]]
    zero_baseline[1] = bench.Record("t", "b", 1e-3, 0.0, 1e-3, 1e-3, 5, 1, "a", cpu)
    assert "n/a (median is 0)" in bench.format_table(zero_baseline)


# -- adaptive repeats and speed-ups with their uncertainty ------------------------------
def test_adaptive_repeats_stop_early_when_quiet():
    timing = bench.time_callable(lambda: time.sleep(0.002), device="cpu", number=1)
    assert len(timing.per_call) >= bench.MIN_REPEATS
    if timing.spread <= 0.05:
        assert len(timing.per_call) == bench.MIN_REPEATS or timing.spread <= 0.05


def test_adaptive_repeats_stop_at_the_budget_when_noisy():
    state = {"n": 0}

    def noisy():
        state["n"] += 1
        time.sleep(0.005 if state["n"] % 2 else 0.02)  # spread far above 5 %

    began = time.perf_counter()
    timing = bench.time_callable(noisy, device="cpu", number=1, budget_s=0.1)
    elapsed = time.perf_counter() - began
    assert timing.spread > 0.05
    assert bench.MIN_REPEATS <= len(timing.per_call) < bench.MAX_REPEATS
    assert elapsed < 1.0


def test_speedup_interval_and_verdicts():
    slow = bench.Timing((9.0, 10.0, 10.0, 10.0, 11.0), 1)
    fast = bench.Timing((4.0, 5.0, 5.0, 5.0, 6.0), 1)
    wide = bench.Timing((5.0, 8.0, 10.0, 12.0, 20.0), 1)
    assert bench.speedup(slow, fast).verdict == "faster"
    assert bench.speedup(fast, slow).verdict == "slower"
    ratio = bench.speedup(slow, wide)
    assert ratio.low < 1 < ratio.high
    assert ratio.verdict == "inconclusive"


def test_ratio_never_prints_more_digits_than_it_knows():
    assert str(bench.Ratio(18.76, 12.0, 30.0)) == "19× (12–30)"
    assert str(bench.Ratio(18.76, 18.70, 18.80)) == "18.8× (18.7–18.8)"
    assert str(bench.Ratio(0.52, 0.20, 1.10)) == "0.5× (0.2–1.1)"


def test_compare_prints_verdicts_and_saves_quartiles(capsys, monkeypatch, tmp_path):
    # a 95 % interval survives a couple of repeats slowed by a busy machine
    _, path = compare_sleeps(monkeypatch, tmp_path, 0.006, repeats=9, number=1)
    out = capsys.readouterr().out
    assert "(baseline)" in out
    assert "faster" in out
    saved = json.loads(path.read_text().splitlines()[1])
    assert saved["q1_s"] <= saved["median_s"] <= saved["q3_s"]
    assert saved["repeats"] == len(saved["per_call_s"]) == 9


def test_compare_takes_turns_so_load_drift_hits_every_variant():
    calls = []
    bench.compare(
        "t",
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
        device="cpu",
        repeats=4,
        number=1,
        warmup=0,
        show=False,
    )
    assert calls == ["a", "b"] * 4


def test_one_slow_first_call_does_not_shrink_the_blocks():
    state = {"calls": 0}

    def fn():
        state["calls"] += 1
        if state["calls"] == 2:  # the first call after the warm-up is slow, once
            time.sleep(0.05)

    timing = bench.time_callable(fn, device="cpu", repeats=1, warmup=1)
    assert timing.number > 100  # sized on a fast call, not on the 50 ms one


# -- issue 26: one sample decides nothing; numbers print as they round ----------------------
def test_compare_with_one_repeat_is_inconclusive(capsys):
    def work():
        return sum(range(200))

    for _ in range(15):
        records = bench.compare("same", {"a": work, "b": work}, device="cpu", repeats=1, number=5)
        out = capsys.readouterr().out
        assert "inconclusive" in out, out
        assert "faster" not in out, out
        assert "slower" not in out, out
        assert bench.speedup(records[0], records[1]).verdict == "inconclusive"


def test_a_ratio_from_one_sample_says_so_and_expect_agrees():
    from effpt.expect import expect

    slow = bench.Timing(per_call=(2.0,), number=1)
    fast = bench.Timing(per_call=(1.0,), number=1)
    r = bench.speedup(slow, fast)
    assert (r.value, r.single, r.verdict) == (2.0, True, "inconclusive")
    assert str(r) == "2.0× (too few repeats)"  # issue 34: one sample is the extreme of that
    assert expect("two beats one", r, above=1.5, device="cpu", show=False).verdict == (
        "inconclusive"
    )
    many = bench.Timing(per_call=(1.0, 1.0, 1.0), number=1)
    assert (r / bench.speedup(many, many)).single  # a quotient is as single as its parts
    four = bench.Timing((1.0, 1.0, 1.0, 1.0), 1)  # issue 34: four a side reach 95 %
    assert bench.speedup(bench.Timing((2.0, 2.0, 2.0), 1), many).single
    assert not bench.speedup(bench.Timing((2.0, 2.0, 2.0, 2.0), 1), four).single


@pytest.mark.parametrize(
    "ratio",
    [bench.Ratio(2.0, 1.5, float("inf")), bench.Ratio(2.0, 0.0, 3.0), bench.Ratio(0.5, 0.0, 0.9)],
)
def test_an_unbounded_interval_is_inconclusive(ratio):
    assert ratio.verdict == "inconclusive"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0009995, "1.00 ms"), (9.9996e-7, "1.00 µs"), (999.5, "1000 s"), (1234.5, "1230 s")],
)
def test_format_seconds_never_prints_an_exponent(seconds, text):
    assert bench.format_seconds(seconds) == text


def test_a_faster_ratio_never_prints_its_low_bound_as_one():
    text = str(bench.Ratio(1.5, 1.0004, 2.0))
    assert "(1.0004–" in text, text
    assert str(bench.Ratio(0.8, 0.5, 0.99996)).endswith("–0.99996)")


@pytest.mark.parametrize(
    ("task", "variants", "match"),
    [
        (3, {"a": None}, "task must be a str, got int"),
        ("t", {1: None}, "variant names must be str, got int 1"),
    ],
)
def test_names_that_are_not_strings_are_refused_before_timing(task, variants, match):
    calls = []
    variants = dict.fromkeys(variants, lambda: calls.append(1))
    with pytest.raises(TypeError, match=match):
        bench.compare(task, variants, device="cpu", repeats=1, show=False)
    assert calls == []


def test_a_record_needs_a_machine_not_a_line():
    with pytest.raises(TypeError, match=r"machine must be an effpt\.machine\.Machine, got str"):
        bench.Record("t", "a", 1e-3, 0.0, 1e-3, 1e-3, 5, 1, "a", "x86_64 CPU · torch 2.13.0")


def test_num_threads_restores_the_number_when_the_block_raises():
    before = torch.get_num_threads()
    inside = []

    def block():
        with bench.num_threads(1):
            inside.append(torch.get_num_threads())
            raise KeyError("inside")

    with pytest.raises(KeyError):
        block()
    assert inside == [1]
    assert torch.get_num_threads() == before


def test_on_one_thread_runs_on_one_thread_and_names_it(capsys):
    with bench.num_threads(2):
        result, machine = bench.on_one_thread(lambda: (torch.get_num_threads(), "ran"), "cpu")
        assert torch.get_num_threads() == 2
    assert result == (1, "ran")
    assert machine.kind == "cpu"
    assert machine.threads == 1
    assert ", 1 thread " in str(machine)
    assert capsys.readouterr().out == ""


def test_on_one_thread_restores_the_threads_when_the_run_raises():
    def fails():
        raise RuntimeError("the variant failed")

    with bench.num_threads(2):
        with pytest.raises(RuntimeError, match="the variant failed"):
            bench.on_one_thread(fails, "cpu")
        assert torch.get_num_threads() == 2


def test_on_one_thread_refuses_what_it_cannot_call():
    with pytest.raises(TypeError, match="run must be callable, got int"):
        bench.on_one_thread(3, "cpu")


def _sleeps_by_threads(seconds_by_threads: dict[int, float], seen: list[int]):
    """A step that takes the seconds its thread count is given, noting each count."""

    def step():
        seen.append(torch.get_num_threads())
        time.sleep(seconds_by_threads[torch.get_num_threads()])

    return step


@pytest.mark.parametrize(
    ("seconds", "chosen", "said"),
    [({2: 0.03, 1: 0.001}, 1, "one thread faster"), ({2: 0.001, 1: 0.03}, 2, "2 threads faster")],
)
def test_faster_thread_count_keeps_the_count_that_ran_the_step_faster(
    capsys, seconds, chosen, said
):
    seen: list[int] = []
    with bench.num_threads(2):
        assert bench.faster_thread_count(_sleeps_by_threads(seconds, seen), "cpu") == chosen
        assert torch.get_num_threads() == 2  # left as it was
    assert seen == [2, 2, 2, 2, 1, 1, 1, 1]  # a warm-up and three timed calls on each count
    out = capsys.readouterr().out
    assert out.startswith("probe: a call took ")
    assert " on 2 threads, " in out
    assert out.rstrip().endswith(said)


def test_faster_thread_count_runs_nothing_on_one_thread_or_off_the_cpu(capsys):
    seen: list[int] = []
    with bench.num_threads(1):
        assert bench.faster_thread_count(_sleeps_by_threads({1: 0.0}, seen), "cpu") == 1
    assert bench.faster_thread_count(lambda: seen.append("ran"), "meta") == torch.get_num_threads()
    assert seen == []
    assert capsys.readouterr().out == ""


def test_faster_thread_count_restores_the_threads_when_the_step_raises():
    def fails():
        if torch.get_num_threads() == 1:
            raise RuntimeError("the step failed")

    with bench.num_threads(2):
        with pytest.raises(RuntimeError, match="the step failed"):
            bench.faster_thread_count(fails, "cpu")
        assert torch.get_num_threads() == 2


@pytest.mark.parametrize(
    ("step", "calls", "error", "said"),
    [(3, 2, TypeError, "step must be callable, got int"), (print, 0, ValueError, "calls")],
)
def test_faster_thread_count_refuses_bad_arguments(step, calls, error, said):
    with pytest.raises(error, match=said):
        bench.faster_thread_count(step, "cpu", calls=calls)


@pytest.mark.parametrize("call", ["time_callable", "compare"])
def test_device_is_required(call):
    """A timing names the device it ran on: left out, or None, is an error naming device=."""
    run = {
        "time_callable": lambda **kw: bench.time_callable(lambda: None, repeats=1, **kw),
        "compare": lambda **kw: bench.compare(
            "t", {"a": lambda: None}, repeats=1, show=False, **kw
        ),
    }[call]
    with pytest.raises(TypeError, match="device"):
        run()
    with pytest.raises(TypeError, match=r"device= must name the device .* got None"):
        run(device=None)


# -- issue 35: a contended machine cannot stretch a measurement past its budget ---------
def slows_after(fast_calls: int, slow_s: float, fast_s: float = 0.0):
    """A callable whose first ``fast_calls`` calls take ``fast_s``, every later one ``slow_s``.

    It stands for a thread pool that had a core while the blocks were sized and waits
    for one afterwards (the busy stand-in).
    """
    state = {"calls": 0}

    def fn():
        state["calls"] += 1
        wait = fast_s if state["calls"] <= fast_calls else slow_s
        if wait:
            time.sleep(wait)

    return fn


def test_a_block_that_runs_far_past_its_length_stops_early():
    # warm-up (1) and sizing (3) run fast; then each call sleeps 0.2 ms where it took
    # well under a microsecond: a block sized for 1 ms would otherwise last a second.
    fn = slows_after(4, 2e-4)
    began = time.perf_counter()
    timing = bench.time_callable(fn, device="cpu", repeats=2, min_block_s=0.001)
    elapsed = time.perf_counter() - began
    assert timing.number > 100  # sized on the fast calls
    assert len(timing.calls) == 2
    assert all(1 <= c < timing.number for c in timing.calls), timing.calls
    # each block's seconds per call divide its time by the calls it actually ran
    assert all(1.5e-4 < s < 5e-3 for s in timing.per_call), timing.per_call
    assert elapsed < 0.3, elapsed


def test_a_block_of_a_fixed_number_runs_every_call():
    calls = []
    timing = bench.time_callable(
        lambda: calls.append(1), device="cpu", repeats=3, warmup=0, number=7
    )
    assert timing.calls == (7, 7, 7)
    assert len(calls) == 21


def test_a_measurement_past_its_ceiling_stops_and_says_it_was_cut_short():
    # the warm-up call is instant; every timed call takes 60 ms: five would take 0.3 s
    fn = slows_after(1, 0.06)
    began = time.perf_counter()
    timing = bench.time_callable(fn, device="cpu", number=1, budget_s=0.02)
    elapsed = time.perf_counter() - began
    assert timing.cut_short
    assert 1 <= len(timing.per_call) < bench.MIN_REPEATS
    assert elapsed < 0.25, elapsed


def test_a_quiet_measurement_is_not_cut_short():
    timing = bench.time_callable(lambda: time.sleep(0.002), device="cpu", number=1, budget_s=0.2)
    assert not timing.cut_short
    assert len(timing.per_call) >= bench.MIN_REPEATS


def test_a_cut_short_measurement_is_never_read_as_a_result():
    slow = bench.Timing((10.0, 10.1, 10.2, 10.3), 1)
    fast = bench.Timing((5.0, 5.1, 5.2, 5.3), 1)
    assert bench.speedup(slow, fast).verdict == "faster"  # four a side reach 95 %
    cut = bench.Timing((5.0, 5.1, 5.2, 5.3), 1, cut_short=True)
    for ratio in (bench.speedup(slow, cut), bench.speedup(cut, slow)):
        assert ratio.single
        assert ratio.verdict == "inconclusive"
        assert "(too few repeats)" in str(ratio)


def test_compare_cut_short_marks_its_records_and_prints_inconclusive(capsys, monkeypatch, tmp_path):
    path = tmp_path / "records.jsonl"
    monkeypatch.setenv(bench.RECORDS_ENV, str(path))
    began = time.perf_counter()
    records = bench.compare(
        "slowed",
        {"a": slows_after(1, 0.03), "b": slows_after(1, 0.015)},
        device="cpu",
        number=1,
        budget_s=0.01,
    )
    elapsed = time.perf_counter() - began
    out = capsys.readouterr().out
    assert all(r.cut_short for r in records)
    assert all(r.repeats < bench.MIN_REPEATS for r in records)
    assert "inconclusive" in out
    assert "faster" not in out
    assert elapsed < 0.3, elapsed
    saved = read_records(path)
    assert [r.cut_short for r in saved] == [True, True]
    assert saved == records


def test_compare_records_the_calls_each_block_ran(monkeypatch, tmp_path):
    path = tmp_path / "records.jsonl"
    monkeypatch.setenv(bench.RECORDS_ENV, str(path))
    (record,) = bench.compare(
        "slowed", {"a": slows_after(4, 2e-4)}, device="cpu", repeats=2, show=False
    )
    assert len(record.calls) == record.repeats == 2
    assert all(1 <= c < record.number for c in record.calls), (record.calls, record.number)
    (saved,) = read_records(path)
    assert saved.calls == record.calls
