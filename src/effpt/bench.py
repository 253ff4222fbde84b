"""Timing that tells the truth on every device, and the uncertainty that comes with it.

GPU work is asynchronous: a Python timer around a CUDA call measures the launch, not
the work. :func:`time_callable` warms up first (lazy initialisation and compilation
are paid once, outside the measurement), synchronizes the device around every timed
block and repeats until the spread of the repeats is small or its time budget is
spent. It reports the median and the quartiles.

A speed-up is a ratio of two noisy numbers: :func:`~effpt.records.speedup` returns it
with a 95 % confidence interval and a verdict, "inconclusive" when the interval
contains 1.
:func:`compare` times several variants of one task, prints them with their speed-ups
and returns :class:`~effpt.records.Record` objects for the site's measurements page.
The names of :mod:`effpt.records` are importable from here too.

Both need ``device=``: a timing that does not say where it ran cannot be read.

Threads change the story of small operations on a CPU. :func:`num_threads` runs a block
on a given number of PyTorch's intra-op threads; :func:`on_one_thread` runs a
measurement again on one thread where that is a different run, and says why not
elsewhere.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from effpt._validate import check_int, check_positive
from effpt.device import pick_device, this_machine
from effpt.machine import Machine
from effpt.records import (
    RECORDS_ENV,
    Ratio,
    Record,
    format_seconds,
    format_table,
    save_records,
    speedup,
)

__all__ = [
    "BLOCK_CAP",
    "CEILING",
    "MAX_REPEATS",
    "MIN_REPEATS",
    "RECORDS_ENV",
    "Ratio",
    "Record",
    "Timing",
    "VariantError",
    "compare",
    "copy_bandwidth",
    "faster_thread_count",
    "format_seconds",
    "format_table",
    "matmul_throughput",
    "num_threads",
    "on_one_thread",
    "speedup",
    "synchronize",
    "time_callable",
]

#: Fewest repeats an adaptive measurement takes (quartiles of fewer mean little).
MIN_REPEATS = 5
#: Most repeats an adaptive measurement takes.
MAX_REPEATS = 30
#: A block whose calls were counted to last ``min_block_s`` ends once it has lasted this
#: many times ``min_block_s`` (a pool waiting for a core can make each call 100× slower).
BLOCK_CAP = 4
#: An adaptive measurement ends once it has lasted this many times its budget, or this
#: many times what :data:`MIN_REPEATS` planned blocks take, whichever is longer, even with
#: fewer than :data:`MIN_REPEATS` repeats; it is then cut short and decides nothing.
CEILING = 4
#: Clock reads in one block at most: few enough to add nothing measurable to it.
_CLOCK_READS = 64


class VariantError(RuntimeError):
    """A variant raised while :func:`compare` was timing it; the cause is chained."""


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait until all queued work on ``device`` has finished (no-op on CPU).

    Examples
    --------
    >>> synchronize("cpu") is None
    True
    """
    dev = pick_device() if device is None else torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


def _device(caller: str, device: object) -> torch.device:
    """``device`` as a torch.device; None or anything else that names no device is an error."""
    if isinstance(device, (str, torch.device)) and not isinstance(device, bool):
        return torch.device(device)
    msg = (
        f"{caller}: device= must name the device the timed work runs on "
        f'(a torch.device or its name, e.g. "cpu"), got {device!r}'
    )
    raise TypeError(msg)


def _quartiles(values: tuple[float, ...]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


@dataclass(frozen=True)
class Timing:
    """Seconds per call, one value per repeat (a block of calls between two synchronizations).

    ``number`` is the calls a block was planned to run. ``calls`` holds the calls each
    block did run: fewer than ``number`` where a block stopped at :data:`BLOCK_CAP`,
    more on a clock too coarse to see ``number`` calls; each block's seconds per call
    divide its time by the calls it ran (``calls`` left empty: every block ran
    ``number``). ``cut_short`` is True when the measurement stopped at its
    :data:`CEILING` before :data:`MIN_REPEATS` repeats: its speed-ups are "(too few
    repeats)" and "inconclusive", whatever the times.

    Examples
    --------
    >>> t = Timing(per_call=(1.0, 2.0, 3.0, 4.0, 5.0), number=1)
    >>> t.median, t.q1, t.q3, t.iqr, t.spread
    (3.0, 2.0, 4.0, 2.0, 0.6666666666666666)
    >>> t.calls, t.cut_short
    ((1, 1, 1, 1, 1), False)
    """

    per_call: tuple[float, ...]
    number: int
    calls: tuple[int, ...] = ()
    cut_short: bool = False

    def __post_init__(self) -> None:
        calls = tuple(self.calls) or (self.number,) * len(self.per_call)
        if len(calls) != len(self.per_call):
            msg = f"calls holds {len(calls)} counts for {len(self.per_call)} repeats"
            raise ValueError(msg)
        object.__setattr__(self, "per_call", tuple(self.per_call))
        object.__setattr__(self, "calls", calls)

    @property
    def median(self) -> float:
        """Median seconds per call over the repeats."""
        return statistics.median(self.per_call)

    @property
    def q1(self) -> float:
        """First quartile of seconds per call (the median itself with one repeat)."""
        return _quartiles(self.per_call)[0]

    @property
    def q3(self) -> float:
        """Third quartile of seconds per call (the median itself with one repeat)."""
        return _quartiles(self.per_call)[1]

    @property
    def iqr(self) -> float:
        """Interquartile range of seconds per call (0 with fewer than two repeats)."""
        return self.q3 - self.q1

    @property
    def spread(self) -> float:
        """IQR divided by the median (0.05 means the middle half spans 5 % of the median)."""
        return self.iqr / self.median if self.median > 0 else math.inf


def _check_timing_args(
    repeats: int | None,
    warmup: int,
    number: int | None,
    min_block_s: float,
    budget_s: float,
    target_spread: float,
) -> None:
    if repeats is not None:
        check_int("repeats", repeats, 1)
    check_int("warmup", warmup, 0)
    if number is not None:
        check_int("number", number, 1)
    check_positive("min_block_s", min_block_s)
    check_positive("budget_s", budget_s)
    check_positive("target_spread", target_spread)


def time_callable(
    fn: Callable[[], Any],
    *,
    device: torch.device | str,
    repeats: int | None = None,
    warmup: int = 1,
    number: int | None = None,
    min_block_s: float = 0.02,
    budget_s: float = 0.5,
    target_spread: float = 0.05,
) -> Timing:
    """Time ``fn()`` correctly on ``device``: warm up, synchronize, repeat.

    Each repeat is one block of ``number`` calls between two synchronizations. When
    ``number`` is None it is chosen, on the fastest of a few calls, so that a block lasts
    at least ``min_block_s``, which keeps timer resolution and launch noise out of fast
    measurements; such a block ends early, after the call that takes it past
    :data:`BLOCK_CAP` times ``min_block_s`` (its calls slowed down, e.g. a thread pool
    waiting for a core), and its seconds per call count the calls it ran (``calls``).
    A ``number`` given runs in every block.

    With ``repeats=None`` the number of repeats adapts: at least :data:`MIN_REPEATS`,
    then more until the spread (IQR / median) is at most ``target_spread``, the
    measurement has lasted ``budget_s`` seconds, or :data:`MAX_REPEATS` blocks ran.
    It never runs past :data:`CEILING` times the longer of ``budget_s`` and what
    :data:`MIN_REPEATS` blocks were planned to take (from the warm-up): a measurement
    that reaches it with fewer than :data:`MIN_REPEATS` repeats stops there, is
    ``cut_short``, and every speed-up read from it is inconclusive. An integer
    ``repeats`` runs exactly that many blocks, with no ceiling.

    ``device`` is required: it is the device whose queue is synchronized around each
    block, and a timing that does not say where it ran cannot be read.

    Examples
    --------
    >>> t = time_callable(lambda: sum(range(100)), device="cpu", repeats=5, number=10)
    >>> len(t.per_call), t.number, t.median > 0
    (5, 10, True)
    >>> MIN_REPEATS <= len(time_callable(lambda: None, device="cpu").per_call) <= MAX_REPEATS
    True
    >>> t.calls, t.cut_short
    ((10, 10, 10, 10, 10), False)
    >>> time_callable(lambda: None, device="cpu", repeats=0)
    Traceback (most recent call last):
    ...
    ValueError: repeats must be >= 1, got 0
    >>> time_callable(lambda: None, device="cpu", min_block_s=float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: min_block_s must be a positive finite number, got nan
    >>> time_callable(lambda: None, device=None)
    Traceback (most recent call last):
    ...
    TypeError: time_callable: device= must name the device the timed work runs on (a torch.device or its name, e.g. "cpu"), got None
    """
    _check_timing_args(repeats, warmup, number, min_block_s, budget_s, target_spread)
    if not callable(fn):
        msg = f"fn must be callable, got {type(fn).__name__}"
        raise TypeError(msg)
    dev = _device("time_callable", device)
    plan = _warm_up(fn, dev, warmup, number, min_block_s)
    per_call: list[float] = []
    calls: list[int] = []
    began = time.perf_counter()  # the budget counts timed blocks only, not the warm-up
    ceiling = _Ceiling(repeats, budget_s, [plan])
    cut_short = False
    while not _enough([per_call], repeats, began, budget_s, target_spread, plan.number):
        if ceiling.reached(began, [per_call], [calls]):
            cut_short = True
            break
        seconds, ran = _block(fn, dev, plan.number, plan.cap_s)
        per_call.append(seconds)
        calls.append(ran)
    return Timing(tuple(per_call), plan.number, tuple(calls), cut_short=cut_short)


@dataclass(frozen=True)
class _Plan:
    """Calls per block, the seconds a block should last (None: not known), its cap."""

    number: int
    block_s: float | None
    cap_s: float = math.inf


def _warm_up(
    fn: Callable[[], Any], dev: torch.device, warmup: int, number: int | None, min_block_s: float
) -> _Plan:
    """Run the warm-up calls; plan the blocks, choosing ``number`` when it is None."""
    start = time.perf_counter()
    for _ in range(warmup):
        fn()
    synchronize(dev)
    if number is not None:  # the warm-up's calls (first calls included) size the plan
        warm_s = (time.perf_counter() - start) / warmup if warmup else None
        return _Plan(number, None if warm_s is None else number * warm_s)
    # Size blocks on the fastest of a few calls: one slow call (a page fault, another
    # process) would otherwise shrink every block to a few calls and inflate the median.
    # Callables slower than a few blocks' worth are sized on what they took.
    times: list[float] = []
    while len(times) < 3 and sum(times) < 5 * min_block_s:
        start = time.perf_counter()
        fn()
        synchronize(dev)
        times.append(max(time.perf_counter() - start, 1e-9))
    number = max(1, min(100_000, math.ceil(min_block_s / min(times))))
    return _Plan(number, number * min(times), BLOCK_CAP * min_block_s)


def _block(
    fn: Callable[[], Any], dev: torch.device, number: int, cap_s: float = math.inf
) -> tuple[float, int]:
    """(Seconds per call, calls) of one block of ``number`` calls between two synchronizations.

    The block reads the clock between calls (at most :data:`_CLOCK_READS` times) and
    ends early once it has lasted ``cap_s``, after at least one call; its seconds per
    call then count the calls it ran. On a clock too coarse to see the block, it runs
    ``number`` more calls until the clock moves, so that no repeat is ever timed at zero
    seconds.
    """
    stride = max(1, math.ceil(number / _CLOCK_READS))
    synchronize(dev)
    start = time.perf_counter()
    calls = 0
    while True:
        run = min(stride, number - calls) if calls < number else number
        for _ in range(run):
            fn()
        calls += run
        if calls >= number or time.perf_counter() - start >= cap_s:
            synchronize(dev)
            elapsed = time.perf_counter() - start
            if elapsed > 0:
                return elapsed / calls, calls


class _Ceiling:
    """When an adaptive measurement must stop, however few repeats it has (:data:`CEILING`)."""

    def __init__(self, repeats: int | None, budget_s: float, plans: list[_Plan]) -> None:
        self.fixed = repeats is not None
        self.budget_s = budget_s
        self.plans = plans

    def reached(self, began: float, samples: list[list[float]], calls: list[list[int]]) -> bool:
        """Whether the blocks so far have run past the ceiling (never before one round)."""
        if self.fixed or not all(samples) or min(map(len, samples)) >= MIN_REPEATS:
            return False  # enough repeats: the budget, not the ceiling, ends it
        # a plan the warm-up could not size is sized on its first block
        planned = sum(
            p.block_s if p.block_s is not None else s[0] * c[0]
            for p, s, c in zip(self.plans, samples, calls, strict=True)
        )
        ceiling = CEILING * max(self.budget_s, MIN_REPEATS * planned)
        return time.perf_counter() - began >= ceiling


def _enough(
    samples: list[list[float]],
    repeats: int | None,
    began: float,
    budget_s: float,
    target_spread: float,
    number: int = 1,
) -> bool:
    """Whether every list of samples is complete (see :func:`time_callable`)."""
    done = min(len(s) for s in samples)
    if repeats is not None:
        return done >= repeats
    if done < MIN_REPEATS:
        return False
    quiet = all(Timing(tuple(s), number).spread <= target_spread for s in samples)
    return quiet or time.perf_counter() - began >= budget_s or done >= MAX_REPEATS


def compare(
    task: str,
    variants: Mapping[str, Callable[[], Any]],
    *,
    baseline: str | None = None,
    device: torch.device | str,
    repeats: int | None = None,
    warmup: int = 1,
    number: int | None = None,
    budget_s: float = 0.5,
    target_spread: float = 0.05,
    show: bool = True,
) -> list[Record]:
    """Time every variant of ``task``, print speed-ups with their verdicts, return records.

    The variants take turns: each round times one block of every variant, so a change
    in the machine's load during the comparison falls on all of them alike, and rounds
    continue (at least :data:`MIN_REPEATS`) until every variant's spread is within
    ``target_spread`` or ``budget_s`` per variant is spent. Blocks are sized and capped
    as in :func:`time_callable`, and the rounds stop at :data:`CEILING` times the
    longer of the budget and what :data:`MIN_REPEATS` planned rounds take: a comparison
    stopped there with fewer than :data:`MIN_REPEATS` rounds is cut short (each
    record's ``cut_short``), and its speed-ups print "(too few repeats)" and
    "inconclusive". ``repeats`` fixes the number of rounds instead (no ceiling).
    ``baseline`` names the variant the others are compared with (default: the first).
    With fewer than four repeats no interval reaches 95 %: every speed-up prints as
    "(too few repeats)" and "inconclusive". Each record keeps the seconds per call of
    every repeat, which its speed-ups' intervals are drawn from, and the calls each
    repeat ran.
    Arguments are checked before anything runs; a variant that raises stops the
    comparison with a :class:`VariantError` naming it. Records are appended to the file
    named by ``$EFFPT_RECORDS_FILE`` when it is set (the site's build sets it).
    ``device`` is required, as for :func:`time_callable`: the records name its machine.

    Examples
    --------
    >>> records = compare(
    ...     "sum 1000 ints",
    ...     {"python": lambda: sum(range(1000)), "builtin": lambda: 499500},
    ...     device="cpu",
    ...     repeats=3,
    ...     show=False,
    ... )
    >>> [r.variant for r in records], records[0].baseline
    (['python', 'builtin'], 'python')
    >>> compare("broken", {"boom": lambda: 1 / 0}, device="cpu", show=False)
    Traceback (most recent call last):
    ...
    effpt.bench.VariantError: variant 'boom' of task 'broken' raised ZeroDivisionError: division by zero
    >>> compare("t", {"a": lambda: None}, device="cpu", repeats=0)
    Traceback (most recent call last):
    ...
    ValueError: repeats must be >= 1, got 0
    >>> compare("t", {"a": lambda: None}, device=None)
    Traceback (most recent call last):
    ...
    TypeError: compare: device= must name the device the timed work runs on (a torch.device or its name, e.g. "cpu"), got None
    """
    if not isinstance(task, str):
        msg = f"task must be a str, got {type(task).__name__}"
        raise TypeError(msg)
    if not variants:
        msg = "variants must name at least one callable, got an empty mapping"
        raise ValueError(msg)
    for name in variants:
        if not isinstance(name, str):
            msg = f"variant names must be str, got {type(name).__name__} {name!r}"
            raise TypeError(msg)
    baseline = next(iter(variants)) if baseline is None else baseline
    if baseline not in variants:
        msg = f"baseline {baseline!r} is not one of the variants {list(variants)}"
        raise ValueError(msg)
    for name, fn in variants.items():
        if not callable(fn):
            msg = f"variant {name!r} of task {task!r} is not callable, got {type(fn).__name__}"
            raise TypeError(msg)
    _check_timing_args(repeats, warmup, number, 0.02, budget_s, target_spread)
    dev = _device("compare", device)
    machine = this_machine(dev)
    names = list(variants)
    plans: dict[str, _Plan] = {}
    samples: dict[str, list[float]] = {name: [] for name in names}
    calls: dict[str, list[int]] = {name: [] for name in names}
    cut_short = False
    try:
        for name in names:
            plans[name] = _warm_up(variants[name], dev, warmup, number, 0.02)
        began = time.perf_counter()
        # Round robin: one block of each variant per round, so that a change in the
        # machine's load during the comparison hits every variant alike.
        budget = budget_s * len(names)
        ceiling = _Ceiling(repeats, budget, [plans[n] for n in names])
        while not _enough(list(samples.values()), repeats, began, budget, target_spread):
            if ceiling.reached(began, list(samples.values()), list(calls.values())):
                cut_short = True
                break
            for name in names:
                seconds, ran = _block(variants[name], dev, plans[name].number, plans[name].cap_s)
                samples[name].append(seconds)
                calls[name].append(ran)
    except Exception as exc:
        msg = f"variant {name!r} of task {task!r} raised {type(exc).__name__}: {exc}"
        raise VariantError(msg) from exc
    records = []
    for name in names:
        timing = Timing(
            tuple(samples[name]), plans[name].number, tuple(calls[name]), cut_short=cut_short
        )
        records.append(
            Record(
                task=task,
                variant=name,
                median_s=timing.median,
                iqr_s=timing.iqr,
                q1_s=timing.q1,
                q3_s=timing.q3,
                repeats=len(timing.per_call),
                number=timing.number,
                baseline=baseline,
                machine=machine,
                per_call_s=timing.per_call,
                calls=timing.calls,
                cut_short=timing.cut_short,
            )
        )
    if show:
        print(format_table(records))  # noqa: T201  (showing it is the point)
    save_records(records)
    return records


def copy_bandwidth(
    device: torch.device | str | None = None, *, nbytes: int = 256 * 2**20, repeats: int = 5
) -> float:
    """Measure the practical memory bandwidth of ``device`` in bytes per second.

    Copies a buffer of ``nbytes`` into another on the device and counts bytes read
    plus bytes written, the usual convention for bandwidth-bound kernels.

    Examples
    --------
    >>> copy_bandwidth("cpu", nbytes=2**20, repeats=2) > 1e6
    True
    """
    check_int("nbytes", nbytes, 1)
    dev = pick_device() if device is None else torch.device(device)
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    timing = time_callable(lambda: dst.copy_(src), device=dev, repeats=repeats, warmup=2)
    return 2 * nbytes / timing.median


def matmul_throughput(
    device: torch.device | str | None = None,
    *,
    n: int = 4096,
    dtype: torch.dtype = torch.float32,
    repeats: int = 5,
) -> float:
    """Measure the practical matrix-multiply throughput of ``device`` in FLOP/s.

    An ``n × n`` by ``n × n`` product costs ``2 n³`` floating-point operations.

    Examples
    --------
    >>> matmul_throughput("cpu", n=128, repeats=2) > 1e6
    True
    """
    check_int("n", n, 1)
    dev = pick_device() if device is None else torch.device(device)
    gen = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    timing = time_callable(lambda: a @ b, device=dev, repeats=repeats, warmup=2)
    return 2 * n**3 / timing.median


@contextmanager
def num_threads(n: int) -> Iterator[None]:
    """Run the block on ``n`` of PyTorch's intra-op CPU threads, then restore the number.

    The previous number comes back when the block ends, also when it raises.

    Examples
    --------
    >>> before = torch.get_num_threads()
    >>> with num_threads(1):
    ...     print(torch.get_num_threads())
    1
    >>> torch.get_num_threads() == before
    True
    >>> with num_threads(0):
    ...     pass
    Traceback (most recent call last):
    ...
    ValueError: n must be >= 1, got 0
    """
    check_int("n", n, 1)
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def on_one_thread(
    run: Callable[[], Any], device: torch.device | str | None = None
) -> tuple[Any, Machine] | None:
    """Call ``run`` again on one CPU thread, where that is a different run; else say why not.

    On a CPU with several intra-op threads, ``run`` is called under ``num_threads(1)``
    and its result comes back with the :class:`~effpt.machine.Machine` of that one
    thread (for :func:`effpt.expect.expect`'s ``device``). Otherwise it
    prints one line saying why there is no one-thread run (a GPU does not use the CPU's
    thread pool; a CPU on one thread already ran it) and returns None. ``device``
    defaults to :func:`~effpt.device.pick_device`.

    Examples
    --------
    >>> with num_threads(2):
    ...     result, machine = on_one_thread(torch.get_num_threads, "cpu")
    ...     after = torch.get_num_threads()
    >>> result, after, machine.threads
    (1, 2, 1)
    >>> with num_threads(1):
    ...     on_one_thread(torch.get_num_threads, "cpu") is None
    this run has one thread: the timings above are already the one-thread timings
    True
    >>> on_one_thread(torch.get_num_threads, "meta") is None
    one-thread timing: CPU only, not run on meta
    True
    """
    if not callable(run):
        msg = f"run must be callable, got {type(run).__name__}"
        raise TypeError(msg)
    dev = pick_device() if device is None else torch.device(device)
    if dev.type != "cpu":
        print(f"one-thread timing: CPU only, not run on {dev.type}")  # noqa: T201
        return None
    if torch.get_num_threads() == 1:
        print("this run has one thread: the timings above are already the one-thread timings")  # noqa: T201
        return None
    with num_threads(1):
        return run(), this_machine(dev)


def faster_thread_count(
    step: Callable[[], Any], device: torch.device | str | None = None, *, calls: int = 3
) -> int:
    """This CPU's intra-op thread count or one, whichever ran ``step`` faster.

    A pool of threads waits for its slowest thread at every operation, so on cores busy
    with other work it can lose to one thread by far, most of all on small operations.
    On a CPU with several threads, ``step`` runs once to warm up and then ``calls`` times
    at this count and on one; the median call of each decides, so that with three calls
    or more (the default) neither one preempted call nor one lucky call does. Prints
    one line with both times and the choice. Elsewhere (a GPU, or one thread already) it
    runs nothing, prints nothing and returns the current count. The count is left as it
    was: run the work under ``num_threads(faster_thread_count(step))``. ``device``
    defaults to :func:`~effpt.device.pick_device`.

    Examples
    --------
    >>> with num_threads(2):
    ...     faster_thread_count(lambda: sum(range(1000)), "cpu") in (1, 2)
    probe: ... on 2 threads, ... on one; ... faster
    True
    >>> with num_threads(1):
    ...     faster_thread_count(lambda: None, "cpu")
    1
    >>> faster_thread_count(lambda: None, "meta") == torch.get_num_threads()
    True
    """
    if not callable(step):
        msg = f"step must be callable, got {type(step).__name__}"
        raise TypeError(msg)
    check_int("calls", calls, 1)
    dev = pick_device() if device is None else torch.device(device)
    threads = torch.get_num_threads()
    if dev.type != "cpu" or threads == 1:
        return threads

    def seconds_of_one_call() -> float:
        began = time.perf_counter()
        step()
        return time.perf_counter() - began

    def median_call() -> float:
        step()  # warm-up: first calls allocate, and a new pool starts its threads
        return statistics.median(seconds_of_one_call() for _ in range(calls))

    on_all = median_call()
    with num_threads(1):
        on_one = median_call()
    chosen = 1 if on_one < on_all else threads
    print(  # noqa: T201
        f"probe: a call took {format_seconds(on_all)} on {threads} threads, "
        f"{format_seconds(on_one)} on one; {'one thread' if chosen == 1 else f'{threads} threads'} "
        "faster"
    )
    return chosen
