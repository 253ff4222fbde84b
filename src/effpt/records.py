"""Records of what was measured, speed-ups with their uncertainty, and how to print both.

A :class:`Record` is one timed variant of one task, as :func:`effpt.bench.compare`
returns it and as the site's measurements page lists it. :func:`speedup` turns two
timings into a :class:`Ratio` that carries a 95 % confidence interval (:data:`LEVEL`)
and a verdict, so that a comparison the noise could have produced is reported as
"inconclusive", never as a win or a loss.

The interval is distribution-free: it comes from the ranks of every ratio of a slow
repeat to a fast one (the Mann-Whitney interval of a shift in the logarithm of the
times), so when two variants run equally fast a verdict other than "inconclusive"
comes out in at most 5 % of comparisons, whatever the shape of the noise. Fewer than
four repeats a side cannot reach 95 % at all: their ratio prints "(too few repeats)".
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from effpt import _stats
from effpt._stats import ratio_interval
from effpt._validate import finite_float, read_json_lines
from effpt.machine import Machine

__all__ = [
    "LEVEL",
    "RECORDS_ENV",
    "Ratio",
    "Record",
    "format_seconds",
    "format_table",
    "read_records",
    "save_records",
    "speedup",
]

#: The confidence level of the interval behind every verdict (speed-ups, expectations, claims).
LEVEL = _stats.LEVEL
#: Names the JSON-lines file that :func:`save_records` appends to (the site's build sets it).
RECORDS_ENV = "EFFPT_RECORDS_FILE"


@dataclass(frozen=True)
class Record:
    """One measured variant of one task: median and quartiles of seconds per call.

    ``machine`` is the :class:`effpt.machine.Machine` it ran on; in JSON, its fields.
    ``per_call_s`` holds the seconds per call of every repeat, which the confidence
    interval of a speed-up needs; a record written before records kept them has none,
    and its speed-ups print "(too few repeats)". ``number`` is the calls a repeat was
    planned to run and ``calls`` the calls each repeat ran: fewer where a block that ran
    far past its planned length stopped early, more on a clock too coarse to see
    ``number`` calls (empty in a record that did not keep them).
    ``cut_short`` is True when the measurement stopped at its ceiling with too few
    repeats (see :func:`effpt.bench.compare`): its speed-ups are inconclusive.
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
    per_call_s: tuple[float, ...] = ()
    calls: tuple[int, ...] = ()
    cut_short: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.machine, Machine):
            msg = f"machine must be an effpt.machine.Machine, got {type(self.machine).__name__}"
            raise TypeError(msg)
        object.__setattr__(self, "per_call_s", tuple(self.per_call_s))
        object.__setattr__(self, "calls", tuple(self.calls))

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict, its machine as the machine's fields."""
        return {
            **asdict(self),
            "machine": self.machine.to_dict(),
            "per_call_s": list(self.per_call_s),
            "calls": list(self.calls),
        }

    @classmethod
    def from_dict(cls, data: object) -> Record:
        """The record :meth:`to_dict` gave, checked; an error says which field is wrong."""
        return _checked_record(data)


@dataclass(frozen=True)
class Ratio:
    """How many times faster the fast variant ran, with its confidence interval.

    ``value`` is the ratio of the medians; ``low`` and ``high`` bound the interval
    that covers the true speed-up with probability ``level`` (see :func:`speedup`).
    When the interval contains 1 the two cannot be told apart on this evidence:
    "inconclusive". ``single`` is True when no interval reaches ``level``: a side has
    too few repeats (one, or fewer than four against four), or a record kept no
    repeats; the verdict is then "inconclusive" whatever the value (as it is for an
    interval without a finite, positive bound). :func:`effpt.expect.expect` reads
    ``single`` too.

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
    >>> r = Ratio(1.8, 1.8, 1.8, single=True)  # e.g. compare(..., repeats=3)
    >>> str(r), r.verdict
    ('1.8× (too few repeats)', 'inconclusive')
    >>> str(Ratio(0.96, 0.5, 0.97))  # the value never prints outside its interval
    '0.96× (0.50–0.97)'

    """

    value: float
    low: float
    high: float
    single: bool = False
    level: float = LEVEL

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
        the other way round. The result holds whenever both intervals hold, so its
        ``level`` is what is left after both parts' chances of missing (0.95 and 0.95
        give 0.90): never more certain than its parts.

        Examples
        --------
        >>> Ratio(4.0, 3.0, 5.0) / Ratio(2.0, 1.5, 2.5)
        Ratio(value=2.0, low=1.2, high=3.3333333333333335, single=False, level=0.9)
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
            level=round(max(0.0, self.level + other.level - 1), 12),
        )

    def __str__(self) -> str:
        if not all(math.isfinite(v) for v in (self.value, self.low, self.high)):
            return "n/a"
        if self.value <= 0:  # no logarithm to size the decimals with: show it as it is
            return f"{self.value:g}× ({self.low:g}–{self.high:g})"
        if self.single:
            decimals = max(1, 1 - math.floor(math.log10(self.value)))
            return f"{self.value:.{decimals}f}× (too few repeats)"
        d = self.decimals()
        low, high = self._bound(self.low, d), self._bound(self.high, d)
        shown = d
        while shown < 17 and not float(low) <= round(self.value, shown) <= float(high):
            shown += 1  # rounding must not carry the value outside its printed interval
        return f"{self.value:.{shown}f}× ({low}–{high})"


def _samples_of(x: Any) -> tuple[float, tuple[float, ...]]:
    """(median, per-call seconds of every repeat) of a Record or a Timing.

    The repeats are empty for a record that did not keep them, and for a measurement
    cut short: no interval is drawn from either.
    """
    if getattr(x, "cut_short", False):
        return (x.median_s if isinstance(x, Record) else float(x.median)), ()
    if isinstance(x, Record):
        return x.median_s, x.per_call_s
    try:
        per_call = tuple(float(v) for v in x.per_call)
    except AttributeError:
        msg = f"expected a Timing or a Record, got {type(x).__name__}"
        raise TypeError(msg) from None
    if not per_call:
        msg = f"a {type(x).__name__} with no repeats has no speed-up (per_call is empty)"
        raise ValueError(msg)
    return float(x.median), per_call


def speedup(slow: Any, fast: Any) -> Ratio:
    """How many times faster ``fast`` ran than ``slow``: a :class:`Ratio` with its interval.

    Each argument is an :class:`effpt.bench.Timing` or a :class:`Record`. The value is
    the ratio of the medians. The interval is the 95 % (:data:`~effpt.records.LEVEL`) confidence
    interval of the speed-up from the ranks of all ratios of a slow repeat to a fast
    one, widened if need be to hold the value: it assumes nothing about how the times
    are distributed. Where no interval reaches 95 % (fewer than four repeats a side,
    a record without its repeats, or a measurement cut short at its ceiling) the Ratio
    is ``single`` and its verdict "inconclusive".

    Examples
    --------
    >>> from effpt.bench import Timing
    >>> slow = Timing(per_call=(9.0, 10.0, 10.0, 10.0, 11.0), number=1)
    >>> fast = Timing(per_call=(4.0, 5.0, 5.0, 5.0, 6.0), number=1)
    >>> r = speedup(slow, fast)
    >>> r.value, r.low, r.high, r.verdict
    (2.0, 1.6666666666666667, 2.5, 'faster')
    >>> speedup(fast, fast).verdict
    'inconclusive'
    >>> speedup(Timing((9.0, 10.0, 11.0), 1), Timing((4.0, 5.0, 6.0), 1)).single
    True
    >>> speedup(slow, Timing(fast.per_call, 1, cut_short=True)).verdict
    'inconclusive'
    >>> speedup(slow, "fast")
    Traceback (most recent call last):
    ...
    TypeError: expected a Timing or a Record, got str
    """
    s_med, s_all = _samples_of(slow)
    f_med, f_all = _samples_of(fast)
    if min(s_med, f_med, *s_all, *f_all) <= 0:  # a zero time has no ratio
        return Ratio(math.nan, math.nan, math.nan, single=True)
    value = s_med / f_med
    interval = ratio_interval(s_all, f_all) if s_all and f_all else None
    if interval is None:
        return Ratio(value, value, value, single=True)
    return Ratio(value, min(interval[0], value), max(interval[1], value))


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
    >>> def row(variant, seconds):  # five repeats: (min, q1, median, q3, max)
    ...     q1, med, q3 = seconds[1:4]
    ...     return Record("t", variant, med, q3 - q1, q1, q3, 5, 1, "slow", cpu, seconds)
    >>> rows = [row("slow", (1.9e-3, 1.95e-3, 2e-3, 2.05e-3, 2.1e-3)),
    ...         row("fast", (4.8e-4, 4.9e-4, 5e-4, 5.1e-4, 5.2e-4)),
    ...         row("same", (1.6e-3, 1.8e-3, 2e-3, 2.2e-3, 2.4e-3)),
    ...         Record("t", "broken", 0.0, 0.0, 0.0, 0.0, 5, 1, "slow", cpu)]
    >>> print(format_table(rows))
    t              median       IQR  speed-up over slow
    slow          2.00 ms    100 µs  (baseline)
    fast           500 µs   20.0 µs  4.0× (3.8–4.3) faster
    same          2.00 ms    400 µs  1.0× (0.8–1.2) inconclusive
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
    # records written before they kept their repeats (or their calls) lack these
    optional = {"per_call_s", "calls", "cut_short"}
    missing = sorted(kinds.keys() - optional - data.keys())
    extra = sorted(data.keys() - kinds.keys())
    if missing or extra:
        msg = f"missing fields {missing}" if missing else f"unknown fields {extra}"
        raise ValueError(msg)
    try:  # a record written before machines had fields stores describe()'s line
        machine = Machine.read(data["machine"])
    except (TypeError, ValueError) as exc:
        msg = f"field 'machine': {exc}"
        raise type(exc)(msg) from None
    for name, kind in kinds.items():
        if name in ("machine", "per_call_s", "calls", "cut_short"):
            continue
        wanted = (int, float) if kind == "float" else {"int": int, "str": str}[kind]
        if not isinstance(data[name], wanted) or isinstance(data[name], bool):
            msg = f"field {name!r} is {type(data[name]).__name__}, not {kind}"
            raise TypeError(msg)
    values = {
        name: finite_float(name, data[name]) for name in ("median_s", "q1_s", "q3_s", "iqr_s")
    }
    for name in ("median_s", "q1_s", "q3_s"):
        if not (math.isfinite(values[name]) and values[name] > 0):
            msg = f"{name}={data[name]!r} is not a positive number"
            raise ValueError(msg)
    if not (math.isfinite(values["iqr_s"]) and values["iqr_s"] >= 0):
        msg = f"iqr_s={data['iqr_s']!r} is negative or not a number"
        raise ValueError(msg)
    if not values["q1_s"] <= values["median_s"] <= values["q3_s"]:
        msg = "quartiles out of order: expected q1_s <= median_s <= q3_s"
        raise ValueError(msg)
    for name in ("repeats", "number"):
        if data[name] < 1:
            msg = f"{name}={data[name]!r} is not a count of at least 1"
            raise ValueError(msg)
    per_call = _checked_repeats(data.get("per_call_s", []), data["repeats"])
    calls = _checked_calls(data.get("calls", []), data["repeats"])
    cut_short = data.get("cut_short", False)
    if not isinstance(cut_short, bool):
        msg = f"field 'cut_short' is {type(cut_short).__name__}, not bool"
        raise TypeError(msg)
    return Record(**{**data, "machine": machine, "per_call_s": per_call, "calls": calls})


def _checked_calls(calls: object, repeats: int) -> tuple[int, ...]:
    """The calls each repeat of a record ran: counts of at least 1, one per repeat (or none)."""
    return _checked_per_repeat("calls", calls, repeats, count=True)


def _checked_repeats(per_call: object, repeats: int) -> tuple[float, ...]:
    """The per-call seconds of a record's repeats: positive numbers, one per repeat (or none)."""
    return _checked_per_repeat("per_call_s", per_call, repeats, count=False)


def _checked_per_repeat(field: str, values: object, repeats: int, *, count: bool) -> tuple:
    """One value per repeat, or none: counts of at least 1, or positive finite seconds."""
    if not isinstance(values, list):
        msg = f"field {field!r} is {type(values).__name__}, not a list of " + (
            "counts" if count else "seconds"
        )
        raise TypeError(msg)
    if values and len(values) != repeats:
        msg = f"field {field!r} holds {len(values)} values for repeats={repeats}"
        raise ValueError(msg)
    kinds = (int,) if count else (int, float)
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, kinds):
            msg = f"field {field!r} holds {value!r}, not a " + ("count" if count else "number")
            raise TypeError(msg)
        valid = value >= 1 if count else math.isfinite(finite_float(field, value)) and value > 0
        if not valid:
            what = "count of at least 1" if count else "positive number"
            msg = f"field {field!r} holds {value!r}, not a {what}"
            raise ValueError(msg)
        out.append(value if count else float(value))
    return tuple(out)


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
