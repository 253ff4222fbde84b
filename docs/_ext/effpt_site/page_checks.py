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
from docutils.parsers.rst import Directive, directives
from sphinx.errors import ExtensionError

import effpt
from effpt.machine import Machine
from effpt_site.i18n import freeze, language_of, translate
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
_MEMORY = re.compile(r"\*\*Estimated memory usage:\*\* +(\S+) MB\n*")


_TITLE = re.compile(r"^\.\. _sphx_glr_.*:\n\n+[^\n]+\n=+\n", re.MULTILINE)


def add_badge(text: str, stem: str) -> str:
    r"""Put the page's torch-matrix line right under its title.

    Examples
    --------
    >>> page = ".. _sphx_glr_x.py:\n\n\nTitle\n=====\n\nIntro.\n"
    >>> print(add_badge(page, "plot_x"))  # doctest: +NORMALIZE_WHITESPACE
    .. _sphx_glr_x.py:
    <BLANKLINE>
    <BLANKLINE>
    Title
    =====
    <BLANKLINE>
    .. effpt-badge:: plot_x
    <BLANKLINE>
    Intro.
    """
    match = _TITLE.search(text)
    if match is None:
        return text
    block = f"\n.. effpt-badge:: {stem}\n"
    return text[: match.end()] + block + text[match.end() :]


def freshness(app, docname: str, source: list[str]) -> None:
    """source-read hook: check a gallery page and add when and where it was executed."""
    pages = {doc: stem for stem, doc in example_pages(app).items()}
    if docname not in pages:
        return
    stem = pages[docname]
    script = examples_dir(app) / Path(docname).parent.name / f"{stem}.py"
    check_example_source(script)
    text = add_badge(source[0], stem)
    source[0] = text
    for image in _IMAGE.findall(text):
        check_image(Path(app.srcdir) / image.lstrip("/"), docname)
    executing = str(app.config.plot_gallery).strip().lower() not in {"0", "false", "no", "off"}
    cost = Path(app.srcdir, docname).with_suffix(".cost.json")
    seconds = json.loads(cost.read_text())["time"] if cost.is_file() else 0.0
    stamp_file = generated_dir(app) / "_records" / f"{stem}{STAMP_SUFFIX}"
    not_executed = dict(app.config.effpt_not_executed)
    if executing:
        check_not_failed(app, script, docname)
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
    options = {}
    if stem in not_executed:
        options["reason"] = not_executed[stem]
    elif stamp_file.is_file() and seconds > 0:
        # In a --no-exec build the page shows its last execution's output: this stamp.
        stamp = json.loads(stamp_file.read_text(encoding="utf-8"))
        options.update(
            when=stamp["executed_at"],
            machine=str(Machine.in_file(stamp, stamp_file)),
            seconds=f"{seconds:.1f}",
        )
    elif executing:
        msg = f"{docname}: executed without the site's gallery hook (no {stamp_file.name})"
        raise ExtensionError(msg)
    else:
        options["reason"] = "this build executed no examples (--no-exec)"
    memory = _MEMORY.search(text)
    if memory:
        options["memory"] = memory.group(1)
    # sphinx-gallery's own lines change with every run; the stamp directive says the same
    # in the reader's language without making them messages to translate.
    text = _MEMORY.sub("", text)
    block = "\n\n.. effpt-stamp::\n" + "".join(f"   :{k}: {v}\n" for k, v in options.items())
    match = _TIME.search(text)
    source[0] = text[: match.start()] + block + text[match.end() :] if match else text + block


class StampDirective(Directive):
    """When, where and how long a gallery page ran, in the build's language.

    Its text is made here, not parsed from the page, so it is never offered to
    translators as a message (it changes with every run).
    """

    has_content = False
    option_spec = {  # noqa: RUF012  (docutils' interface)
        "when": directives.unchanged,
        "machine": directives.unchanged,
        "seconds": directives.unchanged,
        "memory": directives.unchanged,
        "reason": directives.unchanged,
    }

    def run(self):
        language = language_of(self.state.document.settings.env.app)
        opts = self.options
        if "reason" in opts:
            lines = [
                translate(language, "Not executed in this build: {reason}", reason=opts["reason"])
            ]
        else:
            lines = [
                translate(
                    language,
                    "Executed {when} on {machine} in {seconds} s.",
                    when=opts["when"],
                    machine=opts["machine"],
                    seconds=opts["seconds"],
                )
            ]
        if "memory" in opts:
            lines.append(
                translate(
                    language, "Peak GPU memory allocated by torch: {mib} MiB.", mib=opts["memory"]
                )
            )
        paragraph = nodes.paragraph(classes=["effpt-stamp"])
        paragraph += nodes.emphasis(text=" ".join(lines))
        return [freeze(paragraph)]


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
    app.add_directive("effpt-stamp", StampDirective)
    app.connect("source-read", freshness)
    app.connect("doctree-read", forbid_math)
