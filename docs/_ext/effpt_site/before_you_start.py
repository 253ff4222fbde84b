"""The "before you start" box a gallery page may put under its title.

A page states it in its own docstring, right after the title, so that it is translated
with the page (its text lands in the page's catalogue)::

    .. effpt-before-you-start::
       :learn: Why ``view`` never copies; when ``reshape`` does.
       :read-first: :doc:`/explanations/timing`
       :needs: A CPU is enough; the last section uses a GPU when there is one.

The box adds how long the page ran on the machine that built the site (its
sphinx-gallery cost); the torch versions it was verified on are the badge beside it.
Every gallery page states one, directly under its title, with all three parts
(``tests/test_page_sources.py`` checks each page's source).

sphinx-gallery copies the docstring into the page's notebook as Markdown, and leaves
directives it does not know as raw reST; :func:`notebook_markdown` rewrites the box
there as a quoted Markdown list after the gallery is generated.
"""

from __future__ import annotations

import json
import re
import textwrap

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList

from effpt_site.i18n import freeze, translate
from effpt_site.layout import generated_dir
from effpt_site.outputs import read_cost

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
            # With the page as their source, the paragraphs are the page's own messages:
            # Sphinx extracts and translates only text that names where it came from.
            source, line = self.state_machine.get_source_and_line(self.lineno)
            lines = StringList(self.options[key].splitlines(), source=source)
            self.state.nested_parse(lines, line or 0, body)
            field += body
            fields += field
        cost = read_cost(env.srcdir, env.docname)
        if cost is not None:
            seconds = cost.seconds
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


#: The directive and its indented options, as sphinx-gallery leaves them in a notebook.
BOX_IN_MARKDOWN = re.compile(
    r"^\.\. effpt-before-you-start::\n((?:[ \t]+\S.*(?:\n|$))*)", re.MULTILINE
)
#: A role (``:doc:`text <target>` ``, ``:class:`~torch.nn.Module` ``), which Markdown lacks.
ROLE = re.compile(r":[\w:-]+:`(?:([^`<]*?)\s*<[^`>]*>|(~?)([^`]*))`")


def _role_to_markdown(match: re.Match) -> str:
    """A role's text as Sphinx shows it: its title, or its target (``~``: the last part)."""
    text, tilde, target = match.groups()
    if text is not None:
        return text
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def notebook_markdown(text: str) -> str:
    r"""Rewrite a box left as reST in a notebook's Markdown as a quoted Markdown list.

    Examples
    --------
    >>> print(notebook_markdown(
    ...     "# Title\n\n.. effpt-before-you-start::\n"
    ...     "   :learn: - Fit a :class:`~torch.nn.Linear`.\n"
    ...     "           - Save its ``state_dict``\n"
    ...     "             and load it.\n"
    ...     "   :read-first: :doc:`plot_autograd`.\n\nProse."
    ... ))
    # Title
    <BLANKLINE>
    > **Before you start**
    >
    > **What you will learn:**
    >
    > - Fit a `Linear`.
    > - Save its ``state_dict`` and load it.
    >
    > **Read first:** `plot_autograd`.
    <BLANKLINE>
    Prose.
    """

    def box(match: re.Match) -> str:
        options = re.split(
            r"^:([\w-]+):[ \t]*", textwrap.dedent(match.group(1)), flags=re.MULTILINE
        )
        lines = ["> **Before you start**"]
        for key, raw in zip(options[1::2], options[2::2], strict=True):
            value = ROLE.sub(_role_to_markdown, raw)
            label = f"**{PARTS.get(key, key)}:**"
            if value.lstrip().startswith("- "):  # a list: one Markdown item per point
                items = re.split(r"^\s*- ", value.strip(), flags=re.MULTILINE)
                lines += [">", f"> {label}", ">"]
                lines += [f"> - {' '.join(item.split())}" for item in items if item.strip()]
            else:
                lines += [">", f"> {label} {' '.join(value.split())}"]
        return "\n".join(lines) + "\n"

    return BOX_IN_MARKDOWN.sub(box, text)


def rewrite_notebooks(app) -> None:
    """Rewrite the box in every notebook sphinx-gallery wrote, and the zips that hold them.

    Runs after sphinx-gallery wrote the notebooks and zipped each with its script (one
    zip per page, and one of all the notebooks when ``download_all_examples`` is set).
    """
    from sphinx_gallery.downloads import generate_zipfiles  # noqa: PLC0415  (docs-only)
    from sphinx_gallery.utils import zip_files  # noqa: PLC0415

    gallery_conf = getattr(app.config, "sphinx_gallery_conf", None)
    if not gallery_conf:  # a build without the gallery
        return
    changed = False
    for path in sorted(generated_dir(app).glob("**/*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        edited = False
        for cell in notebook.get("cells", []):
            source = cell["source"]
            text = "".join(source) if isinstance(source, list) else source
            if cell["cell_type"] == "markdown" and BOX_IN_MARKDOWN.search(text):
                rewritten = notebook_markdown(text)
                cell["source"] = [rewritten] if isinstance(source, list) else rewritten
                edited = True
        if not edited:
            continue
        changed = True
        path.write_text(json.dumps(notebook, indent=2), encoding="utf-8")  # as sphinx-gallery
        archive, script = path.with_suffix(".zip"), path.with_suffix(".py")
        if archive.is_file() and script.is_file():
            zip_files([script, path], archive, path.parent)
    if changed and gallery_conf.get("download_all_examples"):
        generate_zipfiles(generated_dir(app), app.srcdir, gallery_conf)


def setup(app) -> None:
    app.add_directive("effpt-before-you-start", BeforeYouStart)
    # After sphinx-gallery's own builder-inited handler (priority 500) wrote the notebooks.
    app.connect("builder-inited", rewrite_notebooks, priority=900)
