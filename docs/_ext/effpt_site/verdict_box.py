"""The verdict box: after each page output that prints expectations, what they came to.

A page states an expectation with :func:`effpt.expect.expect`, which prints one line
("Expectation: ... : holds here.") and records it. Nothing on the page marks where a box
goes: when a page has been read, :func:`add_boxes` finds each sphinx-gallery output
block holding printed expectation lines of this build's run (matched line for line
with what the run recorded, :func:`shown_in`) and puts one box right after it. The box
lists each expectation that output printed, in the order printed:

* its statement, linked to its row on the measurements page;
* the bound, and this build's value, machine and verdict, in the build's language
  (the verdict word also a class, ``effpt-holds``, ``effpt-fails`` or ``effpt-unsure``);
* how it fared on the machines of the evidence records
  (:func:`effpt_site.across_machines.summary`).

The printed lines stay in the output: they are the run, as a reader who runs the page
sees it. A page needs no markup for its box, so a new page gets one by calling
:func:`~effpt.expect.expect`.
"""

from __future__ import annotations

from docutils import nodes

from effpt.expect import Expectation
from effpt_site import across_machines as across
from effpt_site.i18n import freeze, language_of, translate_data, translator
from effpt_site.layout import page_stem

#: The class of a verdict word in the box, by verdict (the same as the grid's cells).
VERDICT_CLASS = {
    "holds here": "effpt-holds",
    "does not hold here": "effpt-fails",
    "inconclusive": "effpt-unsure",
}


def _output_blocks(doctree) -> list[nodes.literal_block]:
    return [
        b for b in doctree.findall(nodes.literal_block) if "sphx-glr-script-out" in b["classes"]
    ]


def shown_in(text: str, recorded: list[Expectation] | tuple[Expectation, ...]) -> list[Expectation]:
    """The recorded expectations whose printed line is a line of ``text``, in printed order.

    Examples
    --------
    >>> from effpt.expect import expect
    >>> e = expect("a beats b", (2.0, 1.9, 2.1), above=1.0, device="cpu", show=False)
    >>> [x.statement for x in shown_in(f"warm-up done\\n{e}\\n", [e])]
    ['a beats b']
    >>> shown_in("Expectation: something else.", [e])
    []
    """
    lines = {str(e): e for e in recorded}
    return [lines[line.strip()] for line in text.splitlines() if line.strip() in lines]


def expected_text(e: Expectation, t) -> str:
    """The bound, e.g. "above 1.5×", in the language of ``t``."""
    bound = e.expected.split(" ", 1)[1]
    return t("above {bound}", bound=bound) if e.side == "above" else t("below {bound}", bound=bound)


def box(
    shown: list[Expectation], rows: list[across.Row], cols: list[across.Column], uri: str, language
) -> nodes.container:
    """The box for the expectations ``shown`` (``rows`` their rows, ``uri`` the grid's page)."""
    t = translator(language)
    out = nodes.container(classes=["effpt-verdict-box"])
    out += nodes.rubric(text=t("What this run found"))
    items = nodes.bullet_list(classes=["effpt-verdicts"])
    for e, row in zip(shown, rows, strict=True):
        link = nodes.reference(
            "",
            translate_data(language, e.statement),
            refuri=f"{uri}#{row.anchor}",
            internal=True,
        )
        statement = nodes.paragraph(classes=["effpt-verdict-statement"])
        statement += link
        here = nodes.paragraph(classes=["effpt-verdict-here"])
        line = t(
            "Expected {bound}. This build: {measured} on {machine}:",
            bound=expected_text(e, t),
            measured=e.measured,
            machine=str(e.machine),
        )
        # A space before the verdict word after a Latin colon; none after a full-width one.
        here += nodes.Text(line + (" " if line[-1].isascii() else ""))
        here += nodes.strong(
            text=t(e.verdict), classes=["effpt-verdict-word", VERDICT_CLASS[e.verdict]]
        )
        elsewhere = nodes.paragraph(
            text=across.summary(row, cols, t), classes=["effpt-verdict-elsewhere"]
        )
        item = nodes.list_item("", statement, here, elsewhere, classes=[VERDICT_CLASS[e.verdict]])
        items += item
    out += items
    return out


def add_boxes(app, doctree) -> None:
    """doctree-read: after each output block that prints expectations, their verdict box."""
    docname = app.env.docname
    stem = page_stem(app, docname)
    if stem is None:
        return
    folder = across.evidence_dir(app)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        app.env.note_dependency(str(path))
    cols = across.columns(app)
    here = cols[0].pages.get(stem)
    if here is None or not here.expectations:
        return
    family = docname.split("/")[-2]
    uri = app.builder.get_relative_uri(docname, app.config.effpt_measurements_doc)
    for block in _output_blocks(doctree):
        shown = shown_in(block.astext(), here.expectations)
        if not shown:
            continue
        rows = [across.Row("expect", family, stem, docname, e.statement) for e in shown]
        made = box(shown, rows, cols, uri, language_of(app))
        block.parent.insert(block.parent.index(block) + 1, freeze(made))


def setup(app) -> None:
    app.connect("doctree-read", add_boxes)
