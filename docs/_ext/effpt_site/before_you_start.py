"""The "before you start" box a gallery page may put under its title.

A page states it in its own docstring, right after the title, so that it is translated
with the page (its text lands in the page's catalogue)::

    .. effpt-before-you-start::
       :learn: Why ``view`` never copies; when ``reshape`` does.
       :read-first: :doc:`/explanations/timing`
       :needs: A CPU is enough; the last section uses a GPU when there is one.

The box adds how long the page ran on the machine that built the site (its
sphinx-gallery cost); the torch versions it was verified on are the badge beside it.
For now the box is optional: no page states one yet, and requiring it would fail the
build on every page (see issue 25, item 2).
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList

from effpt_site.i18n import freeze, translate

#: The box's parts, in the order shown, with their headings.
PARTS = {
    "learn": "What you will learn",
    "read-first": "Read first",
    "needs": "What it needs",
}


class BeforeYouStart(Directive):
    """``.. effpt-before-you-start::`` with ``:learn:``, ``:read-first:`` and ``:needs:``."""

    has_content = False
    option_spec = dict.fromkeys(PARTS, directives.unchanged_required)

    def run(self):
        env = self.state.document.settings.env
        language = env.config.language or "en"
        box = nodes.container(classes=["effpt-before-you-start"])
        heading = nodes.rubric(text=translate(language, "Before you start"))
        box += freeze(heading)
        fields = nodes.field_list()
        for key, label in PARTS.items():
            if key not in self.options:
                continue
            field = nodes.field()
            field += freeze(nodes.field_name(text=translate(language, label)))
            body = nodes.field_body()
            # The page's own words: parsed as reST, and translated with the page.
            self.state.nested_parse(StringList(self.options[key].splitlines()), 0, body)
            field += body
            fields += field
        cost = Path(env.srcdir, env.docname).with_suffix(".cost.json")
        if cost.is_file():
            seconds = json.loads(cost.read_text(encoding="utf-8"))["time"]
            field = nodes.field()
            field += freeze(nodes.field_name(text=translate(language, "Run time")))
            text = translate(
                language,
                "{seconds} s on the machine that built this site",
                seconds=f"{seconds:.0f}",
            )
            field += freeze(nodes.field_body("", nodes.paragraph(text=text)))
            fields += field
        box += fields
        return [box]


def setup(app) -> None:
    app.add_directive("effpt-before-you-start", BeforeYouStart)
