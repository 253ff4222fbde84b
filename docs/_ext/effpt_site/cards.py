"""The landing page's cards: every lesson family in reading order, each listing its pages.

A card shows the family's picture (the first figure its pages draw), its title and
introduction, and the title of every page in the family's reading order, each a link,
so that a reader sees every lesson without a click. The picture links to the family's
page, as its title does.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

from effpt.machine import Machine
from effpt_site import build_machine
from effpt_site.i18n import freeze, language_of, lookup, translate
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


def build_stamp(machine: Machine, day: datetime, language: str = "en") -> str:
    """One sentence saying when and on what this copy was built, from its :class:`Machine`.

    An x86_64 CPU with 2 threads and torch 2.13.0 becomes "Built on 2026-11-21 on an
    x86_64 CPU (AMD EPYC), 2 threads, with torch 2.13.0"; a GPU's CUDA version goes in
    brackets after its name.

    Examples
    --------
    >>> from datetime import datetime
    >>> cpu = Machine("cpu", "x86_64 CPU", 2, None, "2.13.0")
    >>> build_stamp(cpu, datetime(2026, 11, 21), "zh_CN")
    '本站的这份副本于 2026-11-21 在 x86_64 CPU, 2 threads 上构建，使用 torch 2.13.0。'
    """
    where = machine.hardware
    if machine.cuda is not None:
        where += f" (CUDA {machine.cuda})"
    if machine.settings:  # the timing variables set for the build (a thread cap, say)
        where += f" ({', '.join(machine.settings)})"
    torch_part = f"torch {machine.torch}"
    if language != "en":
        template = "Built on {day} on {where}, with {torch}."
        return translate(language, template, day=f"{day:%Y-%m-%d}", where=where, torch=torch_part)
    first = where.split()[0]
    vowel_sound = first[0].lower() in "aeiox" or (first.isupper() and first[0] in "AEFHILMNORSX")
    sentence = f"Built on {day:%Y-%m-%d} on {'an' if vowel_sound else 'a'} {where}"
    return sentence + f", with {torch_part}."


class BuildStampDirective(SphinxDirective):
    """The landing page's line saying when and on what this copy was built.

    Made here, in the build's language, and never offered to translators: it changes
    with every build.
    """

    has_content = False

    def run(self):
        from effpt.device import this_machine  # noqa: PLC0415  (imports torch)

        language = language_of(self.env)
        text = build_stamp(this_machine(), datetime.now(timezone.utc), language)
        paragraph = nodes.paragraph(classes=["effpt-build-stamp"])
        paragraph += nodes.emphasis(text=text)
        return [freeze(paragraph)]


class FamiliesDirective(SphinxDirective):
    """Cards for the lesson families, each with its picture and the titles of its pages."""

    has_content = False

    def run(self):
        env = self.env
        gallery = env.config.sphinx_gallery_conf["gallery_dirs"]
        cards = nodes.container(classes=["effpt-cards"])
        for number, folder in enumerate(family_dirs(env), start=1):
            _title, intro = header_title_and_intro(folder)
            order = reading_order(folder)
            family_doc = f"{gallery}/{folder.name}/index"
            card = nodes.container(classes=["effpt-card"])
            picture = family_picture(generated_dir(env) / folder.name / "images", order)
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
            heading += page_link(env, family_doc)  # the family page's title, translated too
            card += heading
            # The intro is the family page's first paragraph: in a translated edition it
            # comes from that page's catalogue, so it is not a message of this page.
            intro = lookup(env, family_doc, intro) or intro
            parsed = nodes.container()
            nested_parse_with_titles(
                self.state, StringList([intro], source=str(folder / "GALLERY_HEADER.rst")), parsed
            )
            card += [freeze(child) for child in parsed.children]
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


#: What later tools (the offline archive) need to know about a build, beside its HTML.
BUILD_INFO = "effpt-build.json"


def write_build_info(app, exception) -> None:
    """build-finished: when and on what the site was built, and its families, as data.

    Written by the English build into the site's root, so that no tool has to read it
    back out of the landing page's text or parse docs/conf.py.
    """
    if exception is not None or app.builder.format != "html" or language_of(app) != "en":
        return
    machine = build_machine.machine(app)[0]
    info = {
        "built": build_stamp(machine, datetime.now(timezone.utc)),
        "date": f"{datetime.now(timezone.utc):%Y-%m-%d}",
        "machine": machine.to_dict(),
        "families": list(app.config.effpt_families),
    }
    path = Path(app.outdir) / BUILD_INFO
    path.write_text(json.dumps(info, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def setup(app) -> None:
    app.connect("build-finished", write_build_info)
    app.add_directive("effpt-build-stamp", BuildStampDirective)
    app.add_directive("effpt-families", FamiliesDirective)
    app.add_node(page_title_link)
    app.connect("doctree-resolved", resolve_page_titles)
