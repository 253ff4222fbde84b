"""The source material's speed claims, stated once, and how a page holds one against its run.

The sources this site credits measured some speed-ups on their authors' machines and
reported them. Each is a :class:`Claim` in :data:`CLAIMS`: the page that teaches the
technique looks its claims up with :func:`claim`, times the two variants, and passes
the two records to :meth:`Claim.check`. That prints the claim beside this run's ratio
with a verdict and, when ``$EFFPT_CLAIMS_FILE`` is set (the site's build sets it per
page), records the :class:`Outcome`; the site's measurements page lists every claim
from :data:`CLAIMS` with the outcome its page recorded. The page names the records
itself, so nothing ties a claim to a record by its task's name.

A claim is scored like for like only: a record from any device class other than the
source's (an MPS, XPU or meta device as much as a GPU for a CPU claim) gets "not
comparable", and a fast variant that was not timed here "not measured". A claim's device
is the one its source states; a source that states none gives "not stated", and such a
claim is scored on whatever device ran it. Otherwise the ratio's 95 % confidence
interval decides (see :meth:`Claim.judge`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effpt._validate import read_json_lines
from effpt.records import Ratio, Record, speedup

__all__ = [
    "CLAIMS",
    "CLAIMS_ENV",
    "NEARLY",
    "NOT_STATED",
    "VERDICTS",
    "Claim",
    "Outcome",
    "claim",
    "read_outcomes",
]

#: Names the JSON-lines file that :meth:`Claim.check` appends to (the site's build sets it).
CLAIMS_ENV = "EFFPT_CLAIMS_FILE"
#: The verdicts :meth:`Claim.check` can reach (the first four score a like-for-like ratio).
VERDICTS = ("yes", "nearly", "no", "inconclusive", "not comparable", "not measured")
#: "nearly" covers speed-ups within this fraction below the promised one.
NEARLY = 0.85
_DEVICE_NAMES = {"cpu": "a CPU", "cuda": "a GPU", "not stated": None}
#: A source that names no device for a claim.
NOT_STATED = "not stated"
#: What each verdict on a like-for-like ratio means, as the printed line says it.
_MEANING = {
    "yes": "the whole interval reaches the claim",
    "nearly": "the interval lies within 15 % below the claim",
    "no": "the interval lies more than 15 % below the claim",
    "inconclusive": "the interval straddles one of those lines, or too few repeats give none",
}


@dataclass(frozen=True)
class Claim:
    """A speed-up a source reported: what it said, who said it, where they measured.

    ``key`` names the claim for :func:`claim`; ``text`` says it as the source did and
    ``source`` names the source; ``device`` is the device class the source says it
    measured on (``"cpu"`` or ``"cuda"``), or ``"not stated"`` when it says none; ``page`` is the gallery page (its file's stem) that
    checks it; ``promised`` is the speed-up the source reports.
    """

    key: str
    text: str
    source: str
    device: str
    page: str
    promised: float

    def __post_init__(self) -> None:
        if self.device not in _DEVICE_NAMES:
            msg = (
                f"claim {self.key!r}: device must be 'cpu', 'cuda' or 'not stated', "
                f"got {self.device!r}"
            )
            raise ValueError(msg)
        if not (math.isfinite(self.promised) and self.promised > 0):
            msg = f"claim {self.key!r}: promised must be a positive number, got {self.promised!r}"
            raise ValueError(msg)

    def __str__(self) -> str:
        source = self.source[:1].upper() + self.source[1:]
        where = _DEVICE_NAMES[self.device]
        where = f"on {where}" if where else "device not stated"
        return f"{source}, {where}: {self.text}. Speed-up claimed: {self.promised:.3g}×."

    def judge(self, ratio: Ratio) -> str:
        """Score a like-for-like speed-up against the promised one, honest about the noise.

        The interval is the ratio's 95 % confidence interval (:func:`effpt.records.speedup`).
        "yes" when the whole interval reaches the promise, "nearly" when it lies within
        15 % below it, "no" when it lies wholly below that, and "inconclusive" when it
        straddles one of those lines (another run could land on either side) or too few
        repeats give no interval.

        Examples
        --------
        >>> c = claim("guide: torch.sum over a row loop")
        >>> [c.judge(Ratio(v, lo, hi)) for v, lo, hi in
        ...  [(120, 110, 130), (90, 88, 95), (40, 38, 42), (100, 80, 120)]]
        ['yes', 'nearly', 'no', 'inconclusive']
        >>> c.judge(Ratio(120, 120, 120, single=True))
        'inconclusive'
        """
        if ratio.single or not all(math.isfinite(v) and v > 0 for v in (ratio.low, ratio.high)):
            return "inconclusive"
        if ratio.low >= self.promised:
            return "yes"
        if ratio.high < NEARLY * self.promised:
            return "no"
        if ratio.low >= NEARLY * self.promised and ratio.high < self.promised:
            return "nearly"
        return "inconclusive"

    def check(self, slow: Record, fast: Record | None, *, show: bool = True) -> Outcome:
        """Hold this run's ``slow`` and ``fast`` records against the claim; print, record.

        ``fast`` is None when the fast variant was not timed here; ``slow`` is always
        a record. Both records must come from one task and one machine. The outcome is printed unless ``show`` is
        false, and appended to ``$EFFPT_CLAIMS_FILE`` when it is set; it never raises
        on a verdict, only on records that cannot test the claim.

        Examples
        --------
        >>> from effpt.device import this_machine
        >>> cpu = this_machine("cpu")
        >>> loop = Record("sum 500×10", "loop", 2e-3, 1e-5, 1.99e-3, 2.0e-3, 5, 10, "loop", cpu,
        ...               (1.98e-3, 1.99e-3, 2e-3, 2e-3, 2.01e-3))
        >>> one = Record("sum 500×10", "sum", 1.6e-5, 1e-7, 1.59e-5, 1.6e-5, 5, 10, "loop", cpu,
        ...              (1.58e-5, 1.59e-5, 1.6e-5, 1.6e-5, 1.61e-5))
        >>> out = claim("guide: torch.sum over a row loop").check(loop, one, show=False)
        >>> out.verdict, str(out.ratio)
        ('yes', '125× (124–127)')
        >>> claim("notebook: fused box IoU").check(loop, None, show=False).verdict
        'not measured'
        """
        _check_records(self.key, slow, fast)
        outcome = Outcome(self.key, self._verdict(slow, fast), slow, fast)
        if show:
            print(f"{self}\n  {outcome}")  # noqa: T201  (showing the verdict is the point)
        path = os.environ.get(CLAIMS_ENV)
        if path:
            with Path(path).open("a", encoding="utf-8") as f:
                f.write(json.dumps(outcome.to_dict(), ensure_ascii=False) + "\n")
        return outcome

    def _verdict(self, slow: Record, fast: Record | None) -> str:
        """The verdict :meth:`check` gives two checked records."""
        if fast is None:
            return "not measured"
        if self.device not in (NOT_STATED, slow.machine.kind):
            return "not comparable"  # xpu, mps, meta ...: never scored as a CPU
        return self.judge(speedup(slow, fast))


def _check_records(key: str, slow: object, fast: object) -> None:
    """Raise unless ``slow`` is a Record and ``fast`` one of the same task and machine, or None."""
    for name, record in (("slow", slow), ("fast", fast)):
        if not isinstance(record, Record) and not (name == "fast" and record is None):
            what = "an effpt.records.Record" + (" or None" if name == "fast" else "")
            msg = f"claim {key!r}: {name} must be {what}, got {type(record).__name__}"
            raise TypeError(msg)
    if fast is not None and (fast.task, fast.machine) != (slow.task, slow.machine):
        msg = (
            f"claim {key!r}: the two records must time one task on one machine, got "
            f"{slow.task!r} on {slow.machine} and {fast.task!r} on {fast.machine}"
        )
        raise ValueError(msg)


@dataclass(frozen=True)
class Outcome:
    """What a run made of a claim: the verdict and the records that gave it.

    Only an outcome :meth:`Claim.check` could have written is accepted: "not measured"
    exactly when ``fast`` is None, "not comparable" exactly when the records come
    from another device class than the source's, and otherwise the verdict
    :meth:`Claim.judge` gives the records (any of its four for records written before
    records kept their repeats, whose interval cannot be drawn again).
    """

    key: str
    verdict: str
    slow: Record
    fast: Record | None

    def __post_init__(self) -> None:
        c = claim(self.key)  # an unknown key fails here, naming the known ones
        if self.verdict not in VERDICTS:
            msg = f"claim {self.key!r}: verdict must be one of {VERDICTS}, got {self.verdict!r}"
            raise ValueError(msg)
        _check_records(self.key, self.slow, self.fast)
        expected = c._verdict(self.slow, self.fast)
        old = self.fast is not None and not (self.slow.per_call_s and self.fast.per_call_s)
        if old and expected in _MEANING:
            expected = self.verdict if self.verdict in _MEANING else expected
        if self.verdict != expected:
            msg = (
                f"claim {self.key!r}: verdict {self.verdict!r} is not what its records give "
                f"({expected!r})"
            )
            raise ValueError(msg)

    @property
    def ratio(self) -> Ratio | None:
        """This run's speed-up of the fast variant over the slow one, if both ran."""
        return None if self.fast is None else speedup(self.slow, self.fast)

    def __str__(self) -> str:
        where = f"{self.slow.task}; {self.slow.machine}"
        if self.fast is None:
            return f"here: not measured, the faster variant was not timed ({where})."
        line = f"here: {self.fast.variant} ran {self.ratio} the speed of {self.slow.variant} ({where})."
        if self.verdict == "not comparable":
            source_device = _DEVICE_NAMES[claim(self.key).device]
            return f"{line} Not comparable: the source measured on {source_device}."
        return f"{line} Claim met: {self.verdict} ({_MEANING[self.verdict]})."

    def to_dict(self) -> dict[str, Any]:
        """The outcome as a JSON-ready dict, its records as theirs."""
        fast = None if self.fast is None else self.fast.to_dict()
        return {"key": self.key, "verdict": self.verdict, "slow": self.slow.to_dict(), "fast": fast}


GUIDE = "the Effective PyTorch guide"
ACDL_NOTEBOOK = "Thomas Viehmann's ACDL 2020 notebook"

#: Every speed claim of the source material, in the order the site lists them.
#:
#: :meta hide-value:
CLAIMS: tuple[Claim, ...] = (
    Claim(
        "guide: unbind over indexing",
        "Iterating rows with unbind is about 30 % faster than indexing them (500 × 10)",
        GUIDE,
        "cpu",
        "plot_overloaded_operators",
        1.3,
    ),
    Claim(
        "guide: torch.sum over a row loop",
        "One torch.sum is about 100× faster than a loop over the rows (500 × 10)",
        GUIDE,
        "cpu",
        "plot_overloaded_operators",
        100.0,
    ),
    Claim(
        "notebook: uniformity loss by matmul",
        "The uniformity loss through a matrix product instead of pdist: "
        "19.4 ms → 2.26 ms (1024 × 128, forward and backward)",
        ACDL_NOTEBOOK,
        "cuda",
        "plot_timing_pytorch_code",
        19.4 / 2.26,
    ),
    # The guide states no device for its TorchScript loop; only its separate vectorised
    # snippet moves its offsets with .cuda().
    Claim(
        "guide: TorchScript batch gather",
        "A TorchScript loop is about 10 % faster than the Python loop (batch gather)",
        GUIDE,
        NOT_STATED,
        "plot_batch_gather",
        1.1,
    ),
    Claim(
        "guide: vectorised batch gather",
        "A vectorised batch gather is about 100× faster than the loop",
        GUIDE,
        "cuda",
        "plot_batch_gather",
        100.0,
    ),
    Claim(
        "notebook: fused box IoU",
        "TorchScript's fuser takes the box IoU of 100,000 pairs from 238 µs to 40.3 µs",
        ACDL_NOTEBOOK,
        "cuda",
        "plot_fusing_elementwise_work",
        238 / 40.3,
    ),
)


def claim(key: str) -> Claim:
    """The claim named ``key``; an unknown key raises ``KeyError`` listing the known ones.

    Examples
    --------
    >>> claim("guide: unbind over indexing").promised
    1.3
    >>> claim("guide: everything is fast")
    Traceback (most recent call last):
    ...
    KeyError: "no claim 'guide: everything is fast'; the claims are: 'guide: unbind over indexing', ...
    """
    for c in CLAIMS:
        if c.key == key:
            return c
    known = ", ".join(repr(c.key) for c in CLAIMS)
    msg = f"no claim {key!r}; the claims are: {known}"
    raise KeyError(msg)


def read_outcomes(path: str | os.PathLike[str]) -> list[Outcome]:
    """The outcomes :meth:`Claim.check` appended to a JSON-lines file, checked line by line.

    A malformed line (not JSON, a missing or unknown field, an unknown claim or verdict,
    a bad record) raises ``ValueError`` naming file and line.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "page.jsonl"
    >>> _ = p.write_text('{"key": "guide: anything", "verdict": "yes", "slow": {}, "fast": null}\\n')
    >>> read_outcomes(p)
    Traceback (most recent call last):
    ...
    ValueError: malformed claim outcome .../page.jsonl:1: "no claim 'guide: anything'; ...
    """

    def parse(data: object) -> Outcome:
        if not isinstance(data, dict) or set(data) != {"key", "verdict", "slow", "fast"}:
            msg = f"a JSON object with key, verdict, slow and fast, got {str(data)[:80]!r}"
            raise ValueError(msg)
        claim(data["key"])  # an unknown claim is named before its records are read
        slow = Record.from_dict(data["slow"])
        fast = None if data["fast"] is None else Record.from_dict(data["fast"])
        return Outcome(data["key"], data["verdict"], slow, fast)

    return read_json_lines(path, "claim outcome", parse)
