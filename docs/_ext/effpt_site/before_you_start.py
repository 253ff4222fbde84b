"""The "before you start" box a gallery page may put under its title.

A page states it in its own docstring, right after the title, so that it is translated
with the page (its text lands in the page's catalogue)::

    .. effpt-before-you-start::
       :learn: Why ``view`` never copies; when ``reshape`` does.
       :read-first: :doc:`/explanations/timing`
       :needs: A CPU is enough; the last section uses a GPU when there is one.

The box adds the line that runs the page on its own (effpt's install command for the
version the site was built with, :func:`effpt_site.packages.install_command`, then
``python`` and the script's name): the box makes it, so that a release changes one file
(``src/effpt/__init__.py``) and no page states a version that goes stale. It also adds
how long the page ran on the machine that built the site (its sphinx-gallery cost); the
torch versions it was verified on are the badge beside it.
Every gallery page states one, directly under its title, with all three parts
(``tests/test_page_sources.py`` checks each page's source).

sphinx-gallery converts the docstring to Markdown for the page's notebook and leaves
directives it does not know as raw reST; :func:`page_notebook` makes each page's notebook
from its script with sphinx-gallery's own notebook API instead, the box lifted out of the
docstring as its own quoted Markdown cell (:func:`box_markdown`).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import textwrap
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList

from effpt_site.i18n import freeze, translate
from effpt_site.layout import generated_dir
from effpt_site.outputs import read_cost
from effpt_site.packages import install_command

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
        fields += run_alone_field(language, Path(env.docname).name + ".py")
        cost = read_cost(env.srcdir, env.docname)
        if cost is not None:
            seconds = cost.seconds
            field = nodes.field()
            field += freeze(nodes.field_name(text=translate(language, "Run time")))
            if seconds < 1:
                text = translate(language, "under 1 s on the machine that built this site")
            else:
                text = translate(
                    language,
                    "{seconds} s on the machine that built this site",
                    seconds=f"{seconds:.0f}",
                )
            if compiles(Path(env.srcdir, env.docname + ".py")):
                note = translate(
                    language,
                    "The build shares what torch.compile made between pages, so this page, "
                    "run on its own, also pays for compiling and takes longer.",
                )
                # The run time is a phrase without a full stop; the note a sentence.
                text = translate(language, "{run_time}. {note}", run_time=text, note=note)
            field += freeze(nodes.field_body("", nodes.paragraph(text=text)))
            fields += field
        box += fields
        return [box]


def run_alone_field(language: str, script: str) -> nodes.field:
    """The box's "Run it on its own" line: the install command, then ``python`` and the script.

    Examples
    --------
    >>> field = run_alone_field("en", "plot_modules.py")
    >>> print(field.astext())  # doctest: +ELLIPSIS
    Run it on its own
    <BLANKLINE>
    pip install effpt==... --find-links https://.../packages/, then python plot_modules.py
    """
    field = nodes.field()
    field += freeze(nodes.field_name(text=translate(language, "Run it on its own")))
    body = nodes.paragraph()
    body += nodes.literal(text=install_command())
    body += nodes.Text(translate(language, ", then "))
    body += nodes.literal(text=f"python {script}")
    field += freeze(nodes.field_body("", body))
    return field


def compiles(script: Path) -> bool:
    """Whether a gallery page builds code with :func:`torch.compile` (its run time is the
    build's share): a call that names no backend or ``"inductor"``, or the bare decorator,
    in the page or in a script the page writes out as a string (for a child process). A
    call with another backend (``"eager"``, or a function that counts graphs) only
    captures and builds nothing.

    Examples
    --------
    >>> import tempfile
    >>> page = Path(tempfile.mkdtemp()) / "plot_a.py"
    >>> _ = page.write_text("f = torch.compile(g)")
    >>> compiles(page), compiles(page.with_name("plot_missing.py"))
    (True, False)
    >>> _ = page.write_text("f = torch.compile(g, backend='eager')")
    >>> compiles(page)
    False
    >>> _ = page.write_text("@torch.compile\\ndef f(x):\\n    return x")
    >>> compiles(page)
    True
    >>> _ = page.write_text("CHILD = 'f = torch.compile(g, backend=\\"inductor\\")'")
    >>> compiles(page)
    True
    """
    if not script.is_file():
        return False
    return _builds_code(script.read_text(encoding="utf-8"))


def _builds_code(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a string that is not a script
        return False
    calls = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_torch_compile(node.func):
            backend = next((k.value for k in node.keywords if k.arg == "backend"), None)
            if backend is None or (
                isinstance(backend, ast.Constant) and backend.value == "inductor"
            ):
                return True
        elif _is_torch_compile(node) and id(node) not in calls:
            return True  # a decorator, or passed on: the default backend
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "torch.compile" in node.value
            and _builds_code(node.value)
        ):
            return True
    return False


def _is_torch_compile(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "compile"
        and isinstance(node.value, ast.Name)
        and node.value.id == "torch"
    )


#: The directive and its indented options in a page's docstring (reST's explicit markup
#: block: the directive line, then every line indented under it).
BOX_IN_RST = re.compile(r"^\.\. effpt-before-you-start::\n((?:[ \t]+\S.*(?:\n|$))*)", re.MULTILINE)
#: A role (``:doc:`text <target>` ``, ``:class:`~torch.nn.Module` ``), which Markdown lacks.
ROLE = re.compile(r":[\w:-]+:`(?:([^`<]*?)\s*<[^`>]*>|(~?)([^`]*))`")


def _role_to_markdown(match: re.Match) -> str:
    """A role's text as Sphinx shows it: its title, or its target (``~``: the last part)."""
    text, tilde, target = match.groups()
    if text is not None:
        return text
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def box_markdown(options: str) -> str:
    r"""The box for a notebook: its options (as indented under the directive), quoted Markdown.

    Examples
    --------
    >>> print(box_markdown(
    ...     "   :learn: - Fit a :class:`~torch.nn.Linear`.\n"
    ...     "           - Save its ``state_dict``\n"
    ...     "             and load it.\n"
    ...     "   :read-first: :doc:`plot_autograd`.\n"
    ... ))
    > **Before you start**
    >
    > **What you will learn:**
    >
    > - Fit a `Linear`.
    > - Save its ``state_dict`` and load it.
    >
    > **Read first:** `plot_autograd`.
    <BLANKLINE>
    """
    fields = re.split(r"^:([\w-]+):[ \t]*", textwrap.dedent(options), flags=re.MULTILINE)
    lines = ["> **Before you start**"]
    for key, raw in zip(fields[1::2], fields[2::2], strict=True):
        value = ROLE.sub(_role_to_markdown, raw)
        label = f"**{PARTS.get(key, key)}:**"
        if value.lstrip().startswith("- "):  # a list: one Markdown item per point
            items = re.split(r"^\s*- ", value.strip(), flags=re.MULTILINE)
            lines += [">", f"> {label}", ">"]
            lines += [f"> - {' '.join(item.split())}" for item in items if item.strip()]
        else:
            lines += [">", f"> {label} {' '.join(value.split())}"]
    return "\n".join(lines) + "\n"


def page_notebook(script: Path, gallery_conf: dict) -> dict | None:
    """A gallery page's notebook, made from its script with its box as a Markdown cell.

    sphinx-gallery converts a page's reST to Markdown with ``rst2md``, which leaves a
    directive it does not know as raw reST. Here the notebook is made by sphinx-gallery's
    own notebook API (:func:`sphinx_gallery.notebook.jupyter_notebook`) from the script's
    blocks, cleaned as sphinx-gallery cleans them for its notebook (hidden blocks and
    config comments out), with the box lifted out of the docstring: the title, the box
    (:func:`box_markdown`) and the rest of the docstring are three Markdown cells.
    ``None`` when the page states no box (sphinx-gallery's own notebook is then right).
    """
    from sphinx_gallery import py_source_parser as parser  # noqa: PLC0415  (docs-only)
    from sphinx_gallery.notebook import jupyter_notebook  # noqa: PLC0415

    _, blocks = parser.split_code_and_text_blocks(script)
    blocks = [
        parser.Block(kind, parser.remove_ignore_blocks(content), line)
        for kind, content, line in blocks
    ]
    if gallery_conf.get("remove_config_comments"):
        blocks = [
            parser.Block(kind, parser.remove_config_comments(content), line)
            for kind, content, line in blocks
        ]
    if blocks[-1].content.isspace():
        blocks = blocks[:-1]
    docstring = blocks[0]
    box = BOX_IN_RST.search(docstring.content)
    if box is None:
        return None
    head = parser.Block("text", docstring.content[: box.start()], docstring.lineno)
    tail = parser.Block("text", docstring.content[box.end() :], docstring.lineno)
    split = [head, tail] if tail.content.strip() else [head]
    notebook = jupyter_notebook([*split, *blocks[1:]], gallery_conf, script.parent)
    cells = notebook["cells"]
    title = next(i for i, cell in enumerate(cells) if cell["cell_type"] == "markdown")
    box_cell = {"cell_type": "markdown", "metadata": {}, "source": [box_markdown(box.group(1))]}
    cells.insert(title + 1, box_cell)
    return notebook


def _notebook_code(gallery_conf: dict) -> str:
    """What a notebook is made with besides its script: this code, sphinx-gallery, its settings."""
    import sphinx_gallery  # noqa: PLC0415  (docs-only)

    simple = (str, int, float, bool, type(None))
    settings = sorted((k, v) for k, v in gallery_conf.items() if isinstance(v, simple))
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(f"{sphinx_gallery.__version__}\0{settings!r}".encode())
    return digest.hexdigest()


def write_notebooks(app) -> None:
    """Make the notebook of every gallery page that states a box, and the zips that hold it.

    Runs after sphinx-gallery generated the gallery (its notebooks, and one zip of
    script and notebook per page, and one of all notebooks when
    ``download_all_examples`` is set). A notebook is written only when it differs
    from the one on disk, so an unchanged page keeps its files as they were.

    With a doctree folder, ``effpt-notebooks.json`` there records each page's script
    and notebook (their digests) as the last build left them, with the code they were
    made with (:func:`_notebook_code`): a page whose two files are as recorded is not
    made again. sphinx-gallery writing its own notebook (the page ran again) or a
    changed script changes a digest.
    """
    from sphinx_gallery.downloads import generate_zipfiles  # noqa: PLC0415  (docs-only)
    from sphinx_gallery.notebook import save_notebook  # noqa: PLC0415
    from sphinx_gallery.utils import zip_files  # noqa: PLC0415

    gallery_conf = getattr(app.config, "sphinx_gallery_conf", None)
    if not gallery_conf:  # a build without the gallery
        return
    doctrees = getattr(app, "doctreedir", None)
    record = Path(doctrees) / "effpt-notebooks.json" if doctrees else None
    code = _notebook_code(gallery_conf)
    known = _recorded(record, code)
    seen: dict[str, list[str]] = {}
    changed = False
    for path in sorted(generated_dir(app).glob("**/*.ipynb")):
        script = path.with_suffix(".py")
        if not script.is_file():
            continue
        key = path.as_posix()
        state = [_digest(script), _digest(path)]
        if known.get(key) == state:
            seen[key] = state
            continue
        notebook = page_notebook(script, gallery_conf)
        if notebook is not None and json.loads(path.read_text(encoding="utf-8")) != notebook:
            changed = True
            save_notebook(notebook, path)
            archive = path.with_suffix(".zip")
            if archive.is_file():
                zip_files([script, path], archive, path.parent)
        seen[key] = [state[0], _digest(path)]
    if changed and gallery_conf.get("download_all_examples"):
        generate_zipfiles(generated_dir(app), app.srcdir, gallery_conf)
    if record is not None and seen != known:
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"code": code, "pages": seen}, indent=1), encoding="utf-8")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _recorded(record: Path | None, code: str) -> dict[str, list[str]]:
    """The pages ``record`` lists, if it was written by the same ``code``."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (AttributeError, OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("code") != code:
        return {}
    pages = data.get("pages")
    return pages if isinstance(pages, dict) else {}


def setup(app) -> None:
    app.add_directive("effpt-before-you-start", BeforeYouStart)
    # After sphinx-gallery's own builder-inited handler (priority 500) wrote the notebooks.
    app.connect("builder-inited", write_notebooks, priority=900)
