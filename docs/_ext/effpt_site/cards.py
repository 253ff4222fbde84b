"""The landing page's cards: every lesson family in reading order, each listing its pages.

A card shows the family's picture (the first figure its pages draw), its title and
introduction, and the title of every page in the family's reading order, each a link,
so that a reader sees every lesson without a click. The picture links to the family's
page, as its title does.
"""

from __future__ import annotations

import ast
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.errors import ExtensionError
from sphinx.util.nodes import nested_parse_with_titles

from effpt_site.images import card_picture
from effpt_site.layout import family_dirs, generated_dir, header_title_and_intro, reading_order

#: Width of a card's picture, in CSS pixels.
PICTURE_PX = 160


def page_title(script: Path) -> str:
    r"""A gallery page's title: the first line of its script's docstring.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> script = pathlib.Path(tempfile.mkdtemp()) / "plot_x.py"
    >>> _ = script.write_text("'''\nTime code honestly\n==================\n\nWhy.\n'''\n")
    >>> page_title(script)
    'Time code honestly'
    """
    docstring = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    lines = [line.strip() for line in docstring.splitlines() if line.strip()]
    if not lines:
        msg = f"{script} has no docstring: its first line is the page's title"
        raise ValueError(msg)
    return lines[0]


def doc_link(docname: str, text: str, refdoc: str) -> addnodes.pending_xref:
    """A link to ``docname`` reading ``text``, resolved like the ``:doc:`` role."""
    return addnodes.pending_xref(
        "",
        nodes.inline(text, text),
        refdomain="std",
        reftype="doc",
        reftarget=f"/{docname}",
        refexplicit=True,
        refwarn=True,
        refdoc=refdoc,
    )


def page_link(state, env, docname: str, title: str, lineno: int) -> nodes.Node:
    """A link to a gallery page whose text is its title, reST markup rendered.

    Titles hold inline markup (````torch.func.vmap````), which the ``:doc:`` role would
    flatten; the link is built to the page's output file instead, and a page that does
    not exist fails the build.
    """
    if docname not in env.found_docs:
        msg = f"the landing page lists {docname!r}, which is not a page of this build"
        raise ExtensionError(msg)
    text, messages = state.inline_text(title, lineno)
    uri = env.app.builder.get_relative_uri(env.docname, docname)
    return nodes.reference("", "", *text, *messages, refuri=uri, internal=True)


def family_picture(images: Path, order: list[str]) -> Path | None:
    """The thumbnail of the first page, in reading order, that drew a figure."""
    stems = [Path(name).stem for name in order]
    drawn = [s for s in stems if (images / f"sphx_glr_{s}_001.png").is_file()]
    for stem in drawn or stems:
        thumb = images / "thumb" / f"sphx_glr_{stem}_thumb.png"
        if thumb.is_file():
            return thumb
    return None


class FamiliesDirective(Directive):
    """Cards for the lesson families, each with its picture and the titles of its pages."""

    has_content = False

    def run(self):
        env = self.state.document.settings.env
        app = env.app
        gallery = app.config.sphinx_gallery_conf["gallery_dirs"]
        cards = nodes.container(classes=["effpt-cards"])
        for number, folder in enumerate(family_dirs(app), start=1):
            title, intro = header_title_and_intro(folder)
            order = reading_order(folder)
            family_doc = f"{gallery}/{folder.name}/index"
            card = nodes.container(classes=["effpt-card"])
            picture = family_picture(generated_dir(app) / folder.name / "images", order)
            if picture is not None:
                env.note_dependency(str(picture))
                card += card_picture(
                    source=str(picture),
                    width=PICTURE_PX,
                    target=family_doc,
                    alt="",
                    lazy=number > 1,
                )
            heading = nodes.paragraph(classes=["effpt-card-title"])
            heading += nodes.strong(text=f"{number}. ")
            heading += doc_link(family_doc, title, env.docname)
            card += heading
            parsed = nodes.container()
            nested_parse_with_titles(
                self.state, StringList([intro], source=str(folder / "GALLERY_HEADER.rst")), parsed
            )
            card += parsed.children
            lessons = nodes.enumerated_list(enumtype="arabic", classes=["effpt-lessons"])
            for name in order:
                script = folder / name
                env.note_dependency(str(script))
                item = nodes.list_item()
                line = nodes.paragraph()
                page = f"{gallery}/{folder.name}/{Path(name).stem}"
                line += page_link(self.state, env, page, page_title(script), self.lineno)
                item += line
                lessons += item
            card += lessons
            cards += card
        return [cards]


def setup(app) -> None:
    app.add_directive("effpt-families", FamiliesDirective)
