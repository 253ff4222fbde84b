"""Checks that fail the build, naming the page.

A gallery page fails the build when: it does not end with a summary cell; its
docstring does not state the install line of this version of effpt; a figure did not
render; the example raised (the traceback's last line is quoted); it reports zero
execution time without being listed in ``effpt_not_executed``, or ran without the
site's gallery hook (:func:`not_executed_reason`, asked by :mod:`effpt_site.decorations`
for the page's stamp); it uses math markup (MathJax would be fetched from a CDN and
outweighs a page); with ``effpt_check_prose_length`` on, its prose runs past
:data:`MAX_PROSE_WORDS` words or one of its paragraphs past :data:`MAX_PARAGRAPH_WORDS`
(:func:`check_prose_length`).
Two gallery pages that share a thumbnail (sphinx-gallery's
placeholder, drawn for a page without a figure, most often) fail it too
(:func:`check_thumbnails`): each page's card shows a figure of its own.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError

from effpt_site.layout import example_pages, examples_dir, page_stem
from effpt_site.outputs import STAMP_SUFFIX, read_cost

SUMMARY_TITLES = ("Summary", "Lessons learned")
MAX_PROSE_WORDS = 1800
MAX_PARAGRAPH_WORDS = 120


#: An install line a page's own text states (the box states it; see check_example_source).
_STATED_INSTALL = re.compile(r"pip install[^`\n]*\beffpt\b[^`\n]*")


def check_example_source(path: Path) -> None:
    """Fail unless the script ends with a summary cell and states no install line itself.

    The page's "before you start" box states the line that runs it alone, made from the
    version the site is built with (:mod:`effpt_site.before_you_start`); a line in the
    page's own text would name a version that goes stale at the next release.

    Examples
    --------
    >>> import tempfile
    >>> page = Path(tempfile.mkdtemp()) / "plot_x.py"
    >>> quotes = chr(34) * 3
    >>> _ = page.write_text(quotes + "\\nT\\n=\\n\\nRun ``pip install effpt==0.1``.\\n" + quotes + "\\n# %%\\n# Summary\\n")
    >>> check_example_source(page)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    sphinx.errors.ExtensionError: ...plot_x.py: the page states an install line of its own (``pip install effpt==0.1``); the box above states it for the version this site serves: remove it
    """
    text = path.read_text(encoding="utf-8")
    last_cell = text.rsplit("# %%", 1)[-1]
    prose = [ln[2:].strip() for ln in last_cell.splitlines() if ln.startswith("# ")]
    if not prose or prose[0] not in SUMMARY_TITLES:
        msg = f"{path}: the last cell must be a closing summary titled one of {SUMMARY_TITLES}"
        raise ExtensionError(msg)
    docstring = ast.get_docstring(ast.parse(text)) or ""
    found = _STATED_INSTALL.search(" ".join(docstring.split()))
    if found:
        msg = (
            f"{path}: the page states an install line of its own (``{found.group(0).strip()}``); "
            "the box above states it for the version this site serves: remove it"
        )
        raise ExtensionError(msg)


def prose_paragraphs(path: Path) -> list[str]:
    """The paragraphs of a gallery script's text blocks (code and output excluded).

    A paragraph is the text between blank lines of a text block, as sphinx-gallery
    splits the script (the docstring is the first text block); a title's underline
    is not a word.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> script = folder / "plot_x.py"
    >>> _ = script.write_text("'''\\nT\\n=\\n\\nOne two.\\n'''\\n# %%\\n# Three\\n#\\n# four five\\nx = 1\\n")
    >>> prose_paragraphs(script)
    ['T =', 'One two.', 'Three', 'four five']
    """
    from sphinx_gallery.py_source_parser import split_code_and_text_blocks  # noqa: PLC0415

    _, blocks = split_code_and_text_blocks(str(path))[:2]
    paragraphs = []
    for block in blocks:
        if block.type != "text":
            continue
        for chunk in re.split(r"\n\s*\n", block.content):
            words = " ".join(w for w in chunk.split() if not re.fullmatch(r"[-=~^*]{3,}", w))
            if words:
                paragraphs.append(words)
    return paragraphs


def check_prose_length(path: Path) -> None:
    """Fail, naming the page, when its prose is too long to read in one sitting.

    The limits are :data:`MAX_PROSE_WORDS` words of text blocks per page and
    :data:`MAX_PARAGRAPH_WORDS` words per paragraph: say a mechanism once and let the
    measurement's output say which way it went.
    """
    paragraphs = prose_paragraphs(path)
    # A directive (the before-you-start box: short fields) is not a paragraph of prose;
    # its words still count towards the page's total.
    problems = [
        f"a paragraph of {len(p.split())} words (over {MAX_PARAGRAPH_WORDS}) starting "
        f"{' '.join(p.split()[:8])!r}"
        for p in paragraphs
        if len(p.split()) > MAX_PARAGRAPH_WORDS and not p.startswith(".. ")
    ]
    total = sum(len(p.split()) for p in paragraphs)
    if total > MAX_PROSE_WORDS:
        problems.insert(0, f"{total} words of prose (over {MAX_PROSE_WORDS})")
    if problems:
        msg = f"{path}: " + "; ".join(problems)
        raise ExtensionError(msg)


def check_image(path: Path, docname: str) -> None:
    """Fail, naming the page, when a figure does not decode."""
    from PIL import Image  # noqa: PLC0415  (docs-only dependency)

    try:
        with Image.open(path) as image:
            image.verify()
    except (OSError, SyntaxError) as exc:
        msg = f"{docname}: figure {path.name} did not render ({exc})"
        raise ExtensionError(msg) from exc


def check_not_failed(app, script: Path, docname: str) -> None:
    """Fail with the example's own error when it raised during this build."""
    failing = app.config.sphinx_gallery_conf.get("failing_examples", {})
    for src, formatted in failing.items():
        if Path(src).resolve() == script.resolve():
            last = [ln for ln in str(formatted).strip().splitlines() if ln.strip()][-1:]
            msg = f"{docname}: the example raised: {last[0] if last else formatted}"
            raise ExtensionError(msg)


def _executing(app) -> bool:
    """Whether this build executes examples (``plot_gallery``; ``--no-exec`` sets it to 0)."""
    return str(app.config.plot_gallery).strip().lower() not in {"0", "false", "no", "off"}


def not_executed_reason(app, docname: str, stem: str, seconds: float, stamp) -> str | None:
    """Why page ``stem`` was not executed in this build, or None when its stamp stands.

    ``seconds`` is its last run time (0 when it never ran) and ``stamp`` its stamp (see
    :mod:`effpt_site.outputs`). Fails the build on a page that reports zero execution
    time without being listed in ``effpt_not_executed``, and on an executed page
    without a stamp (it ran without the site's gallery hook).
    """
    executing = _executing(app)
    not_executed = dict(app.config.effpt_not_executed)
    if executing:
        script = examples_dir(app) / Path(docname).parent.name / f"{stem}.py"
        pattern = app.config.sphinx_gallery_conf.get("filename_pattern", "")
        if seconds <= 0 and pattern and not re.search(pattern, str(script)):
            # A build restricted to some examples (nox -s docs -- --example NAME) that
            # never ran this one: say so instead of failing on its missing cost file.
            not_executed.setdefault(stem, f"this build executed only examples matching {pattern!r}")
        if seconds <= 0 and stem not in not_executed:
            msg = (
                f"{docname}: the example reports zero execution time but did not raise; "
                "run it, or list it in effpt_not_executed in conf.py with the reason"
            )
            raise ExtensionError(msg)
    if stem in not_executed:
        return not_executed[stem]
    if stamp is not None and seconds > 0:
        # In a --no-exec build the page shows its last execution's output: this stamp.
        return None
    if executing:
        msg = f"{docname}: executed without the site's gallery hook (no {stem}{STAMP_SUFFIX})"
        raise ExtensionError(msg)
    return "this build executed no examples (--no-exec)"


def check_page(app, doctree) -> None:
    """doctree-read hook: a gallery page's script, figures, and whether it raised."""
    from sphinx_gallery.directives import imgsgnode  # noqa: PLC0415  (docs-only dependency)

    docname = app.env.docname
    stem = page_stem(app, docname)
    if stem is None:
        return
    script = examples_dir(app) / Path(docname).parent.name / f"{stem}.py"
    check_example_source(script)
    if app.config.effpt_check_prose_length:
        check_prose_length(script)
    for image in doctree.findall(imgsgnode):
        check_image(Path(app.srcdir) / image["uri"].lstrip("/"), docname)
    if _executing(app):
        check_not_failed(app, script, docname)


def forbid_math(app, doctree) -> None:
    """doctree-read hook: no math markup anywhere (MathJax would come from a CDN)."""
    if next(iter(doctree.findall(lambda n: isinstance(n, (nodes.math, nodes.math_block)))), None):
        docname = app.env.docname
        msg = (
            f"{docname}: uses math markup, which would make the page load MathJax from a "
            "CDN; write formulas in Unicode or as code (x², log₂ n, ``exp(x)``)"
        )
        raise ExtensionError(msg)


def thumbnail_file(app, docname: str) -> Path:
    """Where sphinx-gallery saved the card picture of gallery page ``docname``."""
    page = Path(app.srcdir) / docname
    return page.parent / "images" / "thumb" / f"sphx_glr_{page.name}_thumb.png"


def check_thumbnails(app, env) -> None:  # noqa: ARG001  (Sphinx's signature)
    """env-check-consistency: fail when two gallery pages' thumbnails are the same picture.

    Only pages that have run count (sphinx-gallery's cost file says how long): one this
    build never executed shows the placeholder until it runs.
    """
    by_picture: dict[str, list[str]] = {}
    for docname in example_pages(app).values():
        path = thumbnail_file(app, docname)
        cost = read_cost(app.srcdir, docname)
        if cost is None or cost.seconds <= 0 or not path.is_file():
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        by_picture.setdefault(digest, []).append(docname)
    shared = [sorted(pages) for pages in by_picture.values() if len(pages) > 1]
    if shared:
        groups = "; ".join(", ".join(pages) for pages in sorted(shared))
        msg = (
            f"gallery pages share one thumbnail: {groups} (a page without a figure gets "
            "sphinx-gallery's placeholder; give each page a figure of its own, or name the "
            "one its card shows with sphinx_gallery_thumbnail_number)"
        )
        raise ExtensionError(msg)


def setup(app) -> None:
    app.add_config_value("effpt_not_executed", {}, "env")
    # docs/conf.py turns it on; off, a unit test's bare app skips it.
    app.add_config_value("effpt_check_prose_length", False, "env")
    # Before effpt_site.decorations (priority 500), which asks not_executed_reason.
    app.connect("doctree-read", check_page, priority=450)
    app.connect("doctree-read", forbid_math)
    app.connect("env-check-consistency", check_thumbnails)
