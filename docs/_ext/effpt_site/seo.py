"""What search engines and link previews read: a description per page, and a sitemap.

Libraries write what they can; this module keeps by hand what they get wrong here.

* Open Graph tags (``og:title``, ``og:url``, ``og:description``, ``og:type``,
  ``og:site_name``) come from sphinxext-opengraph (docs/conf.py). Its own description
  would be the page's first text, which on this site is the torch badge or the
  "before you start" box; so :func:`add_description` hands it the page's summary through
  the page's metadata (``og:description``, which the library takes over its own).
* That summary is the first paragraph of prose (the sentences under the title), cut at a
  word near 160 characters; lines the site adds above the prose (the torch badge, the
  execution stamp), admonitions and boxes are passed over, and so are lines under six
  words; Chinese is written without spaces, so there two characters count as a word, and
  a long sentence is cut at a character. Pages without prose (the index, the search
  page, highlighted source) are described by what they are. docs/_templates/layout.html
  writes it as ``<meta name="description">``, also on the pages without a doctree, which
  sphinxext-opengraph leaves without tags.
* The canonical link of every page comes from ``html_baseurl`` (docs/conf.py), the
  address of the hosted site; the Chinese edition's is its ``zh_CN/`` folder
  (:func:`base_for_language`), and so is its ``og:url``.
* ``sitemap.xml`` is written here, not by sphinx-sitemap (2.9.0), which lists only the
  pages a build wrote: after an incremental build (``nox -s docs -- --example NAME``
  after a full one) its sitemap names a handful of pages (jdillard/sphinx-sitemap#13,
  open). Its ``{lang}`` URL scheme would also put the English edition under ``en/``,
  while this site serves it at the root. This one lists every page of the edition
  (``env.found_docs``), incremental build or not.
* No ``robots.txt``: crawlers read it only at the root of the host (effpt.github.io),
  which a project site does not own.
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
#: A paragraph shorter than this many words is a label, not prose.
MIN_WORDS = 6
#: Characters of scripts written without spaces between words (CJK, kana, hangul, and
#: full-width punctuation).
UNSPACED = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]")


def word_count(text: str) -> int:
    """Words in ``text``; in a script written without spaces two characters count as one.

    >>> word_count("Autograd records every operation")
    4
    >>> word_count("本页用一条直线拟合带噪声的点")
    7
    """
    unspaced = len(UNSPACED.findall(text))
    return len(UNSPACED.sub(" ", text).split()) + unspaced // 2


def shorten(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters.

    Examples
    --------
    >>> shorten("Broadcasting lets   two tensors\\nmeet without copying.", 30)
    'Broadcasting lets two tensors…'
    >>> shorten("Short enough.")
    'Short enough.'

    Chinese, written without spaces, is cut at a character, not back at the last space:

    >>> shorten("基本的 float16 训练循环需要调用三次缩放器，再加上梯度裁剪。", 26)
    '基本的 float16 训练循环需要调用三次缩放器…'
    """
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    after = text[limit - 1]
    if after != " " and not UNSPACED.match(after) and not UNSPACED.match(cut[-1]):
        cut = cut.rsplit(" ", 1)[0]  # the cut falls inside a word: drop that word
    return cut.rstrip(",;:. ，、；：。") + "…"


def first_paragraph(doctree: nodes.Node) -> str:
    """The text of the first paragraph of prose directly under a section of the page."""
    for paragraph in doctree.findall(nodes.paragraph):
        if NOT_PROSE & set(paragraph.get("classes", [])):
            continue
        if not isinstance(paragraph.parent, PROSE_PARENTS):
            continue
        text = " ".join(paragraph.astext().split())
        if word_count(text) >= MIN_WORDS:
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
    """html-page-context hook: the page's description, for layout.html and for Open Graph.

    Runs before sphinxext-opengraph's hook (a lower priority), which takes a page's
    ``og:*`` metadata over what it finds itself. The page's metadata is copied, not
    changed in place: the environment keeps what the source said. The library escapes
    only quotes, so the text goes to it escaped.
    """
    title = html.unescape(re.sub(r"<[^>]+>", "", str(context.get("title", ""))))
    description = describe_page(pagename, title, doctree, app.config.project)
    context["effpt_description"] = description
    if doctree is not None:
        meta = dict(context.get("meta") or {})
        meta["og:description"] = html.escape(description, quote=False)
        context["meta"] = meta


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
    ``zh_CN/``; its canonical links, ``og:url`` and sitemap name that folder.
    sphinxext-opengraph's ``ogp_site_url``, when not set, is ``html_baseurl``.
    """
    language = config.language or "en"
    base = config.html_baseurl
    if base and language != "en" and not base.rstrip("/").endswith(language):
        config.html_baseurl = base.rstrip("/") + f"/{language}/"
    if "ogp_site_url" in config and not config.ogp_site_url:
        config.ogp_site_url = config.html_baseurl


def setup(app) -> None:
    app.connect("config-inited", base_for_language)
    # Before sphinxext-opengraph's hook, at the default 500.
    app.connect("html-page-context", add_description, priority=400)
    app.connect("build-finished", write_sitemap)
