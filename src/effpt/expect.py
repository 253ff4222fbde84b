"""Expectations: what a page expects of the machine, measured and reported, never enforced.

A page checks two kinds of things. A *fact* holds on every machine (a value, an error,
agreement with a reference) and a plain ``assert`` guards it. An *expectation* depends
on the machine: a speed ratio, a crossover, a bandwidth. Threads, vector width, caches,
a GPU or another process's load can turn it around, so it must never fail a run.
:func:`expect` states it once, compares the measurement (with its interval) against a
bound, prints the verdict and records it for the site's measurements page:

* **holds here**: the whole interval lies on the expected side of the bound;
* **does not hold here**: the whole interval lies on the other side;
* **inconclusive**: the interval straddles the bound, or too few repeats give none.

The interval is a 95 % confidence interval (:data:`effpt.records.LEVEL`): for a
:class:`~effpt.records.Ratio` the one :func:`~effpt.records.speedup` gives (a ratio
of two ratios holds at 90 %), for an :class:`effpt.bench.Timing` the interval of its
median from the order statistics of its repeats (at least six are needed). So when
the truth sits on the bound, a verdict other than "inconclusive" comes out at most
one time in twenty (one in ten for a ratio of ratios). A ``(value, low, high)`` tuple
is the page's own interval, taken as given.

The caller names the device the measurement ran on (``device=``, required): a page
whose tensors live on a GPU may time work that runs on the CPU (a data loader, a file
write, a TorchScript run), and the verdict must name the machine that did the work.

Records are appended to the JSON-lines file named by ``$EFFPT_EXPECTATIONS_FILE`` when
it is set (the site's build sets it per page); :func:`read_expectations` reads them back.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from effpt._stats import median_interval
from effpt._validate import finite_float, read_json_lines
from effpt.machine import Machine
from effpt.records import Ratio

if TYPE_CHECKING:
    import torch

# torch is imported where a measurement names its device (_machine), not at import:
# reading expectation records (the site's build does) needs no torch.

__all__ = [
    "EXPECTATIONS_ENV",
    "VERDICTS",
    "Expectation",
    "expect",
    "read_expectations",
]

#: Names the JSON-lines file that :func:`expect` appends to (the site's build sets it).
EXPECTATIONS_ENV = "EFFPT_EXPECTATIONS_FILE"
#: The three verdicts an expectation can get, in the order "good, bad, can't tell".
VERDICTS = ("holds here", "does not hold here", "inconclusive")
_SIDES = ("above", "below")


@dataclass(frozen=True)
class Expectation:
    """One expectation as measured on one machine: the statement, the evidence, the verdict.

    ``value`` lies in ``[low, high]``, the interval the noise allows (``low == high``
    for a measurement that has no spread). The expectation is that the measured
    quantity lies ``side`` ("above" or "below") ``bound``; ``unit`` is printed after
    the numbers ("×" for ratios). ``machine`` is the :class:`~effpt.machine.Machine` the
    measurement ran on; in JSON, its fields.
    """

    statement: str
    value: float
    low: float
    high: float
    side: str
    bound: float
    unit: str
    verdict: str
    machine: Machine

    def __post_init__(self) -> None:
        _check_text("statement", self.statement)
        for name in ("value", "low", "high"):
            _check_measured(self.statement, name, getattr(self, name))
        if not self.low <= self.value <= self.high:
            msg = (
                f"expectation {self.statement!r}: interval out of order, expected "
                f"low <= value <= high, got {self.low!r}, {self.value!r}, {self.high!r}"
            )
            raise ValueError(msg)
        _check_bound(self.statement, self.bound)
        if self.side not in _SIDES:
            msg = f"expectation {self.statement!r}: side must be 'above' or 'below', got {self.side!r}"
            raise ValueError(msg)
        if self.verdict not in VERDICTS:
            msg = f"expectation {self.statement!r}: verdict must be one of {VERDICTS}, got {self.verdict!r}"
            raise ValueError(msg)
        judged = judge(self.low, self.high, self.side, self.bound)
        if self.verdict not in (judged, "inconclusive"):  # too few repeats make any inconclusive
            msg = (
                f"expectation {self.statement!r}: verdict {self.verdict!r} contradicts its "
                f"interval {self.low!r}–{self.high!r} {self.side} {self.bound!r}, which gives {judged!r}"
            )
            raise ValueError(msg)
        _check_text("unit", self.unit, empty_ok=True)
        if not isinstance(self.machine, Machine):
            msg = (
                f"expectation {self.statement!r}: machine must be an effpt.machine.Machine, "
                f"got {type(self.machine).__name__}"
            )
            raise TypeError(msg)

    @property
    def measured(self) -> str:
        """The measurement with its interval, e.g. ``'2.3× (2.1–2.5)'`` or ``'41.2 GB/s'``."""
        value = f"{_number(self.value)}{self.unit if self.unit == '×' else ' ' + self.unit}"
        value = value.rstrip()  # a unitless quantity has no trailing space
        if self.low == self.high:  # a quantity without spread: no interval to show
            # ... unless it is inconclusive, which a point is only for want of repeats
            return f"{value} (too few repeats)" if self.verdict == "inconclusive" else value
        if self.unit == "×":
            return str(Ratio(self.value, self.low, self.high))
        return f"{value} ({_number(self.low)}–{_number(self.high)})"

    @property
    def expected(self) -> str:
        """The bound the measurement is held against, e.g. ``'above 1.5×'``."""
        return f"{self.side} {_number(self.bound)}{self.unit if self.unit == '×' else ' ' + self.unit}".rstrip()

    def __str__(self) -> str:
        return (
            f"Expectation: {self.statement}. Expected {self.expected}; measured "
            f"{self.measured} on {self.machine}: {self.verdict}."
        )

    def to_dict(self) -> dict[str, Any]:
        """The expectation as a JSON-ready dict, its machine as the machine's fields."""
        return {**asdict(self), "machine": self.machine.to_dict()}


def _number(x: float) -> str:
    """Three significant digits, no exponent for ordinary magnitudes."""
    return f"{x:.3g}" if 1e-3 <= abs(x) < 1e6 else f"{x:.2e}"


def _check_text(name: str, value: object, *, empty_ok: bool = False) -> None:
    if not isinstance(value, str) or not (empty_ok or value.strip()):
        msg = f"{name} must be a non-empty str, got {value!r}"
        raise TypeError(msg)


def _check_measured(statement: str, name: str, value: object) -> None:
    """A measurement must be a positive, finite number: ratios, times and rates are."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        msg = f"expectation {statement!r}: measured {name} must be a number, got {value!r}"
        raise TypeError(msg)
    value = finite_float(f"expectation {statement!r}: measured {name}", value)
    if not (math.isfinite(value) and value > 0):
        msg = (
            f"expectation {statement!r}: measured {name} must be a positive finite number, "
            f"got {value!r} (a zero, negative, infinite or NaN measurement is a broken one)"
        )
        raise ValueError(msg)


def _check_bound(statement: str, bound: object) -> None:
    if isinstance(bound, bool) or not isinstance(bound, (int, float)):
        msg = f"expectation {statement!r}: bound must be a number, got {bound!r}"
        raise TypeError(msg)
    bound = finite_float(f"expectation {statement!r}: bound", bound)
    if not (math.isfinite(bound) and bound > 0):
        msg = f"expectation {statement!r}: bound must be a positive finite number, got {bound!r}"
        raise ValueError(msg)


def _interval(statement: str, measured: object) -> tuple[float, float, float, bool]:
    """(value, low, high, no interval) of a Ratio, a Timing, a (value, low, high) tuple or a number.

    The last is True where too few repeats give no interval at 95 %.
    """
    if isinstance(measured, Ratio):
        return measured.value, measured.low, measured.high, measured.single
    per_call = getattr(measured, "per_call", None)
    if per_call is not None:  # an effpt.bench.Timing
        if len(per_call) == 0:
            msg = (
                f"expectation {statement!r}: the Timing measured has no repeats (per_call is empty)"
            )
            raise ValueError(msg)
        value = float(measured.median)
        interval = median_interval(per_call)
        if interval is None:
            return value, value, value, True
        return value, min(interval[0], value), max(interval[1], value), False
    if isinstance(measured, tuple) and len(measured) == 3:
        return (*measured, False)
    if isinstance(measured, (int, float)) and not isinstance(measured, bool):
        return measured, measured, measured, False
    msg = (
        f"expectation {statement!r}: measured must be a Ratio, a Timing, a number or a "
        f"(value, low, high) tuple, got {type(measured).__name__}"
    )
    raise TypeError(msg)


def judge(low: float, high: float, side: str, bound: float, *, single: bool = False) -> str:
    """The verdict of an interval against a bound (see the module's description).

    Examples
    --------
    >>> judge(2.1, 2.5, "above", 1.5), judge(0.9, 1.2, "above", 1.5), judge(1.2, 1.8, "above", 1.5)
    ('holds here', 'does not hold here', 'inconclusive')
    >>> judge(0.2, 0.4, "below", 0.5), judge(2.0, 2.0, "above", 1.5, single=True)
    ('holds here', 'inconclusive')
    """
    if single:
        return "inconclusive"
    good, bad = (low > bound, high <= bound) if side == "above" else (high < bound, low >= bound)
    return "holds here" if good else "does not hold here" if bad else "inconclusive"


def expect(
    statement: str,
    measured: object,
    *,
    above: float | None = None,
    below: float | None = None,
    unit: str = "×",
    device: torch.device | str | Machine,
    show: bool = True,
) -> Expectation:
    """Hold a measurement against an expectation; print and record the verdict, never raise on it.

    ``measured`` is a :class:`~effpt.records.Ratio` (its interval is used), an
    :class:`effpt.bench.Timing` (median within its quartiles), a ``(value, low, high)``
    tuple, or a plain number for a quantity without spread (a byte count, a memory
    ratio). Give exactly one of ``above`` and ``below``. ``device`` is the device the
    measured work ran on (a :class:`torch.device` or its name, e.g. ``"cpu"`` for a
    data loader timed on a GPU page); the record names it with
    :func:`effpt.device.this_machine`, the CPU's thread count taken at the call. A
    :class:`~effpt.machine.Machine` is used as it is.

    A Timing of fewer than six repeats, or a Ratio with too few repeats for an
    interval at 95 %, gets "inconclusive".
    A broken measurement (zero, negative, infinite, NaN) or a bound that is not a
    positive number raises an error naming the statement and the value: those are
    bugs in the page, not facts about the machine.

    Examples
    --------
    >>> from effpt.records import Ratio
    >>> e = expect("sum beats the loop", Ratio(41.0, 38.0, 44.0), above=10, device="cpu", show=False)
    >>> e.verdict, e.measured, e.expected
    ('holds here', '41× (38–44)', 'above 10×')
    >>> _ = expect("copy bandwidth", (12.0, 11.0, 13.0), above=20, unit="GB/s", device="cpu")
    Expectation: copy bandwidth. Expected above 20 GB/s; measured 12 GB/s (11–13) on ...CPU...: does not hold here.
    >>> expect("same speed", Ratio(1.1, 0.9, 1.3), above=1, device="cpu", show=False).verdict
    'inconclusive'
    >>> expect("three repeats", Ratio(23.1, 23.1, 23.1, single=True), above=1, device="cpu", show=False).measured
    '23.1× (too few repeats)'
    >>> expect("broken timer", 0.0, above=1, device="cpu")
    Traceback (most recent call last):
    ...
    ValueError: expectation 'broken timer': measured value must be a positive finite number, got 0.0 (a zero, negative, infinite or NaN measurement is a broken one)
    >>> expect("no bound", 2.0, above="1.5", device="cpu")
    Traceback (most recent call last):
    ...
    TypeError: expectation 'no bound': bound must be a number, got '1.5'
    >>> expect("unnamed device", 2.0, above=1, device=None)
    Traceback (most recent call last):
    ...
    TypeError: expectation 'unnamed device': device= must name the device the measurement ran on (a torch.device, its name or an effpt.machine.Machine), got None
    """
    _check_text("statement", statement)
    if (above is None) == (below is None):
        msg = f"expectation {statement!r}: give exactly one of above= and below=, got above={above!r}, below={below!r}"
        raise TypeError(msg)
    side, bound = ("above", above) if above is not None else ("below", below)
    _check_bound(statement, bound)
    value, low, high, single = _interval(statement, measured)
    for name, x in (("value", value), ("low", low), ("high", high)):
        _check_measured(statement, name, x)
    machine = _machine(statement, device)
    verdict = judge(low, high, side, float(bound), single=single)
    result = Expectation(
        statement, float(value), float(low), float(high), side, float(bound), unit, verdict, machine
    )
    if show:
        print(result)  # noqa: T201  (showing the verdict is the point)
    _save(result)
    return result


def _machine(statement: str, device: object) -> Machine:
    """The machine ``device`` names: a Machine as it is, else this machine's for that device."""
    if isinstance(device, Machine):
        return device
    import torch  # noqa: PLC0415  (see the imports above)

    from effpt.device import this_machine  # noqa: PLC0415  (imports torch)

    if isinstance(device, (str, torch.device)) and not isinstance(device, bool):
        return this_machine(device)
    msg = (
        f"expectation {statement!r}: device= must name the device the measurement ran on "
        f"(a torch.device, its name or an effpt.machine.Machine), got {device!r}"
    )
    raise TypeError(msg)


def _save(result: Expectation) -> None:
    path = os.environ.get(EXPECTATIONS_ENV)
    if path:
        with Path(path).open("a", encoding="utf-8") as f:
            f.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")


def read_expectations(path: str | os.PathLike[str]) -> list[Expectation]:
    """The expectations recorded in a JSON-lines file; a malformed line names file and line.

    A record's machine is its :class:`~effpt.machine.Machine` fields; a record written
    before expectations stored fields has :func:`~effpt.device.describe`'s line, which
    :meth:`~effpt.machine.Machine.read` also reads.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "page.jsonl"
    >>> _ = p.write_text('{"statement": "x"}\\n')
    >>> read_expectations(p)
    Traceback (most recent call last):
    ...
    ValueError: malformed expectation .../page.jsonl:1: missing fields ['bound', 'high', 'low', 'machine', 'side', 'unit', 'value', 'verdict']
    """
    names = {f.name for f in fields(Expectation)}

    def parse(data: object) -> Expectation:
        if not isinstance(data, dict):
            msg = f"a JSON object, got {type(data).__name__}"
            raise TypeError(msg)
        missing, extra = sorted(names - data.keys()), sorted(data.keys() - names)
        if missing or extra:
            msg = f"missing fields {missing}" if missing else f"unknown fields {extra}"
            raise ValueError(msg)
        try:
            machine = Machine.read(data["machine"])
        except (TypeError, ValueError) as exc:
            msg = f"field 'machine': {exc}"
            raise type(exc)(msg) from None
        return Expectation(**{**data, "machine": machine})

    return read_json_lines(path, "expectation", parse)
