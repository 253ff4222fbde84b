"""sphinx-gallery's index cards in the reader's language.

sphinx-gallery writes each card's title and tooltip as raw HTML, which catalogues cannot
reach; in a translated build both become the page's translated title.
"""

from __future__ import annotations

import html
import re

from docutils import nodes

from effpt_site.i18n import language_of

_THUMB_TITLE = re.compile(r'(<div class="sphx-glr-thumbnail-title">)(.*?)(</div>)', re.DOTALL)
_TOOLTIP = re.compile(r'(<div class="sphx-glr-thumbcontainer" tooltip=")[^"]*(")')


def _translate_thumbnails(app, doctree, docname: str) -> None:  # noqa: ARG001
    """doctree-resolved: gallery cards in the reader's language.

    sphinx-gallery writes each card's title and tooltip as raw HTML, which catalogues
    cannot reach. In a translated build both become the page's translated title, which
    Sphinx has from the page's own catalogue.
    """
    if language_of(app) == "en":
        return
    from effpt_site.layout import example_pages, examples_dir  # noqa: PLC0415

    translated = {}
    for stem, page in example_pages(app).items():
        script = examples_dir(app) / page.split("/")[-2] / f"{stem}.py"
        lines = script.read_text(encoding="utf-8").splitlines()
        english = lines[1].replace("``", "").strip() if len(lines) > 1 else ""
        if page in app.env.titles:
            translated[english] = app.env.titles[page].astext()
    pending_tooltip = None
    for raw in list(doctree.findall(nodes.raw)):
        text = raw.astext()
        if 'class="sphx-glr-thumbcontainer" tooltip="' in text:
            pending_tooltip = raw
        match = _THUMB_TITLE.search(text)
        if match is None:
            continue
        title = translated.get(html.unescape(match.group(2)).strip())
        if title is None:
            continue
        escaped = html.escape(title)
        new = _THUMB_TITLE.sub(lambda m, e=escaped: m.group(1) + e + m.group(3), text)
        raw.replace(raw.children[0], nodes.Text(new))
        if pending_tooltip is not None:
            old = pending_tooltip.astext()
            new = _TOOLTIP.sub(lambda m, e=escaped: m.group(1) + e + m.group(2), old)
            pending_tooltip.replace(pending_tooltip.children[0], nodes.Text(new))
            pending_tooltip = None


def setup(app) -> None:
    app.connect("doctree-resolved", _translate_thumbnails)
