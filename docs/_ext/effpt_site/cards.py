"""The landing page's cards: one per lesson family, in reading order, with a figure."""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.util.nodes import nested_parse_with_titles

from effpt_site.layout import family_dirs, generated_dir, header_title_and_intro, reading_order


class FamiliesDirective(Directive):
    """Cards for the lesson families, each with the first figure the family draws."""

    has_content = False

    def run(self):
        app = self.state.document.settings.env.app
        gallery = app.config.sphinx_gallery_conf["gallery_dirs"]
        lines = [".. container:: effpt-cards", ""]
        for number, folder in enumerate(family_dirs(app), start=1):
            title, intro = header_title_and_intro(folder)
            order = reading_order(folder)
            # The first page in reading order that drew a figure gives the card its picture.
            images = generated_dir(app) / folder.name / "images"
            stems = [Path(name).stem for name in order]
            drawn = [s for s in stems if (images / f"sphx_glr_{s}_001.png").is_file()]
            first = (drawn or stems)[0]
            thumb = f"/{gallery}/{folder.name}/images/thumb/sphx_glr_{first}_thumb.png"
            pages = f"{len(order)} page{'s' if len(order) != 1 else ''}"
            lines += [
                "   .. container:: effpt-card",
                "",
                f"      .. image:: {thumb}",
                f"         :alt: A figure from {title}",
                "         :width: 160px",
                "",
                f"      **{number}.** :doc:`{title} </{gallery}/{folder.name}/index>`",
                "",
                f"      {intro} *({pages})*",
                "",
            ]
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source="effpt-families"), container)
        return container.children


def setup(app) -> None:
    app.add_directive("effpt-families", FamiliesDirective)
