"""sphinx-gallery's gallery cards, made by this site in the reader's language.

sphinx-gallery writes each card of a family's index page (and of each minigallery in the
API reference) as reST with raw HTML around a thumbnail and a ``:doc:`` link
(``THUMBNAIL_TEMPLATE`` in ``sphinx_gallery.backreferences``), and offers no setting or
template for it. That raw HTML holds the page's title and introduction in English, out
of the catalogues' reach, and the link covering the card has no accessible name (its
text is hidden by sphinx-gallery's CSS; axe rule link-name).

So once a page is read, each card's three parts become one :class:`gallery_card` node,
which this module writes itself, with sphinx-gallery's classes, from data the site owns:
the page's docname (the ``:doc:`` link's target), its title as the build shows it
(``env.titles``, translated in a translated edition), the thumbnail sphinx-gallery saved
(the card keeps its picture node) and the introduction of the page's script, which
sphinx-gallery's own parser extracts as it does for the card it would write. A
translated card's tooltip is the translated title: the introduction is not a message of
any catalogue.
"""

from __future__ import annotations

import html
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.errors import ExtensionError

from effpt_site.i18n import language_of

#: How sphinx-gallery's raw HTML opens and closes a card (recognised, never edited).
CARD_OPENS = '<div class="sphx-glr-thumbcontainer" tooltip="'
CARD_CLOSES = '<div class="sphx-glr-thumbnail-title">'


class gallery_card(nodes.General, nodes.Element):
    """One gallery card: the page ``docname``'s thumbnail and title, linking to it."""


class gallery_card_link(nodes.Inline, nodes.TextElement):
    """The link covering a card, named by the page's title (filled in when resolved)."""


def _is_html(node, start: str) -> bool:
    return (
        isinstance(node, nodes.raw)
        and node.get("format") == "html"
        and node.astext().lstrip().startswith(start)
    )


def make_cards(app, doctree) -> None:  # noqa: ARG001  (Sphinx's signature)
    """doctree-read: each of sphinx-gallery's cards becomes a :class:`gallery_card`."""
    for opening in list(doctree.findall(nodes.raw)):
        if not _is_html(opening, CARD_OPENS):
            continue
        parent = opening.parent
        at = parent.index(opening)
        parts = parent.children[at + 1 : at + 3]
        if (
            len(parts) != 2
            or not isinstance(parts[0], addnodes.only)
            or not _is_html(parts[1], CARD_CLOSES)
        ):
            msg = f"{opening.source}: a gallery card not laid out as sphinx-gallery 0.22 writes it"
            raise ExtensionError(msg)
        body = parts[0]
        xrefs = [x for x in body.findall(addnodes.pending_xref) if x.get("reftype") == "doc"]
        # (a translated build's parser adds a note that "image" is English)
        skip = (nodes.paragraph, nodes.system_message)
        pictures = [p for p in body.children if not isinstance(p, skip)]
        if len(xrefs) != 1 or len(pictures) != 1:
            msg = f"{opening.source}: a gallery card without one link and one thumbnail"
            raise ExtensionError(msg)
        docname = xrefs[0]["reftarget"].lstrip("/")
        card = gallery_card(docname=docname)
        card += pictures[0].deepcopy()
        card += nodes.paragraph("", "", gallery_card_link(docname=docname))
        parent.replace(opening, card)
        parent.remove(parts[0])
        parent.remove(parts[1])


def script_of(app, docname: str) -> Path:
    """The gallery script that page ``docname`` is made from."""
    conf = app.config.sphinx_gallery_conf
    sources, targets = conf["examples_dirs"], conf["gallery_dirs"]
    sources = [sources] if isinstance(sources, str) else sources
    targets = [targets] if isinstance(targets, str) else targets
    for source, target in zip(sources, targets, strict=True):
        if docname.startswith(f"{target}/"):
            return Path(app.srcdir) / source / f"{docname.removeprefix(target + '/')}.py"
    msg = f"{docname!r} is not a page of the gallery, yet a gallery card links to it"
    raise ExtensionError(msg)


def introduction(script: Path) -> str:
    """The first paragraph of ``script``'s docstring, as sphinx-gallery's cards show it."""
    from sphinx_gallery.gen_rst import extract_intro_and_title  # noqa: PLC0415  (docs only)
    from sphinx_gallery.py_source_parser import split_code_and_text_blocks  # noqa: PLC0415

    _conf, blocks = split_code_and_text_blocks(str(script), return_node=False)
    return extract_intro_and_title(str(script), blocks[0].content)[0]


def title_cards(app, doctree, docname: str) -> None:
    """doctree-resolved: each card's title, link text and tooltip, in the build's language."""
    for card in doctree.findall(gallery_card):
        target = card["docname"]
        if target not in app.env.titles:
            msg = f"{docname}: a gallery card links to {target!r}, which has no title"
            raise ExtensionError(msg)
        title = app.env.titles[target].astext()
        card["title"] = title
        english = language_of(app) == "en"
        card["tooltip"] = introduction(script_of(app, target)) if english else title
        for link in card.findall(gallery_card_link):
            link["title"] = title
            link.append(nodes.inline(title, title, classes=["doc"]))


def visit_card_html(self, node) -> None:
    tooltip = html.escape(node["tooltip"])
    self.body.append(f'<div class="sphx-glr-thumbcontainer" tooltip="{tooltip}">\n')


def depart_card_html(self, node) -> None:
    title = html.escape(node["title"])
    self.body.append(f'  <div class="sphx-glr-thumbnail-title">{title}</div>\n</div>\n')


def visit_link_html(self, node) -> None:
    href = self.builder.get_relative_uri(self.builder.current_docname, node["docname"])
    name = html.escape(node["title"])
    self.body.append(
        f'<a class="reference internal" href="{html.escape(href)}" aria-label="{name}">'
    )


def depart_link_html(self, node) -> None:  # noqa: ARG001  (Sphinx's visitor signature)
    self.body.append("</a>")


def _skip(self, node) -> None:  # noqa: ARG001  (sphinx-gallery's cards are for HTML only)
    raise nodes.SkipNode


def setup(app) -> None:
    others = dict.fromkeys(("latex", "text", "man", "texinfo"), (_skip, None))
    app.add_node(gallery_card, html=(visit_card_html, depart_card_html), **others)
    app.add_node(gallery_card_link, html=(visit_link_html, depart_link_html), **others)
    app.connect("doctree-read", make_cards)
    app.connect("doctree-resolved", title_cards)
