"""Every expectation the gallery stated, with this build's verdict, and the build log's summary.

Pages state what they expect of the machine with :func:`effpt.expect.expect`; the
gallery hook names one file per page, read back here through
:func:`effpt.expect.read_expectations`. The measurements page lists every expectation
with its verdict; the build log ends with the ones that did not hold here. An
expectation never fails the build: only a malformed record (a bug in a page) does.
"""

from __future__ import annotations

from dataclasses import dataclass

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.nodes import nested_parse_with_titles

from effpt.expect import Expectation, read_expectations
from effpt_site.i18n import N_, freeze, language_of, translate
from effpt_site.layout import example_pages
from effpt_site.outputs import conf_of, expectation_files, expectations_file

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PageExpectation:
    """An expectation with the page (stem and docname) that stated it."""

    page: str
    docname: str
    expectation: Expectation


def load_expectations(app) -> list[PageExpectation]:
    """Every page's expectations, in reading order; a malformed file fails the build."""
    pages = example_pages(app)
    known = expectation_files(app)
    for stem in known.keys() - pages.keys():
        msg = f"expectations {known[stem]} come from an unknown page {stem!r}"
        raise ExtensionError(msg)
    out = []
    for stem, docname in pages.items():
        if stem not in known:
            continue
        try:
            found = read_expectations(known[stem])
        except ValueError as exc:
            raise ExtensionError(str(exc)) from exc
        out += [PageExpectation(stem, docname, e) for e in found]
    return out


class ExpectationsDirective(Directive):
    """A table of every expectation of the build: page, statement, bound, measured, verdict."""

    has_content = False

    def run(self):
        env = self.state.document.settings.env
        language = language_of(env.app)
        rows = load_expectations(env.app)
        for row in {r.page for r in rows}:
            env.note_dependency(str(expectations_file(conf_of(env.app), row)))
        if not rows:
            text = translate(language, "No page of this build stated an expectation.")
            lines = [f"*{text}*"]
        else:
            counts = {v: sum(r.expectation.verdict == v for r in rows) for v in _ORDER}
            summary = translate(
                language,
                "{total} expectations: {held} hold here, {failed} do not, {unsure} inconclusive.",
                total=len(rows),
                held=counts["holds here"],
                failed=counts["does not hold here"],
                unsure=counts["inconclusive"],
            )
            lines = [
                summary,
                "",
                f".. list-table:: {translate(language, 'What the pages expect of the machine, and this build’s verdict')}",
                "   :header-rows: 1",
                "   :class: effpt-measurements",
                "",
                f"   * - {translate(language, 'Page')}",
                f"     - {translate(language, 'Expectation')}",
                f"     - {translate(language, 'Expected')}",
                f"     - {translate(language, 'Measured')}",
                f"     - {translate(language, 'Verdict')}",
            ]
            for row in rows:
                e = row.expectation
                lines += [
                    f"   * - :doc:`/{row.docname}`",
                    f"     - {_escape(e.statement)}",
                    f"     - {_escape(e.expected)}",
                    f"     - {_escape(e.measured)} ({_escape(str(e.machine))})",
                    f"     - {translate(language, e.verdict)}",
                ]
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source="expectations"), container)
        return freeze(container).children


#: effpt.expect.VERDICTS, as the table shows them.
_ORDER = (N_("holds here"), N_("does not hold here"), N_("inconclusive"))


def _escape(text: str) -> str:
    """Text from a page, safe inside a reST table cell (no inline markup)."""
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("`", "\\`").replace("|", "\\|")


def report(app, exception) -> None:
    """build-finished: end the log with the expectations that did not hold (never an error)."""
    if exception is not None or app.builder.name != "html" or language_of(app) != "en":
        return
    rows = load_expectations(app)
    if not rows:
        return
    missed = [r for r in rows if r.expectation.verdict == "does not hold here"]
    unsure = sum(r.expectation.verdict == "inconclusive" for r in rows)
    logger.info(
        "effpt: %d expectations: %d hold here, %d do not, %d inconclusive (none fails the build)",
        len(rows),
        len(rows) - len(missed) - unsure,
        len(missed),
        unsure,
    )
    for row in missed:
        e = row.expectation
        logger.info(
            "effpt:   did not hold: %s: %s (expected %s, measured %s)",
            row.page,
            e.statement,
            e.expected,
            e.measured,
        )


def setup(app) -> None:
    app.add_directive("effpt-expectations", ExpectationsDirective)
    # Last, so that these lines close the build log.
    app.connect("build-finished", report, priority=990)
