"""The landing page's cards: every lesson family in reading order, each listing its pages.

A card shows the family's picture (the first figure its pages draw), its title and
introduction, and the title of every page in the family's reading order, each a link,
so that a reader sees every lesson without a click. The picture links to the family's
page, as its title does.
"""

from __future__ import annotations

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


class page_title_link(nodes.Inline, nodes.Element):
    """A link to the page ``docname`` reading its title, filled in once every page is read."""


def page_link(env, docname: str) -> page_title_link:
    """A link to a gallery page whose text is its title as the page shows it.

    The title is taken from the built page (so inline markup such as
    ````torch.func.vmap```` renders, and a translated edition shows its translation)
    when the doctree is resolved; a page that does not exist fails the build.
    """
    if docname not in env.found_docs:
        msg = f"the landing page lists {docname!r}, which is not a page of this build"
        raise ExtensionError(msg)
    return page_title_link(docname=docname)


def resolve_page_titles(app, doctree, docname) -> None:
    """doctree-resolved hook: turn each :class:`page_title_link` into a titled link."""
    for node in list(doctree.findall(page_title_link)):
        target = node["docname"]
        title = app.env.titles.get(target)
        if title is None:
            msg = f"{docname}: no title known for {target!r}"
            raise ExtensionError(msg)
        uri = app.builder.get_relative_uri(docname, target)
        link = nodes.reference("", "", *title.deepcopy().children, refuri=uri, internal=True)
        node.replace_self(link)


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
                line += page_link(env, f"{gallery}/{folder.name}/{Path(name).stem}")
                item += line
                lessons += item
            card += lessons
            cards += card
        return [cards]


def setup(app) -> None:
    app.add_directive("effpt-families", FamiliesDirective)
    app.add_node(page_title_link)
    app.connect("doctree-resolved", resolve_page_titles)
