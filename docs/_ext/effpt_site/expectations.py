"""Every expectation and claim of the gallery on every machine measured, and the build log's summary.

Pages state what they expect of the machine with :func:`effpt.expect.expect`; the
gallery hook names one file per page, read back here through
:func:`effpt.expect.read_expectations`. The measurements page shows the grid
(``effpt-expectations``): each expectation and claim a row, grouped by family in
reading order, with this build's run and each evidence record as columns
(:mod:`effpt_site.across_machines`). The build log ends with the expectations that did
not hold here. An expectation never fails the build: only a malformed record (a bug in a
page, or a damaged evidence record) does.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx import addnodes
from sphinx.errors import ExtensionError
from sphinx.util import logging

from effpt.expect import Expectation, read_expectations
from effpt_site import across_machines as across
from effpt_site.i18n import N_, freeze, language_of, lookup, translator
from effpt_site.layout import example_pages, family_dirs, header_title_and_intro
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
    """The grid: every expectation and claim of the gallery, one column per machine measured.

    Rows are grouped by family, in the gallery's reading order; the first column is
    this build's run, the others the evidence records (:mod:`effpt_site.across_machines`).
    """

    has_content = False

    def run(self):
        env = self.state.document.settings.env
        # What the readers below use of the application: its folder and configuration
        # (BuildEnvironment.app is deprecated).
        app = SimpleNamespace(srcdir=env.srcdir, config=env.config)
        language = language_of(app)
        t = translator(language)
        mine = load_expectations(app)
        for row in {r.page for r in mine}:
            env.note_dependency(str(expectations_file(conf_of(app), row)))
        for path in across.read_records(app):
            env.note_dependency(str(path))
        for source in across.page_sources(app):
            env.note_dependency(str(source))
        out: list[nodes.Node] = []
        if mine:
            counts = {v: sum(r.expectation.verdict == v for r in mine) for v in _ORDER}
            summary = t(
                "{total} expectations: {held} hold here, {failed} do not, {unsure} inconclusive.",
                total=len(mine),
                held=counts["holds here"],
                failed=counts["does not hold here"],
                unsure=counts["inconclusive"],
            )
        else:
            summary = t("No page of this build stated an expectation.")
        out.append(nodes.paragraph(text=summary))
        gone = across.unknown_pages(app)
        if gone:
            listed = t(", ").join(f"{key} ({path.name})" for path, key in gone)
            text = t("Records also hold pages the gallery no longer has: {pages}.", pages=listed)
            out.append(nodes.paragraph(text=text, classes=["effpt-gone"]))
        cols = across.columns(app)
        grid_rows = across.rows(app, cols)
        for family in dict.fromkeys(r.family for r in grid_rows):
            section = nodes.section(ids=[f"evidence-{family}"], names=[f"evidence-{family}"])
            section += nodes.title(text=family_title(app, family))
            family_rows = [r for r in grid_rows if r.family == family]
            section += _grid(env.docname, family_rows, cols, t, language)
            out.append(section)
        return [freeze(node) for node in out]


def family_title(app, family: str) -> str:
    """A family's title from its GALLERY_HEADER.rst, in the build's language."""
    folder = next(f for f in family_dirs(app) if f.name == family)
    title, _ = header_title_and_intro(folder)
    gallery = app.config.sphinx_gallery_conf["gallery_dirs"]
    return lookup(app, f"{gallery}/{family}/index", title) or title


#: A cell's class on the measurements page, by the verdict it shows.
_CELL_CLASS = {
    "holds here": "effpt-holds",
    "yes": "effpt-holds",
    "does not hold here": "effpt-fails",
    "no": "effpt-fails",
    "nearly": "effpt-unsure",
    "inconclusive": "effpt-unsure",
}


def _entry(*children: nodes.Node, classes: tuple[str, ...] = ()) -> nodes.entry:
    paragraph = nodes.paragraph()
    for child in children:
        paragraph += child
    return nodes.entry("", paragraph, classes=list(classes))


def _page_link(docname: str, source: str) -> addnodes.pending_xref:
    """A link to page ``docname`` named by its title (resolved when the page is written)."""
    xref = addnodes.pending_xref(
        "", refdomain="std", reftype="doc", reftarget=f"/{docname}", refexplicit=False
    )
    xref["refdoc"] = source
    xref += nodes.inline("", docname)
    return xref


def _grid(source: str, grid_rows, cols, t, language) -> nodes.table:
    """One family's table: page, statement, bound, then each machine's value and verdict."""
    heads = [t("Page"), t("Statement"), t("Expected")] + [c.header(t) for c in cols]
    table = nodes.table(classes=["effpt-measurements", "effpt-grid"])
    group = nodes.tgroup(cols=len(heads))
    table += group
    for _ in heads:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    group += head
    head += nodes.row("", *(_entry(nodes.Text(text)) for text in heads))
    body = nodes.tbody()
    group += body
    for row in grid_rows:
        statement = across.statement(row, language)
        if row.kind == "claim":
            statement = t("Claim: {claim}", claim=statement)
        entries = [
            _entry(_page_link(row.docname, source)),
            _entry(nodes.Text(statement)),
            _entry(nodes.Text(across.expected(row, cols, t))),
        ]
        for col in cols:
            cell = across.cell(row, col, t)
            classes = [_CELL_CLASS[cell.verdict]] if cell.verdict in _CELL_CLASS else []
            text = f"{cell.text} †" if cell.older else cell.text
            entries.append(
                _entry(
                    nodes.Text(text), classes=(*classes, *(["effpt-older"] if cell.older else []))
                )
            )
        body += nodes.row("", *entries, ids=[row.anchor])
    return table


#: effpt.expect.VERDICTS, as the table shows them.
_ORDER = (N_("holds here"), N_("does not hold here"), N_("inconclusive"))


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
