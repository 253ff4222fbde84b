"""The measurements page: every record the gallery wrote, and the sources' claims scored.

Pages time their variants with :func:`effpt.bench.compare`, which appends
:class:`effpt.records.Record` lines to a file per page (the gallery hook names it).
This module validates those files and lists every record (``effpt-measurements``).
The ``effpt-claims`` directive lists each speed claim of the source material (stated
once, in :mod:`effpt.claims`) with the outcome the claim's page recorded when it held
its own records against it, and says why where a claim could not be scored like for
like.
"""

from __future__ import annotations

from dataclasses import dataclass

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

from effpt.claims import CLAIMS, Outcome, claim, read_outcomes
from effpt.records import Record, format_seconds, read_records
from effpt_site.i18n import N_, freeze, language_of, translator
from effpt_site.layout import example_pages
from effpt_site.outputs import claim_files, conf_of, record_files, records_file


@dataclass(frozen=True)
class _Row(Record):
    """A record with the page it came from (a Record still, so speedup() takes it)."""

    page: str = ""
    docname: str = ""


def load_records(app) -> list[_Row]:
    """Every record under auto_examples/_records, read by effpt.records; a bad one fails the build."""
    pages = example_pages(app)
    rows = []
    for path in record_files(app).values():
        if path.stem not in pages:
            msg = f"measurement record {path} comes from an unknown page {path.stem!r}"
            raise ExtensionError(msg)
        try:
            records = read_records(path)
        except ValueError as exc:
            raise ExtensionError(str(exc)) from exc
        rows += [_Row(**vars(r), page=path.stem, docname=pages[path.stem]) for r in records]
    return rows


#: The words effpt.claims.Claim.judge scores a claim with, which the claims table shows.
CLAIM_VERDICTS = (N_("yes"), N_("nearly"), N_("no"), N_("inconclusive"))


def load_outcomes(app) -> dict[str, Outcome]:
    """The outcome each checked claim got in this build, by claim key.

    A malformed file, a claim checked by a page other than its own, or checked twice,
    fails the build naming the file.
    """
    found: dict[str, Outcome] = {}
    for stem, path in claim_files(app).items():
        try:
            outcomes = read_outcomes(path)
        except ValueError as exc:
            raise ExtensionError(str(exc)) from exc
        for outcome in outcomes:
            page = claim(outcome.key).page
            if page != stem or outcome.key in found:
                why = f"belongs to {page}" if page != stem else "was checked twice"
                msg = f"{path}: claim {outcome.key!r} {why}"
                raise ExtensionError(msg)
            found[outcome.key] = outcome
    return found


def claim_lines(app, language: str = "en") -> list[str]:
    """A table of the sources' claims, each with the outcome its page recorded."""

    t = translator(language)

    outcomes = load_outcomes(app)
    pages, ran = example_pages(app), set(record_files(app)) | set(claim_files(app))
    caption = t("The source material's speed claims, measured by this build")
    lines = [
        f".. list-table:: {caption}",
        "   :header-rows: 1",
        "",
        f"   * - {t('Claim')}",
        f"     - {t('Source')}",
        f"     - {t('Source says')}",
        f"     - {t('This build')}",
        f"     - {t('Met?')}",
    ]
    for c in CLAIMS:
        lines += [
            f"   * - {t(c.text)}",
            f"     - {t(c.source)}",
            f"     - {c.promised:.3g}×",
        ]
        outcome = outcomes.get(c.key)
        if outcome is None and c.page in ran:  # the page ran and said nothing about it
            msg = f"claim {c.key!r}: {c.page} ran but did not check it (effpt.claims.Claim.check)"
            raise ExtensionError(msg)
        if outcome is None:  # that page was not executed in this build tree
            lines += [f"     - {t('not measured')}", "     - —"]
            continue
        machine = outcome.slow.machine
        where = f":doc:`/{pages[c.page]}`{t(', ')}{outcome.slow.task}"
        if outcome.fast is None:
            cell = t(
                "not measured: the faster variant was not timed on {machine} ({where})",
                machine=machine,
                where=where,
            )
            lines += [f"     - {cell}", "     - —"]
        elif outcome.verdict == "not comparable":
            measured_on = t("a GPU") if c.device == "cuda" else t("a CPU")
            why = t(
                "not comparable on this machine: the source measured on {source}, "
                "this build ran on {machine} ({where})",
                source=measured_on,
                machine=machine,
                where=where,
            )
            lines += [f"     - {why}", "     - —"]
        else:
            ratio = t(
                "{ratio} on {machine} ({where})", ratio=outcome.ratio, machine=machine, where=where
            )
            lines += [f"     - {ratio}", f"     - {t(outcome.verdict)}"]
    return lines


def _repeats_cell(row: Record) -> str:
    """Repeats × the calls each ran: a range where blocks that ran long stopped early."""
    calls = row.calls or (row.number,)
    low, high = min(calls), max(calls)
    return f"{row.repeats} × {low}" if low == high else f"{row.repeats} × {low}–{high}"


def _machines_line(rows: list[_Row], t) -> str:
    """The machines behind the timings, each named once with the thread counts it ran on."""
    threads: dict[str, list[int]] = {}
    for machine in sorted({r.machine for r in rows}, key=lambda m: (str(m), m.threads or 0)):
        cuda = [f"CUDA {machine.cuda}"] if machine.cuda is not None else []
        name = " · ".join([machine.name, *cuda, f"torch {machine.torch}", *machine.settings])
        threads.setdefault(name, [])
        if machine.threads is not None:
            threads[name].append(machine.threads)
    named = [
        t("{machine}, with {threads} threads", machine=name, threads=t(" or ").join(map(str, n)))
        if n
        else name
        for name, n in threads.items()
    ]
    return t("All timings below were taken on {machines}.", machines="; ".join(named))


class ClaimsDirective(SphinxDirective):
    """The sources' claims, each with the outcome its page recorded in this build."""

    has_content = False

    def run(self):
        env = self.env
        for path in claim_files(env).values():
            env.note_dependency(str(path))
        lines = claim_lines(env, language_of(env))
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source="claims"), container)
        return freeze(container).children


class MeasurementsDirective(SphinxDirective):
    """One table of every record of the build."""

    has_content = False

    def run(self):
        env = self.env
        t = translator(language_of(env))
        rows = load_records(env)
        for row in rows:
            env.note_dependency(str(records_file(conf_of(env), row.page)))
        lines = [
            f".. list-table:: {t('Every timing in the gallery')}",
            "   :header-rows: 1",
            "   :class: effpt-measurements",
            "",
            f"   * - {t('Page')}",
            f"     - {t('Task')}",
            f"     - {t('Variant')}",
            f"     - {t('Median')}",
            f"     - {t('IQR')}",
            f"     - {t('Repeats')}",
        ]
        # No ratio column: a task's records may be parts of a whole (a ReLU against the
        # path it sits in, a forward pass against a training step), which the records
        # cannot tell from variants of the same work; each page prints the ratios it
        # means, and the expectations grid holds them against the machines.
        for row in rows:
            lines += [
                f"   * - :doc:`/{row.docname}`",
                f"     - {row.task}",
                f"     - ``{row.variant}``",
                f"     - {format_seconds(row.median_s)}",
                f"     - {format_seconds(row.iqr_s)}",
                f"     - {_repeats_cell(row)}",
            ]
        if not rows:
            lines = [f"*{t('No page of this build recorded a measurement.')}*"]
        intro = [_machines_line(rows, t), ""] if rows else []
        lines = [*intro, *lines]
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source="measurements"), container)
        return freeze(container).children


def setup(app) -> None:
    app.add_directive("effpt-claims", ClaimsDirective)
    app.add_directive("effpt-measurements", MeasurementsDirective)
