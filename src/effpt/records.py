"""Records of what was measured, speed-ups with their uncertainty, and how to print both.

A :class:`Record` is one timed variant of one task, as :func:`effpt.bench.compare`
returns it and as the site's measurements page lists it. :func:`speedup` turns two
timings into a :class:`Ratio` that carries the interval the noise allows and a verdict,
so that a comparison whose spreads overlap is reported as "inconclusive", never as a
win or a loss.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from effpt._validate import read_json_lines
from effpt.machine import Machine

__all__ = [
    "RECORDS_ENV",
    "Ratio",
    "Record",
    "format_seconds",
    "format_table",
    "read_records",
    "save_records",
    "speedup",
]

#: Names the JSON-lines file that :func:`save_records` appends to (the site's build sets it).
RECORDS_ENV = "EFFPT_RECORDS_FILE"


@dataclass(frozen=True)
class Record:
    """One measured variant of one task: median and quartiles of seconds per call.

    ``machine`` is the :class:`effpt.machine.Machine` it ran on; in JSON, its fields.
    """

    task: str
    variant: str
    median_s: float
    iqr_s: float
    q1_s: float
    q3_s: float
    repeats: int
    number: int
    baseline: str
    machine: Machine

    def __post_init__(self) -> None:
        if not isinstance(self.machine, Machine):
            msg = f"machine must be an effpt.machine.Machine, got {type(self.machine).__name__}"
            raise TypeError(msg)

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict, its machine as the machine's fields."""
        return {**asdict(self), "machine": self.machine.to_dict()}

    @classmethod
    def from_dict(cls, data: object) -> Record:
        """The record :meth:`to_dict` gave, checked; an error says which field is wrong."""
        return _checked_record(data)


@dataclass(frozen=True)
class Ratio:
    """How many times faster the fast variant ran, with the interval the noise allows.

    ``value`` is the ratio of the medians; ``low`` divides the slow variant's first
    quartile by the fast one's third, ``high`` the other way round. When the interval
    contains 1 the two cannot be told apart on this evidence: "inconclusive".
    ``single`` is True when a side rests on one sample: its quartiles are its median,
    so the interval has no width that means anything, and the verdict is
    "inconclusive" whatever the value (as it is for an interval without a finite,
    positive bound). :func:`effpt.expect.expect` reads ``single`` too.

    Examples
    --------
    >>> r = Ratio(2.31, 2.12, 2.52)
    >>> str(r), r.verdict
    ('2.3× (2.1–2.5)', 'faster')
    >>> Ratio(1.04, 0.91, 1.22).verdict
    'inconclusive'
    >>> str(Ratio(415.2, 401.0, 433.9)), str(Ratio(1.2712, 1.2698, 1.2741))
    ('415× (401–434)', '1.271× (1.270–1.274)')
    >>> str(Ratio(1.30, 1.26, 1.34))  # bounds that round alike get the decimal that parts them
    '1.30× (1.26–1.34)'
    >>> str(Ratio(0.52, 0.2, 1.1)), str(Ratio(1.57, 1.23, 2.41))
    ('0.5× (0.2–1.1)', '1.6× (1.2–2.4)')
    >>> str(Ratio(1.69, 1.01, 2.02))  # faster: the low bound is not rounded down to 1.0
    '1.7× (1.01–2.0)'
    >>> r = Ratio(1.8, 1.8, 1.8, single=True)  # e.g. compare(..., repeats=1)
    >>> str(r), r.verdict
    ('1.8× (one sample)', 'inconclusive')

    """

    value: float
    low: float
    high: float
    single: bool = False

    @property
    def verdict(self) -> str:
        """'faster' or 'slower' when the whole interval says so, else 'inconclusive'.

        Always 'inconclusive' for a ratio from one sample or an interval that is not
        bounded by finite positive numbers.
        """
        bounded = all(math.isfinite(v) and v > 0 for v in (self.low, self.high))
        if self.single or not bounded:
            return "inconclusive"
        if self.low > 1:
            return "faster"
        if self.high < 1:
            return "slower"
        return "inconclusive"

    def decimals(self) -> int:
        """Decimals the interval supports: three significant digits only when it is tight.

        Two significant digits when the interval is narrower than half the value, one
        when it is wider (but always one decimal below 10×, so that 1.3× is not shown
        as 1×): a ratio is never printed more precisely than it is known. Bounds that
        would print alike get one more decimal (up to three), so that an interval such
        as 1.26–1.34 is not shown as "1.3–1.3".
        """
        finite = all(math.isfinite(v) and v > 0 for v in (self.value, self.low, self.high))
        if not finite:
            return 0
        width = self.high - self.low
        digits = 3 if width < 0.02 * self.value else 2 if width < 0.5 * self.value else 1
        decimals = max(digits - 1 - math.floor(math.log10(self.value)), 1 if self.value < 10 else 0)
        while (
            decimals < 3
            and self.low < self.high
            and (f"{self.low:.{decimals}f}" == f"{self.high:.{decimals}f}")
        ):
            decimals += 1
        return decimals

    def _bound(self, bound: float, decimals: int) -> str:
        """A bound, with more decimals only if rounding would make a decisive one touch 1."""
        while self.verdict != "inconclusive" and round(bound, decimals) == 1 and decimals < 17:
            decimals += 1  # a decisive bound is never printed as 1
        return f"{bound:.{decimals}f}"

    def __truediv__(self, other: Ratio) -> Ratio:
        """How many times larger this ratio is than ``other``, with the widest interval.

        The low bound divides this low bound by the other's high one, and the high bound
        the other way round, so the result is never more certain than its parts.

        Examples
        --------
        >>> Ratio(4.0, 3.0, 5.0) / Ratio(2.0, 1.5, 2.5)
        Ratio(value=2.0, low=1.2, high=3.3333333333333335, single=False)
        >>> Ratio(4.0, 3.0, 5.0) / 2
        Traceback (most recent call last):
        ...
        TypeError: a Ratio divides only by a Ratio, got int
        """
        if not isinstance(other, Ratio):
            msg = f"a Ratio divides only by a Ratio, got {type(other).__name__}"
            raise TypeError(msg)
        return Ratio(
            self.value / other.value,
            self.low / other.high,
            self.high / other.low,
            single=self.single or other.single,
        )

    def __str__(self) -> str:
        if not all(math.isfinite(v) for v in (self.value, self.low, self.high)):
            return "n/a"
        if self.single:
            return f"{self.value:.{max(1, 1 - math.floor(math.log10(self.value)))}f}× (one sample)"
        d = self.decimals()
        return f"{self.value:.{d}f}× ({self._bound(self.low, d)}–{self._bound(self.high, d)})"


def _quartiles_of(x: Any) -> tuple[float, float, float, int | None]:
    """(q1, median, q3, samples) of a Record or of anything with ``q1``, ``median``, ``q3``.

    ``samples`` is the number of repeats behind them, or None where unknown.
    """
    if isinstance(x, Record):
        return x.q1_s, x.median_s, x.q3_s, x.repeats
    try:
        quartiles = float(x.q1), float(x.median), float(x.q3)
    except AttributeError:
        msg = f"expected a Timing or a Record, got {type(x).__name__}"
        raise TypeError(msg) from None
    per_call = getattr(x, "per_call", None)
    return (*quartiles, None if per_call is None else len(per_call))


def speedup(slow: Any, fast: Any) -> Ratio:
    """How many times faster ``fast`` ran than ``slow``: a :class:`Ratio` with its interval.

    Each argument is an :class:`effpt.bench.Timing` or a :class:`Record`. If either
    rests on a single sample, the Ratio is ``single`` and its verdict "inconclusive".

    Examples
    --------
    >>> from effpt.bench import Timing
    >>> slow = Timing(per_call=(9.0, 10.0, 10.0, 10.0, 11.0), number=1)
    >>> fast = Timing(per_call=(4.0, 5.0, 5.0, 5.0, 6.0), number=1)
    >>> r = speedup(slow, fast)
    >>> r.value, r.low, r.high, r.verdict
    (2.0, 2.0, 2.0, 'faster')
    >>> speedup(fast, fast).verdict
    'inconclusive'
    >>> speedup(slow, "fast")
    Traceback (most recent call last):
    ...
    TypeError: expected a Timing or a Record, got str
    """
    s_q1, s_med, s_q3, s_n = _quartiles_of(slow)
    f_q1, f_med, f_q3, f_n = _quartiles_of(fast)
    single = any(n is not None and n < 2 for n in (s_n, f_n))
    if min(s_q1, s_med, s_q3, f_q1, f_med, f_q3) <= 0:  # a zero time has no ratio
        return Ratio(math.nan, math.nan, math.nan, single=single)
    return Ratio(s_med / f_med, s_q1 / f_q3, s_q3 / f_q1, single=single)


_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def format_seconds(seconds: float) -> str:
    """Format a duration with three significant digits and the unit that fits *after* rounding.

    Examples
    --------
    >>> format_seconds(0.0000238), format_seconds(0.0194), format_seconds(2.5)
    ('23.8 µs', '19.4 ms', '2.50 s')
    >>> format_seconds(0.9995), format_seconds(0.09996), format_seconds(0.0)
    ('1.00 s', '100 ms', '0 s')
    >>> format_seconds(0.0009995), format_seconds(999.5), format_seconds(1234.5)
    ('1.00 ms', '1000 s', '1230 s')
    >>> format_seconds(float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: seconds must be a finite number >= 0, got nan
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        msg = f"seconds must be a number, got {type(seconds).__name__}"
        raise TypeError(msg)
    if not (math.isfinite(seconds) and seconds >= 0):
        msg = f"seconds must be a finite number >= 0, got {seconds!r}"
        raise ValueError(msg)
    if seconds == 0:
        return "0 s"
    for k, (unit, scale) in enumerate(_UNITS):
        value = float(f"{seconds / scale:.3g}")  # round first, then see if the unit fits
        shown = unit
        if value >= 1000 and k > 0:  # 999.5 µs rounds to 1000 µs: that is 1.00 ms
            value, shown = value / 1000, _UNITS[k - 1][0]
        if value >= 1 or unit == "ns":
            return f"{value:.0f} {shown}" if value >= 100 else f"{value:#.3g} {shown}"
    raise AssertionError  # pragma: no cover


def format_table(records: Sequence[Record]) -> str:
    """A plain-text table of records: median, IQR, and each speed-up with its verdict.

    Examples
    --------
    >>> from effpt.device import this_machine
    >>> cpu = this_machine("cpu")
    >>> rows = [Record("t", "slow", 2e-3, 1e-4, 1.95e-3, 2.05e-3, 5, 1, "slow", cpu),
    ...         Record("t", "fast", 5e-4, 2e-5, 4.9e-4, 5.1e-4, 5, 1, "slow", cpu),
    ...         Record("t", "same", 2e-3, 4e-4, 1.8e-3, 2.2e-3, 5, 1, "slow", cpu),
    ...         Record("t", "broken", 0.0, 0.0, 0.0, 0.0, 5, 1, "slow", cpu)]
    >>> print(format_table(rows))
    t              median       IQR  speed-up over slow
    slow          2.00 ms    100 µs  (baseline)
    fast           500 µs   20.0 µs  4.0× (3.8–4.2) faster
    same          2.00 ms    400 µs  1.0× (0.9–1.1) inconclusive
    broken            0 s       0 s  n/a (median is 0)
    """
    if not records:
        return ""
    by_name = {r.variant: r for r in records}
    width = max(12, len(records[0].task) + 2, *(len(r.variant) + 2 for r in records))
    baseline = records[0].baseline
    lines = [f"{records[0].task:<{width}}{'median':>9}{'IQR':>10}  speed-up over {baseline}"]
    for r in records:
        if r.variant == r.baseline:
            note = "(baseline)"
        elif r.baseline not in by_name:
            note = "n/a (no baseline)"
        elif r.median_s <= 0 or by_name[r.baseline].median_s <= 0:
            note = "n/a (median is 0)"
        else:
            ratio = speedup(by_name[r.baseline], r)
            note = f"{ratio} {ratio.verdict}"
        lines.append(
            f"{r.variant:<{width}}{format_seconds(r.median_s):>9}"
            f"{format_seconds(r.iqr_s):>10}  {note}"
        )
    return "\n".join(lines)


def save_records(records: Sequence[Record]) -> None:
    """Append records to the file ``$EFFPT_RECORDS_FILE`` names; without it, do nothing."""
    path = os.environ.get(RECORDS_ENV)
    if not path:
        return
    with Path(path).open("a", encoding="utf-8") as f:
        f.writelines(json.dumps(record.to_dict()) + "\n" for record in records)


def _checked_record(data: object) -> Record:
    """A :class:`Record` from one decoded JSON line, or an error saying what is wrong."""
    if not isinstance(data, dict):
        msg = f"a record must be a JSON object, got {type(data).__name__}"
        raise TypeError(msg)
    kinds = {f.name: f.type for f in fields(Record)}
    missing, extra = sorted(kinds.keys() - data.keys()), sorted(data.keys() - kinds.keys())
    if missing or extra:
        msg = f"missing fields {missing}" if missing else f"unknown fields {extra}"
        raise ValueError(msg)
    try:  # a record written before machines had fields stores describe()'s line
        machine = Machine.read(data["machine"])
    except (TypeError, ValueError) as exc:
        msg = f"field 'machine': {exc}"
        raise type(exc)(msg) from None
    for name, kind in kinds.items():
        if name == "machine":
            continue
        wanted = (int, float) if kind == "float" else {"int": int, "str": str}[kind]
        if not isinstance(data[name], wanted) or isinstance(data[name], bool):
            msg = f"field {name!r} is {type(data[name]).__name__}, not {kind}"
            raise TypeError(msg)
    for name in ("median_s", "q1_s", "q3_s"):
        if not (math.isfinite(data[name]) and data[name] > 0):
            msg = f"{name}={data[name]!r} is not a positive number"
            raise ValueError(msg)
    if not data["q1_s"] <= data["median_s"] <= data["q3_s"]:
        msg = "quartiles out of order: expected q1_s <= median_s <= q3_s"
        raise ValueError(msg)
    return Record(**{**data, "machine": machine})


def read_records(path: str | os.PathLike[str]) -> list[Record]:
    """The records :func:`save_records` wrote to a JSON-lines file, checked line by line.

    A malformed line (not JSON, a missing or unknown field, a wrong type, a time that is
    not positive, quartiles out of order) raises ``ValueError`` naming file and line.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "page.jsonl"
    >>> from effpt.device import this_machine
    >>> good = Record("sum", "loop", 2e-3, 1e-4, 1.9e-3, 2.0e-3, 5, 10, "loop", this_machine("cpu"))
    >>> _ = p.write_text(json.dumps(good.to_dict()) + "\\n")
    >>> read_records(p) == [good]
    True
    >>> _ = p.write_text(json.dumps({**good.to_dict(), "machine": {"kind": "cpu"}}) + "\\n")
    >>> read_records(p)
    Traceback (most recent call last):
    ...
    ValueError: malformed measurement record .../page.jsonl:1: field 'machine': machine: missing fields ['cuda', 'name', 'threads', 'torch']
    >>> _ = p.write_text(json.dumps({**good.to_dict(), "q1_s": 3e-3}) + "\\n")
    >>> read_records(p)
    Traceback (most recent call last):
    ...
    ValueError: malformed measurement record .../page.jsonl:1: quartiles out of order: expected q1_s <= median_s <= q3_s
    """
    return read_json_lines(path, "measurement record", _checked_record)
