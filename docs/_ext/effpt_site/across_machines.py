"""Each page's expectations and claims on every machine measured: this build and the records.

This build's run is one column; every evidence record in ``docs/evidence`` (one
machine or stand-in each, read by ``docs/_tools/evidence.py``) is another. A record's
page counts as current when the hash of the source it ran equals the hash of the page's
source now; otherwise its cells say they come from an older version of the page.

* :func:`columns` gives the columns, :func:`rows` the grid's rows (each expectation and
  claim of each page, in the gallery's reading order), :func:`cell` what a column says
  of a row; :mod:`effpt_site.expectations` draws the grid on the measurements page.
* :func:`summary` says how an expectation fared on the other machines measured; the
  verdict box under each page output that prints verdicts (:mod:`effpt_site.verdict_box`)
  shows it with this build's value and a link to the expectation's row.

A record that is malformed fails the build naming its file and field; a record of a page
that no longer exists is reported in the build log and on the measurements page.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

from effpt.claims import CLAIMS, Outcome, claim
from effpt.expect import Expectation
from effpt.machine import Machine
from effpt.records import Record
from effpt_site.i18n import N_, language_of, translate_data, translator
from effpt_site.layout import example_pages, family_dirs, memo, reading_order, signature
from effpt_site.outputs import (
    claim_files,
    claims_dir,
    conf_of,
    expectation_files,
    expectations_dir,
    records_dir,
    stamps,
)

_TOOLS = Path(__file__).resolve().parents[2] / "_tools"
if str(_TOOLS) not in sys.path:
    sys.path.insert(0, str(_TOOLS))

import evidence  # docs/_tools/evidence.py: the one reader of the records

logger = logging.getLogger(__name__)

#: What a grid cell says of a verdict measured on one machine (not only "here").
CELL_VERDICTS = {
    "holds here": N_("holds"),
    "does not hold here": N_("does not hold"),
    "inconclusive": N_("inconclusive"),
}


def evidence_dir(app) -> Path:
    """The folder of the evidence records (``effpt_evidence_dir``, relative to docs/)."""
    return Path(app.srcdir) / app.config.effpt_evidence_dir


@dataclass(frozen=True)
class PageRun:
    """What one column knows of one page: whether it ran and what it recorded."""

    current: bool
    ran: bool
    error: str | None
    expectations: tuple[Expectation, ...]
    outcomes: dict[str, Outcome] = field(default_factory=dict)

    def expectation(self, statement: str) -> Expectation | None:
        return next((e for e in self.expectations if e.statement == statement), None)


@dataclass(frozen=True)
class Column:
    """One machine's run of the gallery: this build's, or an evidence record's."""

    key: str
    machine: Machine | None
    standin: str | None
    capability: str
    cpu_model: str
    path: Path | None
    pages: dict[str, PageRun]

    def short(self, t) -> str:
        """The machine in a few words, for a sentence that lists machines."""
        if self.path is None:
            return t("this build")
        assert self.machine is not None
        if self.standin is not None:
            return t("the {name} stand-in", name=self.standin)
        if self.machine.kind == "cpu":
            return f"{self.cpu_model} ({self.capability})" if self.capability else self.cpu_model
        return self.machine.name

    def header(self, t) -> str:
        """The column's head: the machine named once, with its torch (and stand-in)."""
        if self.path is None and self.machine is None:
            return t("This build")
        assert self.machine is not None
        m = self.machine
        capability = [self.capability] if self.capability and m.kind == "cpu" else []
        cuda = [f"CUDA {m.cuda}"] if m.cuda is not None else []
        name = " · ".join([m.hardware, *capability, *cuda, f"torch {m.torch}"])
        if self.path is None:
            return t("This build: {machine}", machine=name)
        if self.standin is not None:
            return t("Stand-in {name}: {machine}", name=self.standin, machine=name)
        return name


@dataclass(frozen=True)
class Row:
    """One expectation (by its statement) or one claim (by its key) of one page."""

    kind: str
    family: str
    page: str
    docname: str
    key: str

    @property
    def anchor(self) -> str:
        """The row's id on the measurements page, the same in every build and language."""
        digest = hashlib.sha1(self.key.encode("utf-8"), usedforsecurity=False).hexdigest()[:10]
        return f"{self.kind}-{self.page.removeprefix('plot_').replace('_', '-')}-{digest}"


def _pages_by_key(app) -> dict[str, tuple[str, str, Path]]:
    """Each page as records name it (``family/stem``): (stem, docname, source file)."""
    docnames = example_pages(app)
    out = {}
    for folder in family_dirs(app):
        for name in reading_order(folder):
            stem = Path(name).stem
            out[f"{folder.name}/{stem}"] = (stem, docnames[stem], folder / name)
    return out


def page_sources(app) -> list[Path]:
    """Every page's source file, whose hash decides which records are current."""
    return [source for _, _, source in _pages_by_key(app).values()]


def _expectations(path: Path, where: str, items: list[dict]) -> tuple[Expectation, ...]:
    out = []
    for i, item in enumerate(items):
        try:
            machine = Machine.read(item["machine"])
            out.append(Expectation(**{**item, "machine": machine}))
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"evidence record {path}: field '{where}.expectations[{i}]': {exc}"
            raise ExtensionError(msg) from exc
    return tuple(out)


def _outcomes(path: Path, where: str, items: list[dict], *, current: bool) -> dict[str, Outcome]:
    """The claim outcomes of one page run of a record.

    A page run of an older version of the page may carry a verdict that today's rules
    (:mod:`effpt.claims`) would not give its records: it was scored under the rules of
    its day. Its cell is history either way (marked as an older version), so it is
    scored again from its own records under today's rules, and the build log says so.
    A current page run's outcome must be exactly what its records give.
    """
    out = {}
    for i, item in enumerate(items):
        try:
            if set(item) != {"key", "verdict", "slow", "fast"}:
                msg = f"needs key, verdict, slow and fast, got {sorted(item)}"
                raise ValueError(msg)
            fast = None if item["fast"] is None else Record.from_dict(item["fast"])
            slow = Record.from_dict(item["slow"])
            verdict = item["verdict"]
            if not current:
                today = claim(item["key"])._verdict(slow, fast)
                if today != verdict:
                    logger.info(
                        "effpt: %s: %s.claims[%d] (an older version of the page) scored "
                        "again under today's rules: %r, was %r",
                        path.name,
                        where,
                        i,
                        today,
                        verdict,
                    )
                    verdict = today
            outcome = Outcome(item["key"], verdict, slow, fast)
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"evidence record {path}: field '{where}.claims[{i}]': {exc}"
            raise ExtensionError(msg) from exc
        out[outcome.key] = outcome
    return out


def _record_column(path: Path, data: dict, pages: dict[str, tuple[str, str, Path]]) -> Column:
    raw = data["machine"]
    fields = {k: raw[k] for k in ("kind", "name", "threads", "cuda", "torch")}
    try:
        machine = Machine.from_dict(fields)
    except (TypeError, ValueError) as exc:
        msg = f"evidence record {path}: field 'machine': {exc}"
        raise ExtensionError(msg) from exc
    runs = {}
    for key, page in data["pages"].items():
        if key not in pages:
            continue  # reported by unknown_pages()
        stem, _, source = pages[key]
        where = f"pages[{key!r}]"
        current = page["source_sha256"] == evidence.source_hash(source)
        runs[stem] = PageRun(
            current=current,
            ran=page["ran"],
            error=page["error"],
            expectations=_expectations(path, where, page["expectations"]),
            outcomes=_outcomes(path, where, page["claims"], current=current),
        )
    return Column(
        path.stem, machine, data["standin"], raw["capability"], raw["cpu_model"], path, runs
    )


def read_records(app) -> dict[Path, dict]:
    """Every evidence record, checked; a malformed one fails the build naming file and field."""
    folder = evidence_dir(app)
    try:
        # read_all keys each record by its slug, which is its file's stem
        return {folder / f"{slug}.json": data for slug, data in evidence.read_all(folder).items()}
    except ValueError as exc:
        raise ExtensionError(str(exc)) from exc


def unknown_pages(app) -> list[tuple[Path, str]]:
    """(record, page) for each page a record holds that the gallery no longer has."""
    pages = _pages_by_key(app)
    return [
        (path, key)
        for path, data in read_records(app).items()
        for key in data["pages"]
        if key not in pages
    ]


def _this_build(app) -> Column:
    """This build's own run: the pages it executed (now or in an earlier build of this tree)."""
    conf = conf_of(app)
    expectation_paths, claim_paths = expectation_files(app), claim_files(app)
    from effpt.claims import read_outcomes  # noqa: PLC0415
    from effpt.expect import read_expectations  # noqa: PLC0415

    runs, machines = {}, []
    for stem, stamp in stamps(conf).items():
        try:
            found = read_expectations(expectation_paths[stem]) if stem in expectation_paths else []
            outcomes = read_outcomes(claim_paths[stem]) if stem in claim_paths else []
            machine = Machine.in_file(stamp, f"stamp of {stem}")
        except ValueError as exc:
            raise ExtensionError(str(exc)) from exc
        machines.append(machine)
        runs[stem] = PageRun(True, True, None, tuple(found), {o.key: o for o in outcomes})
    # The machine most pages ran on names the column (pages run in earlier builds of this
    # tree may have run elsewhere; each cell's value comes from its own page's run).
    machine = max(set(machines), key=machines.count) if machines else None
    return Column("this-build", machine, None, "", "", None, runs)


def columns(app) -> list[Column]:
    """This build's column, then one per evidence record (sorted by file name).

    A record of this build's own machine (not a stand-in) is not a column: this build is
    that machine's newest run, and the record would repeat it cell for cell, and count
    it again as "elsewhere".
    """
    conf = conf_of(app)
    folders = [evidence_dir(app), records_dir(conf), expectations_dir(conf), claims_dir(conf)]
    folders += family_dirs(app)  # the pages' sources: a record is current if it ran them
    files = [p for f in folders if f.is_dir() for p in sorted(f.iterdir()) if p.is_file()]
    key = signature(*folders, *files)
    return list(memo(app, "across_machines.columns", key, lambda: _columns(app)))


def _columns(app) -> list[Column]:
    pages = _pages_by_key(app)
    here = _this_build(app)
    records = [_record_column(p, d, pages) for p, d in read_records(app).items()]
    return [here] + [c for c in records if c.standin is not None or c.machine != here.machine]


def rows(app, cols: list[Column]) -> list[Row]:
    """Every expectation and claim of every page, families and pages in reading order.

    A page's expectations come in the order its run stated them (this build's first,
    then those only other columns measured); its claims follow, as effpt.claims lists them.
    """
    out = []
    for key, (stem, docname, _) in _pages_by_key(app).items():
        family = key.split("/")[0]
        seen: list[str] = []
        for col in cols:
            run = col.pages.get(stem)
            for e in run.expectations if run else ():
                if e.statement not in seen:
                    seen.append(e.statement)
        out += [Row("expect", family, stem, docname, s) for s in seen]
        out += [Row("claim", family, stem, docname, c.key) for c in CLAIMS if c.page == stem]
    return out


@dataclass(frozen=True)
class Cell:
    """What one column says of one row: its text, whether current, and its verdict."""

    text: str
    verdict: str | None = None  # an effpt verdict word, untranslated; None when none
    older: bool = False


def cell(row: Row, col: Column, t) -> Cell:
    """The cell of ``row`` in ``col``, in the language of ``t``."""
    run = col.pages.get(row.page)
    if run is None:
        return Cell("—")
    if not run.ran:
        return Cell(t("did not run"), older=not run.current)
    if row.kind == "expect":
        e = run.expectation(row.key)
        if e is None:
            return Cell("—" if not run.current else t("not applicable here"), older=not run.current)
        text = f"{e.measured} {t(CELL_VERDICTS[e.verdict])}"
        return Cell(text, e.verdict, older=not run.current)
    outcome = run.outcomes.get(row.key)
    if outcome is None:
        return Cell("—", older=not run.current)
    if outcome.verdict == "not comparable":
        return Cell(t("not applicable here"), older=not run.current)
    if outcome.fast is None or outcome.verdict == "not measured":
        return Cell(t("not measured"), older=not run.current)
    return Cell(f"{outcome.ratio} {t(outcome.verdict)}", outcome.verdict, older=not run.current)


def statement(row: Row, language: str) -> str:
    """The row's statement in ``language``: a claim's text, or an expectation's."""
    if row.kind == "claim":
        return translator(language)(claim(row.key).text)
    return translate_data(language, row.key)


def expected(row: Row, cols: list[Column], t) -> str:
    """What the row holds the measurement against, e.g. "above 1.5×" or "source: 100×"."""
    if row.kind == "claim":
        c = claim(row.key)
        return t("{source}: {promised}×", source=t(c.source), promised=f"{c.promised:.3g}")
    for col in cols:
        run = col.pages.get(row.page)
        e = run.expectation(row.key) if run else None
        if e is not None:
            bound = e.expected.split(" ", 1)[1]
            return (
                t("above {bound}", bound=bound)
                if e.side == "above"
                else t("below {bound}", bound=bound)
            )
    return "—"


def summary(row: Row, cols: list[Column], t) -> str:
    """How an expectation fared on the records' machines, in one sentence."""
    held, missed, unsure, older = [], [], [], 0
    for col in cols:
        if col.path is None:
            continue
        run = col.pages.get(row.page)
        e = run.expectation(row.key) if run else None
        if e is None:
            continue
        if not run.current:
            older += 1
            continue
        {"holds here": held, "does not hold here": missed, "inconclusive": unsure}[
            e.verdict
        ].append(col.short(t))
    total = len(held) + len(missed) + len(unsure)
    if total == 0:
        text = t("Not yet recorded on another machine with this version of the page.")
    else:
        parts = [t("holds on {held} of {total} machines recorded", held=len(held), total=total)]
        if missed:
            parts.append(t("does not hold on {machines}", machines=t(", ").join(missed)))
        if unsure:
            parts.append(t("inconclusive on {machines}", machines=t(", ").join(unsure)))
        text = t("Elsewhere: {parts}.", parts=t("; ").join(parts))
    if older:
        # sentences part with a space after a Latin full stop, none after a full-width one
        space = " " if text[-1].isascii() else ""
        text += space + t("{n} more recorded an older version of the page.", n=older)
    return text


def report_unknown(app, exception) -> None:
    """build-finished: name each record's page that the gallery no longer has (never silent)."""
    if exception is not None or app.builder.name != "html" or language_of(app) != "en":
        return
    for path, key in unknown_pages(app):
        logger.info("effpt: %s holds page %r, which the gallery no longer has", path, key)


def _outdated(app, env, added, changed, removed) -> list[str]:  # noqa: ARG001
    """env-get-outdated: a record added or removed re-reads the pages that show records."""
    folder = evidence_dir(app)
    names = sorted(p.name for p in folder.glob("*.json")) if folder.is_dir() else []
    if getattr(env, "effpt_evidence_names", None) == names:
        return []
    env.effpt_evidence_names = names
    return [*example_pages(app).values(), app.config.effpt_measurements_doc]


def setup(app) -> None:
    app.add_config_value("effpt_evidence_dir", "evidence", "env")
    app.add_config_value("effpt_measurements_doc", "measurements", "env")
    app.connect("env-get-outdated", _outdated)
    app.connect("build-finished", report_unknown)
