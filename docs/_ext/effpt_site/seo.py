"""What search engines read: a description per page, and a sitemap of the site.

* Every page gets ``<meta name="description">`` from its own first paragraph of prose
  (the sentences under its title), cut at a word near 160 characters. Lines the site
  adds above the prose (the torch badge, the execution stamp) and admonitions are
  passed over. Pages without prose (the index, the search page, highlighted source)
  are described by what they are.
* The canonical link of every page comes from ``html_baseurl`` (docs/conf.py): the
  address of the hosted site.
* ``sitemap.xml`` lists the address of every page when the build finishes.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from xml.sax.saxutils import escape

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: Search engines show about this many characters of a description.
DESCRIPTION_CHARS = 160
#: Paragraphs the site adds above a page's prose, by class.
NOT_PROSE = {"effpt-badge", "effpt-stamp", "sphx-glr-script-out", "sphx-glr-timing"}
#: Containers a first paragraph may sit in: a page's own sections.
PROSE_PARENTS = (nodes.section, nodes.document)


def shorten(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters.

    Examples
    --------
    >>> shorten("Broadcasting lets   two tensors\\nmeet without copying.", 30)
    'Broadcasting lets two tensors…'
    >>> shorten("Short enough.")
    'Short enough.'
    """
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if text[limit - 1] != " ":  # the cut falls inside a word: drop that word
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(",;:. ") + "…"


def first_paragraph(doctree: nodes.Node) -> str:
    """The text of the first paragraph of prose directly under a section of the page."""
    for paragraph in doctree.findall(nodes.paragraph):
        if NOT_PROSE & set(paragraph.get("classes", [])):
            continue
        if not isinstance(paragraph.parent, PROSE_PARENTS):
            continue
        text = " ".join(paragraph.astext().split())
        if len(text.split()) >= 6:
            return text
    return ""


def describe_page(pagename: str, title: str, doctree: nodes.Node | None, project: str) -> str:
    """The description of one page (its first paragraph, or what the page is).

    >>> describe_page("genindex", "Index", None, "Effective PyTorch")
    'Index of every name documented in Effective PyTorch.'
    >>> describe_page("_modules/effpt/bench", "effpt.bench", None, "Effective PyTorch")
    'Source code of effpt.bench, the support library of Effective PyTorch.'
    """
    if doctree is not None:
        text = first_paragraph(doctree)
        if text:
            return shorten(text)
    if pagename == "genindex":
        return f"Index of every name documented in {project}."
    if pagename == "search":
        return f"Search the pages of {project}."
    if pagename == "py-modindex":
        return f"The modules of {project}'s support library, effpt."
    if pagename.startswith("_modules/"):
        if pagename == "_modules/index":
            return f"Source code of the support library of {project}, module by module."
        return f"Source code of {title}, the support library of {project}."
    return shorten(f"{title}: a page of {project}.")


def add_description(app, pagename, templatename, context, doctree) -> None:  # noqa: ARG001
    """html-page-context hook: the page's description, for docs/_templates/layout.html."""
    title = html.unescape(re.sub(r"<[^>]+>", "", str(context.get("title", ""))))
    context["effpt_description"] = describe_page(pagename, title, doctree, app.config.project)


def page_url(base: str, docname: str, builder) -> str:
    """The public address of a page."""
    return base.rstrip("/") + "/" + builder.get_target_uri(docname)


def write_sitemap(app, exception) -> None:
    """build-finished hook: ``sitemap.xml`` with the address of every page."""
    if exception is not None or app.builder.format != "html":
        return
    base = app.config.html_baseurl
    if not base:
        logger.info("effpt: no html_baseurl, so no sitemap.xml")
        return
    docnames = sorted(app.env.found_docs)
    urls = [page_url(base, docname, app.builder) for docname in docnames]
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">',
        *(f"  <url><loc>{escape(url)}</loc></url>" for url in urls),
        "</urlset>",
        "",
    ]
    (Path(app.outdir) / "sitemap.xml").write_text("\n".join(lines), encoding="utf-8")
    logger.info("effpt: sitemap.xml lists %d pages", len(urls))


def base_for_language(app, config) -> None:  # noqa: ARG001  (the event's signature)
    """config-inited hook: a translated edition lives in its language's folder of the site.

    ``nox -s docs`` builds the Chinese edition with ``-D language=zh_CN`` into
    ``zh_CN/``; its canonical links and sitemap name that folder.
    """
    language = config.language or "en"
    base = config.html_baseurl
    if base and language != "en" and not base.rstrip("/").endswith(language):
        config.html_baseurl = base.rstrip("/") + f"/{language}/"


def setup(app) -> None:
    app.connect("config-inited", base_for_language)
    app.connect("html-page-context", add_description)
    app.connect("build-finished", write_sitemap)
