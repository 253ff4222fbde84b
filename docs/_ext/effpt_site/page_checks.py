"""Checks that fail the build, naming the page, and the freshness line on every page.

A gallery page fails the build when: it does not end with a summary cell; its
docstring does not state the install line of this version of effpt; a figure did not
render; the example raised (the traceback's last line is quoted); it reports zero
execution time without being listed in ``effpt_not_executed``; it uses math markup
(MathJax would be fetched from a CDN and outweighs a page). Executed pages get one
line saying when, on which machine and in how long they ran.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError

import effpt
from effpt_site.layout import STAMP_SUFFIX, example_pages, examples_dir, generated_dir

SUMMARY_TITLES = ("Summary", "Lessons learned")


def install_line(script: str | Path) -> str:
    """The sentence every page's docstring ends with, for this version of effpt.

    Examples
    --------
    >>> install_line("examples/basics/plot_modules.py")  # doctest: +ELLIPSIS
    'To run this page on its own: ``pip install effpt==...``, then ``python plot_modules.py``.'
    """
    name = Path(script).name
    return (
        f"To run this page on its own: ``pip install effpt=={effpt.__version__}``, "
        f"then ``python {name}``."
    )


def check_example_source(path: Path) -> None:
    """Fail unless the script ends with a summary cell and states its install line."""
    text = path.read_text(encoding="utf-8")
    last_cell = text.rsplit("# %%", 1)[-1]
    prose = [ln[2:].strip() for ln in last_cell.splitlines() if ln.startswith("# ")]
    if not prose or prose[0] not in SUMMARY_TITLES:
        msg = f"{path}: the last cell must be a closing summary titled one of {SUMMARY_TITLES}"
        raise ExtensionError(msg)
    docstring = ast.get_docstring(ast.parse(text)) or ""
    expected = install_line(path)
    if expected not in " ".join(docstring.split()):
        found = re.search(r"pip install [^`]*", docstring)
        seen = f"it says ``{found.group(0)}``" if found else "it states no install line"
        msg = f"{path}: the docstring must end with {expected!r}; {seen}"
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


_IMAGE = re.compile(r"^\.\. image-sg:: (\S+)", re.MULTILINE)
_TIME = re.compile(r"\*\*Total running time of the script:\*\* \(.*\)")
_MEMORY = re.compile(r"\*\*Estimated memory usage:\*\* +(\S+) MB")


def freshness(app, docname: str, source: list[str]) -> None:
    """source-read hook: check a gallery page and add when and where it was executed."""
    pages = {doc: stem for stem, doc in example_pages(app).items()}
    if docname not in pages:
        return
    stem = pages[docname]
    script = examples_dir(app) / Path(docname).parent.name / f"{stem}.py"
    check_example_source(script)
    text = source[0]
    for image in _IMAGE.findall(text):
        check_image(Path(app.srcdir) / image.lstrip("/"), docname)
    if str(app.config.plot_gallery).strip().lower() in {"0", "false", "no", "off"}:
        return  # a --no-exec build: pages keep the outputs of their last execution
    check_not_failed(app, script, docname)
    not_executed = app.config.effpt_not_executed
    cost = Path(app.srcdir, docname).with_suffix(".cost.json")
    seconds = json.loads(cost.read_text())["time"] if cost.is_file() else 0.0
    if seconds <= 0 and stem not in not_executed:
        msg = (
            f"{docname}: the example reports zero execution time but did not raise; run it, "
            "or list it in effpt_not_executed in conf.py with the reason"
        )
        raise ExtensionError(msg)
    stamp_file = generated_dir(app) / "_records" / f"{stem}{STAMP_SUFFIX}"
    if stem in not_executed:
        line = f"*Not executed in this build: {not_executed[stem]}*"
    elif stamp_file.is_file():
        stamp = json.loads(stamp_file.read_text(encoding="utf-8"))
        line = f"*Executed {stamp['executed_at']} on {stamp['machine']} in {seconds:.1f} s.*"
    else:
        msg = f"{docname}: executed without the site's gallery hook (no {stamp_file.name})"
        raise ExtensionError(msg)
    # sphinx-gallery's label is vague; on CUDA the figure is torch's allocator peak.
    text = _MEMORY.sub(r"**Peak GPU memory allocated by torch:** \1 MiB", text)
    block = f"\n\n.. rst-class:: effpt-stamp\n\n{line}\n"
    match = _TIME.search(text)
    source[0] = text[: match.end()] + block + text[match.end() :] if match else text + block


def forbid_math(app, doctree) -> None:
    """doctree-read hook: no math markup anywhere (MathJax would come from a CDN)."""
    if next(iter(doctree.findall(lambda n: isinstance(n, (nodes.math, nodes.math_block)))), None):
        docname = app.env.docname
        msg = (
            f"{docname}: uses math markup, which would make the page load MathJax from a "
            "CDN; write formulas in Unicode or as code (x², log₂ n, ``exp(x)``)"
        )
        raise ExtensionError(msg)


def setup(app) -> None:
    app.add_config_value("effpt_not_executed", {}, "env")
    app.connect("source-read", freshness)
    app.connect("doctree-read", forbid_math)
