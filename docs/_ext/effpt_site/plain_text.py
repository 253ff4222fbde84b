"""Copies for tools that read documentation: every page as plain text, and ``llms.txt``.

Each HTML page gets a plain-text copy beside it (``page.html`` → ``page.txt``), written
by Sphinx's own text writer from the page's resolved doctree: the executed output of a
gallery page is in it, and a Chinese page's copy is in Chinese, since each edition
writes its own. ``llms.txt`` (https://llmstxt.org) at the edition's root lists every
page with its description and the address of its text copy.

No extension on PyPI fits: sphinx-llms-txt concatenates the reST *sources*, which hold
neither a gallery page's executed output (in the sources only after sphinx-gallery ran,
but never translated) nor the Chinese text.

Both are new files written from the doctrees (never from the HTML), and no HTML page is
edited.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from docutils import nodes
from sphinx.util import logging
from sphinx.writers.text import TextTranslator

from effpt_site.i18n import language_of, translate
from effpt_site.seo import describe_page

logger = logging.getLogger(__name__)

#: Pages with nothing to read as text.
SKIP = {"genindex", "search", "py-modindex"}


class PlainTextTranslator(TextTranslator):
    """Sphinx's text translator; the site's own nodes (cards, badges) give their text."""

    # sphinx-gallery swaps each code cell's literal_block for its own linked copy, a node
    # per token. Its text is written whole: visiting ~280,000 token nodes one by one took
    # most of the text copies' 6 s in a cold Chinese pass, for the same characters.
    def visit_code_links_block(self, node) -> None:
        self.visit_literal_block(node)
        self.add_text(node.astext())
        self.depart_literal_block(node)
        raise nodes.SkipNode

    def unknown_visit(self, node) -> None:
        """A node only the HTML writer knows: its children's text stands for it."""

    def unknown_departure(self, node) -> None:
        """Nothing to close."""


def text_of(builder, doctree) -> str:
    """A resolved doctree as plain text, as ``sphinx-build -b text`` would write it.

    The text writer only reads the tree (no copy: copying each page's tree took longer
    than writing its text), so the doctree is left as the HTML writer had it.
    """
    # The text builder's translator, not the HTML builder's own (builder.create_translator).
    translator = PlainTextTranslator(doctree, builder)
    doctree.walkabout(translator)
    return translator.body


def write_text_copy(app, pagename, templatename, context, doctree) -> None:  # noqa: ARG001
    """html-page-context: write ``pagename.txt`` beside its HTML page."""
    if app.builder.format != "html" or doctree is None or pagename in SKIP:
        return
    if pagename.startswith("_modules/"):
        return
    target = Path(app.outdir, pagename + ".txt")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text_of(app.builder, doctree), encoding="utf-8")


def llms_txt(
    project: str,
    summary: str,
    base: str,
    pages: dict[str, tuple[str, str]],
    heading="Pages of this site",
) -> str:
    """The ``llms.txt`` of one edition: a title, a summary, and each page's text copy.

    Examples
    --------
    >>> print(llms_txt("P", "What P is.", "https://x.io/p/", {"a/b": ("B", "About B.")}))
    # P
    <BLANKLINE>
    > What P is.
    <BLANKLINE>
    ## Pages of this site
    <BLANKLINE>
    - [B](https://x.io/p/a/b.txt): About B.
    <BLANKLINE>
    """
    lines = [f"# {project}", "", f"> {summary}", "", f"## {heading}", ""]
    for docname, (title, description) in sorted(pages.items()):
        lines.append(f"- [{title}]({base}{docname}.txt): {description}")
    return "\n".join([*lines, ""])


def _describer_version() -> str:
    """The code a recorded description came from: this module and effpt_site.seo."""
    from effpt_site import seo  # noqa: PLC0415

    code = Path(__file__).read_bytes() + Path(seo.__file__).read_bytes()
    return hashlib.sha256(code).hexdigest()


def _recorded_descriptions(record: Path) -> dict[str, list]:
    """Each page's doctree identity and description, as the last build recorded them."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != _describer_version():
        return {}
    return data.get("pages", {})


def write_llms_txt(app, exception) -> None:
    """build-finished: ``llms.txt`` at the root of the edition."""
    if exception is not None or app.builder.format != "html":
        return
    # Every page of the edition, also those this (incremental) build did not rewrite.
    # A page's description is taken again from its doctree only when Sphinx wrote that
    # doctree anew (read the page again) since the description was recorded.
    record = Path(app.doctreedir) / "effpt-descriptions.json"
    known = _recorded_descriptions(record)
    pages, described = {}, {}
    for docname in sorted(app.env.found_docs - SKIP):
        if not Path(app.outdir, docname + ".txt").is_file():
            continue
        title = app.env.titles[docname].astext() if docname in app.env.titles else docname
        stat = Path(app.doctreedir, docname + ".doctree").stat()
        key = [stat.st_mtime_ns, stat.st_size, title, app.config.project]
        entry = known.get(docname)
        if entry and entry[0] == key:
            description = entry[1]
        else:
            doctree = app.env.get_doctree(docname)
            description = describe_page(docname, title, doctree, app.config.project)
        pages[docname] = (title, description)
        described[docname] = [key, description]
    if described != known:
        data = {"version": _describer_version(), "pages": described}
        record.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    base = (app.config.html_baseurl or "").rstrip("/") + "/"
    language = language_of(app)
    summary = translate(
        language,
        "A documentation site whose every page is produced by running code: how to use "
        "PyTorch well, measured on the machine that built it. Each page below is the "
        "plain text of its HTML page, with the executed output.",
    )
    text = llms_txt(
        app.config.project, summary, base, pages, translate(language, "Pages of this site")
    )
    Path(app.outdir, "llms.txt").write_text(text, encoding="utf-8")
    logger.info("effpt: llms.txt lists %d plain-text pages", len(pages))


def setup(app) -> None:
    app.connect("html-page-context", write_text_copy)
    app.connect("build-finished", write_llms_txt)
