"""The measurements page: every record the gallery wrote, and the sources' claims scored.

Pages time their variants with :func:`effpt.bench.compare`, which appends
:class:`effpt.records.Record` lines to a file per page (the gallery hook names it).
This module validates those files, lists every record, and scores each speed claim of
the source material (stated in :mod:`effpt_site.claims`) against the record that
measures the same thing. A claim is scored only like for like: on the device class the
source measured on, for the same technique and the same size. Otherwise the table says why it is not comparable.
"""

from __future__ import annotations

from dataclasses import dataclass

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.errors import ExtensionError
from sphinx.util.nodes import nested_parse_with_titles

from effpt.machine import Machine
from effpt.records import Ratio, Record, format_seconds, read_records, speedup
from effpt_site.claims import CLAIMS
from effpt_site.i18n import N_, freeze, language_of, translate
from effpt_site.layout import example_pages
from effpt_site.outputs import conf_of, record_files, records_file


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


#: The words effpt.records.Ratio.verdict gives a speed-up, which the timings table shows.
RATIO_VERDICTS = (N_("faster"), N_("slower"), N_("inconclusive"))

#: A verdict of "nearly" covers speed-ups within this fraction below the promised one.
NEARLY = 0.85


def verdict(ratio: Ratio, promised: float) -> str:
    """Score a measured speed-up against a promised one, honest about the noise.

    "yes" when the whole interval reaches the promise, "nearly" when it lies within
    15 % below it, "no" when it lies wholly below that, and "inconclusive" when the
    interval straddles one of those lines: another build could land on either side.

    Examples
    --------
    >>> from effpt.records import Ratio
    >>> [verdict(Ratio(v, lo, hi), 2.0) for v, lo, hi in
    ...  [(2.5, 2.2, 2.8), (1.9, 1.8, 1.95), (1.0, 0.9, 1.1), (2.0, 1.6, 2.4)]]
    ['yes', 'nearly', 'no', 'inconclusive']
    """
    if ratio.low >= promised:
        return N_("yes")
    if ratio.high < NEARLY * promised:
        return N_("no")
    if ratio.low >= NEARLY * promised and ratio.high < promised:
        return N_("nearly")
    return N_("inconclusive")


def _device_class(machine: Machine) -> str:
    """The device class a claim compares on: "cuda", "mps", or "cpu" for any other."""
    return machine.kind if machine.kind in ("cuda", "mps") else "cpu"


def claim_lines(rows: list[_Row], language: str = "en") -> list[str]:
    """A table of the sources' claims, each with this build's speed-up and a verdict."""

    def t(text: str, **values: object) -> str:
        return translate(language, text, **values)

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
    for claim in CLAIMS:
        head = [
            f"   * - {t(claim.text)}",
            f"     - {t(claim.source)}",
            f"     - {claim.promised:.3g}×",
        ]
        page_rows = [r for r in rows if r.page == claim.page]
        if not page_rows:  # that page was not executed in this build tree
            lines += [*head, f"     - {t('not measured')}", "     - —"]
            continue
        task = claim.task
        found = {r.variant: r for r in page_rows if r.task == task}
        # A page may time a claim's task on the source's device as well as its own.
        on_device = [
            r for r in page_rows if r.task == task and _device_class(r.machine) == claim.device
        ]
        if on_device:
            found = {r.variant: r for r in on_device}
        if not found:
            msg = f"claim {claim.text!r}: no records of {task!r} on {claim.page}"
            raise ExtensionError(msg)
        first = next(iter(found.values()))
        machine = first.machine
        where = f":doc:`/{first.docname}`, {task}"
        if _device_class(machine) != claim.device:
            measured_on = t("a GPU") if claim.device == "cuda" else t("a CPU")
            why = t(
                "not comparable on this machine: the source measured on {source}, "
                "this build ran on {machine} ({where})",
                source=measured_on,
                machine=machine,
                where=where,
            )
            lines += [*head, f"     - {why}", "     - —"]
            continue
        fast = next((v for v in claim.fast.split("|") if v in found), claim.fast)
        if claim.slow not in found or fast not in found:
            if claim.optional:
                missing = t(
                    "not measured: {variant} did not run on {machine}",
                    variant=fast,
                    machine=machine,
                )
                lines += [*head, f"     - {missing}", "     - —"]
                continue
            msg = (
                f"claim {claim.text!r}: no records for {claim.slow!r} and {claim.fast!r} "
                f"of {task!r} on {claim.page}"
            )
            raise ExtensionError(msg)
        ratio = speedup(found[claim.slow], found[fast])
        lines += [
            *head,
            f"     - {t('{ratio} on {machine} ({where})', ratio=ratio, machine=machine, where=where)}",
            f"     - {t(verdict(ratio, claim.promised))}",
        ]
    return lines


class MeasurementsDirective(Directive):
    """The claims table, then one table of every record of the build."""

    has_content = False

    def run(self):
        env = self.state.document.settings.env
        language = language_of(env.app)

        def t(text: str, **values: object) -> str:
            return translate(language, text, **values)

        rows = load_records(env.app)
        for row in rows:
            env.note_dependency(str(records_file(conf_of(env.app), row.page)))
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
            f"     - {t('vs baseline')}",
        ]
        for row in rows:
            base = next(
                (
                    r
                    for r in rows
                    if (r.page, r.task, r.variant) == (row.page, row.task, row.baseline)
                ),
                None,
            )
            if row.variant == row.baseline:
                versus = t("baseline")
            elif base is None:
                versus = "n/a"
            else:
                ratio = speedup(base, row)
                versus = f"{ratio} {t(ratio.verdict)}"
            lines += [
                f"   * - :doc:`/{row.docname}`",
                f"     - {row.task}",
                f"     - ``{row.variant}``",
                f"     - {format_seconds(row.median_s)}",
                f"     - {format_seconds(row.iqr_s)}",
                f"     - {row.repeats} × {row.number}",
                f"     - {versus}",
            ]
        if not rows:
            lines = [f"*{t('No page of this build recorded a measurement.')}*"]
        machines = sorted({str(r.machine) for r in rows})
        intro = (
            [t("All timings below were taken on {machines}.", machines="; ".join(machines)), ""]
            if machines
            else []
        )
        lines = [*claim_lines(rows, language), "", *intro, *lines]
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source="measurements"), container)
        return freeze(container).children


def setup(app) -> None:
    app.add_directive("effpt-measurements", MeasurementsDirective)
