"""Timing that tells the truth on every device, and records of what was measured.

GPU work is asynchronous: a Python timer around a CUDA call measures the launch, not
the work. :func:`time_callable` warms up first (lazy initialisation and compilation
are paid once, outside the measurement), synchronizes the device around every timed
block, repeats, and reports the median and interquartile range. :func:`compare`
times several variants of one task and returns :class:`Record` objects, which the
gallery collects into the site's measurements page.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from effpt._validate import check_int
from effpt.device import describe, pick_device

__all__ = [
    "Record",
    "Timing",
    "VariantError",
    "compare",
    "copy_bandwidth",
    "format_seconds",
    "format_table",
    "matmul_throughput",
    "synchronize",
    "time_callable",
]

#: Set by the gallery hook: the JSON-lines file that :func:`compare` appends records to.
RECORDS_ENV = "EFFPT_RECORDS_FILE"


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


@dataclass(frozen=True)
class Timing:
    """Seconds per call, one value per repeat; each repeat ran ``number`` calls."""

    per_call: tuple[float, ...]
    number: int

    @property
    def median(self) -> float:
        """Median seconds per call over the repeats."""
        return statistics.median(self.per_call)

    @property
    def iqr(self) -> float:
        """Interquartile range of seconds per call (0 with fewer than two repeats)."""
        if len(self.per_call) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.per_call, n=4, method="inclusive")
        return q3 - q1


def time_callable(
    fn: Callable[[], Any],
    *,
    device: torch.device | str | None = None,
    repeats: int = 7,
    warmup: int = 1,
    number: int | None = None,
    min_block_s: float = 0.02,
) -> Timing:
    """Time ``fn()`` correctly on ``device``: warm-up, synchronize, repeat.

    Each of the ``repeats`` blocks runs ``fn`` ``number`` times between two
    synchronizations. When ``number`` is None it is chosen so that a block lasts at
    least ``min_block_s``, which keeps timer resolution and launch noise out of
    fast measurements.

    Examples
    --------
    >>> t = time_callable(lambda: sum(range(100)), repeats=5, number=10)
    >>> len(t.per_call), t.number, t.median > 0
    (5, 10, True)
    >>> time_callable(lambda: None, repeats=0)
    Traceback (most recent call last):
    ...
    ValueError: repeats must be >= 1, got 0
    """
    check_int("repeats", repeats, 1)
    check_int("warmup", warmup, 0)
    if number is not None:
        check_int("number", number, 1)
    dev = pick_device() if device is None else torch.device(device)

    for _ in range(warmup):
        fn()
    synchronize(dev)

    if number is None:
        start = time.perf_counter()
        fn()
        synchronize(dev)
        one = max(time.perf_counter() - start, 1e-9)
        number = max(1, min(100_000, math.ceil(min_block_s / one)))

    per_call = []
    for _ in range(repeats):
        synchronize(dev)
        start = time.perf_counter()
        for _ in range(number):
            fn()
        synchronize(dev)
        per_call.append((time.perf_counter() - start) / number)
    return Timing(per_call=tuple(per_call), number=number)


@dataclass(frozen=True)
class Record:
    """One measured variant of one task, as the measurements page lists it."""

    task: str
    variant: str
    median_s: float
    iqr_s: float
    repeats: int
    number: int
    baseline: str
    machine: str

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict."""
        return asdict(self)


def compare(
    task: str,
    variants: Mapping[str, Callable[[], Any]],
    *,
    baseline: str | None = None,
    device: torch.device | str | None = None,
    repeats: int = 7,
    warmup: int = 1,
    number: int | None = None,
    show: bool = True,
) -> list[Record]:
    """Time every variant of ``task``, print a table with ratios, and return records.

    ``baseline`` names the variant the others are compared with (default: the first).
    A variant that raises stops the comparison with a :class:`VariantError` naming it.

    Examples
    --------
    >>> records = compare(
    ...     "sum 1000 ints",
    ...     {"python": lambda: sum(range(1000)), "builtin": lambda: 499500},
    ...     repeats=3,
    ...     show=False,
    ... )
    >>> [r.variant for r in records], records[0].baseline
    (['python', 'builtin'], 'python')
    >>> compare("broken", {"boom": lambda: 1 / 0}, show=False)
    Traceback (most recent call last):
    ...
    effpt.bench.VariantError: variant 'boom' of task 'broken' raised ZeroDivisionError: division by zero
    """
    if not variants:
        msg = "variants must name at least one callable, got an empty mapping"
        raise ValueError(msg)
    baseline = next(iter(variants)) if baseline is None else baseline
    if baseline not in variants:
        msg = f"baseline {baseline!r} is not one of the variants {list(variants)}"
        raise ValueError(msg)
    dev = pick_device() if device is None else torch.device(device)
    machine = describe(dev)
    records = []
    for name, fn in variants.items():
        try:
            timing = time_callable(fn, device=dev, repeats=repeats, warmup=warmup, number=number)
        except (ValueError, TypeError) as exc:
            if fn is None or not callable(fn):
                msg = f"variant {name!r} of task {task!r} is not callable"
                raise TypeError(msg) from exc
            raise VariantError(_variant_msg(name, task, exc)) from exc
        except Exception as exc:
            raise VariantError(_variant_msg(name, task, exc)) from exc
        records.append(
            Record(task, name, timing.median, timing.iqr, repeats, timing.number, baseline, machine)
        )
    if show:
        print(format_table(records))  # noqa: T201  (showing the table is the point)
    _save(records)
    return records


def _variant_msg(name: str, task: str, exc: BaseException) -> str:
    return f"variant {name!r} of task {task!r} raised {type(exc).__name__}: {exc}"


def _save(records: Sequence[Record]) -> None:
    """Append records to the file the gallery hook named, if any (plain runs save nothing)."""
    path = os.environ.get(RECORDS_ENV)
    if not path:
        return
    with Path(path).open("a", encoding="utf-8") as f:
        f.writelines(json.dumps(record.to_dict()) + "\n" for record in records)


def format_seconds(seconds: float) -> str:
    """Format a duration with a unit that keeps three significant digits.

    Examples
    --------
    >>> format_seconds(0.0000238), format_seconds(0.0194), format_seconds(2.5)
    ('23.8 µs', '19.4 ms', '2.50 s')
    """
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            value = seconds / scale
            return f"{value:.3g} {unit}" if value >= 100 else f"{value:#.3g} {unit}"
    raise AssertionError  # pragma: no cover


def format_table(records: Sequence[Record]) -> str:
    """A plain-text table of records: median, IQR and speed-up over the baseline.

    Examples
    --------
    >>> rows = [Record("t", "slow", 2e-3, 1e-4, 5, 1, "slow", "cpu"),
    ...         Record("t", "fast", 5e-4, 2e-5, 5, 1, "slow", "cpu")]
    >>> print(format_table(rows))
    t                   median        IQR   speed-up
    slow               2.00 ms     100 µs      1.00×
    fast                500 µs    20.0 µs      4.00×
    """
    if not records:
        return ""
    base = {r.variant: r.median_s for r in records}
    width = max(16, len(records[0].task) + 2, *(len(r.variant) + 2 for r in records))
    lines = [f"{records[0].task:<{width}}{'median':>10}{'IQR':>11}{'speed-up':>11}"]
    for r in records:
        ratio = base[r.baseline] / r.median_s if r.baseline in base else float("nan")
        lines.append(
            f"{r.variant:<{width}}{format_seconds(r.median_s):>10}"
            f"{format_seconds(r.iqr_s):>11}{ratio:>10.2f}×"
        )
    return "\n".join(lines)


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
