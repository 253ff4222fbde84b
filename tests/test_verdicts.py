"""Issue 34, item 1: a verdict is drawn from a 95 % confidence interval, never from chance.

The simulations draw timings with a fixed seed, so they give the same counts on every run.
Equal variants must come out "inconclusive" in at least 95 % of draws at every repeat
count, for noise of several shapes; a real 1.5x difference must still be found with
the repeats the pages get from effpt.bench's adaptive timing.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from effpt._stats import _rank_counts, rank_depth
from effpt.bench import MAX_REPEATS, MIN_REPEATS, Timing, compare
from effpt.claims import claim
from effpt.expect import expect
from effpt.records import LEVEL, Record, speedup

TRIALS = 300


def _noise(kind: str, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
    """Seconds per call around 1 ms: skewed (lognormal), heavy-tailed, or on a coarse clock."""
    if kind == "lognormal":
        return 1e-3 * np.exp(rng.normal(0.0, 0.2, size))
    if kind == "outliers":  # one repeat in ten hit by another process, three times slower
        base = 1e-3 * np.exp(rng.normal(0.0, 0.05, size))
        return base * np.where(rng.random(size) < 0.1, 3.0, 1.0)
    return 1e-3 * (1 + np.ceil(rng.exponential(2.0, size)))  # ties: few distinct values


def _verdicts(slow: np.ndarray, fast: np.ndarray) -> list[str]:
    return [
        speedup(Timing(tuple(s), 1), Timing(tuple(f), 1)).verdict
        for s, f in zip(slow.tolist(), fast.tolist(), strict=True)
    ]


def test_level_is_stated():
    assert LEVEL == 0.95


def test_exact_chance_of_a_verdict_between_equal_variants_is_at_most_five_percent():
    """No sampling here: the law of the rank statistic when the variants are equal.

    It is the same for every continuous noise, so this holds for any timing's shape;
    ties (a coarse clock) only make a verdict rarer, as the simulation below shows.
    """
    for n in range(1, MAX_REPEATS + 1):
        for m in (n, MIN_REPEATS, MAX_REPEATS):
            k = rank_depth(n, m)
            chance = 2 * sum(_rank_counts(n, m)[:k]) / math.comb(n + m, n)
            assert chance <= 1 - LEVEL, (n, m, chance)


def _most_verdicts(trials: int, chance: float = 1 - LEVEL) -> int:
    """The most verdicts in ``trials`` draws that a chance of ``chance`` gives but in 0.1 %."""
    tail, k = 1.0, trials
    while k > 0:
        tail_below = tail - math.comb(trials, k) * chance**k * (1 - chance) ** (trials - k)
        if tail_below > 0.001:
            return k
        tail, k = tail_below, k - 1
    return 0


@pytest.mark.parametrize("kind", ["lognormal", "outliers", "coarse clock"])
def test_equal_variants_are_inconclusive_at_every_repeat_count(kind):
    """Simulated: at every repeat count, at least 95 % of draws are "inconclusive".

    Each count's share is an estimate from TRIALS draws; where the exact chance is just
    under 5 % the estimate falls a little on either side of it, so each count's draws
    must not give more verdicts than a 5 % chance would but one time in a thousand, and
    all the draws together must be at least 95 % "inconclusive".
    """
    rng = np.random.default_rng(34)
    verdicts, most = {}, _most_verdicts(TRIALS)
    for n in range(1, MAX_REPEATS + 1):
        slow = _noise(kind, rng, (TRIALS, n))
        fast = _noise(kind, rng, (TRIALS, n))
        verdicts[n] = TRIALS - _verdicts(slow, fast).count("inconclusive")
    too_many = {n: v for n, v in verdicts.items() if v > most}
    assert not too_many, (
        f"equal variants given a verdict too often ({kind}): {too_many} of {TRIALS}"
    )
    assert 1 - sum(verdicts.values()) / (TRIALS * MAX_REPEATS) >= LEVEL
    assert all(verdicts[n] == 0 for n in (1, 2, 3))  # no interval reaches 95 % there


def test_equal_variants_with_unequal_repeat_counts():
    rng = np.random.default_rng(35)
    for n, m in [(4, 5), (5, 9), (6, 30), (12, 7)]:
        slow = _noise("lognormal", rng, (TRIALS, n))
        fast = _noise("lognormal", rng, (TRIALS, m))
        assert _verdicts(slow, fast).count("inconclusive") / TRIALS >= 0.95, (n, m)


@pytest.mark.parametrize(
    ("repeats", "sigma"),
    [
        (MIN_REPEATS, 0.037),  # adaptive timing stops at 5 once the IQR is within 5 % of the median
        (10, 0.15),  # a noisy machine: the middle half spans about 20 %
        (MAX_REPEATS, 0.3),  # the noisiest that still reaches the cap: about 40 %
    ],
)
def test_a_real_one_and_a_half_fold_difference_is_found(repeats, sigma):
    rng = np.random.default_rng(36)
    slow = 1.5e-3 * np.exp(rng.normal(0.0, sigma, (TRIALS, repeats)))
    fast = 1e-3 * np.exp(rng.normal(0.0, sigma, (TRIALS, repeats)))
    found = _verdicts(slow, fast).count("faster") / TRIALS
    assert found >= 0.95, f"1.5x found in {found:.0%} of draws at {repeats} repeats"


def test_compare_of_one_function_with_itself_gives_no_verdict():
    """The issue's reproduction: compare(f, f, repeats=2) gave a verdict in 7 of 12 runs."""
    verdicts = set()
    for _ in range(12):
        records = compare(
            "f",
            {"a": lambda: sum(range(200)), "b": lambda: sum(range(200))},
            device="cpu",
            repeats=2,
            number=20,
            show=False,
        )
        ratio = speedup(*records)
        verdicts.add(ratio.verdict)
        assert str(ratio).endswith("(too few repeats)")
    assert verdicts == {"inconclusive"}


def test_compare_records_keep_their_repeats_for_the_interval():
    records = compare(
        "f", {"a": lambda: None, "b": lambda: None}, device="cpu", repeats=6, number=5, show=False
    )
    assert all(len(r.per_call_s) == 6 for r in records)
    assert speedup(*records) == speedup(
        Timing(records[0].per_call_s, 5), Timing(records[1].per_call_s, 5)
    )


def test_expectation_from_a_timing_uses_the_interval_of_its_median():
    # Quartiles are not a confidence interval: 5 repeats whose quartiles clear the bound
    # still cannot place the median above it at 95 %.
    five = Timing((1.0, 2.1, 2.2, 2.3, 9.0), 1)
    assert five.q1 > 2.0
    assert expect("time", five, above=2.0, unit="s", device="cpu", show=False).verdict == (
        "inconclusive"
    )
    eight = Timing((2.5, 2.6, 2.7, 2.8, 2.9, 3.0, 3.1, 3.2), 1)
    assert expect("time", eight, above=2.0, unit="s", device="cpu", show=False).verdict == (
        "holds here"
    )


def test_claims_are_judged_on_the_confidence_interval():
    from effpt.device import this_machine

    cpu = this_machine("cpu")

    def rec(variant, seconds):
        q1, med, q3 = np.quantile(seconds, [0.25, 0.5, 0.75]).tolist()
        return Record(
            "t", variant, med, q3 - q1, q1, q3, len(seconds), 1, "slow", cpu, tuple(seconds)
        )

    # Quartile ratios 1.30/1.0 clear the promised 1.3x; three repeats cannot show it at 95 %.
    slow = rec("slow", [1.3, 1.31, 1.32])
    fast = rec("fast", [0.99, 1.0, 1.0])
    assert claim("guide: unbind over indexing").check(slow, fast, show=False).verdict == (
        "inconclusive"
    )


def test_an_expectation_without_an_interval_says_why_it_is_inconclusive():
    three = speedup(Timing((9.0, 10.0, 11.0), 1), Timing((1.0, 1.1, 1.2), 1))
    e = expect("ten times faster", three, above=2.0, device="cpu", show=False)
    assert (e.verdict, e.measured) == ("inconclusive", "9.09× (too few repeats)")
