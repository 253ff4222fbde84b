"""Sphinx extension for the effpt site: what readers see around the gallery.

* ``effpt-families``: the landing page's cards, one per lesson family, in reading order.
* ``effpt-measurements``: every effpt.bench record of the gallery, and the source
  material's claims checked against them.
* A freshness line on every executed gallery page (when, on which machine, which torch),
  and checks that fail the build, naming the page: a page without a closing summary, a
  figure that did not render, an example reporting zero execution time, a malformed
  measurement record or one from an unknown page.
* A minigallery of the pages that use it under every public effpt function and class.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.nodes import nested_parse_with_titles

from effpt.bench import format_seconds
from effpt.gallery import STAMP_SUFFIX, read_reading_order

logger = logging.getLogger(__name__)

RECORD_FIELDS = {
    "task": str,
    "variant": str,
    "median_s": (int, float),
    "iqr_s": (int, float),
    "q1_s": (int, float),
    "q3_s": (int, float),
    "repeats": int,
    "number": int,
    "baseline": str,
    "machine": str,
}
SUMMARY_TITLES = ("Summary", "Lessons learned")


# -- the gallery on disk ---------------------------------------------------------------
def _examples(app) -> Path:
    return (Path(app.srcdir) / app.config.sphinx_gallery_conf["examples_dirs"]).resolve()


def _generated(app) -> Path:
    return Path(app.srcdir) / app.config.sphinx_gallery_conf["gallery_dirs"]


def _family_dirs(app) -> list[Path]:
    return [_examples(app) / family for family in app.config.effpt_families]


def _reading_order(folder: Path) -> list[str]:
    return read_reading_order(folder) or sorted(p.name for p in folder.glob("plot_*.py"))


def _header_title_and_intro(folder: Path) -> tuple[str, str]:
    lines = (folder / "GALLERY_HEADER.rst").read_text(encoding="utf-8").splitlines()
    title = lines[0].strip()
    paragraph: list[str] = []
    for line in lines[2:]:
        if line.startswith(".."):
            break
        if not line.strip():
            if paragraph:
                break
            continue
        paragraph.append(line.strip())
    return title, " ".join(paragraph)


def _example_pages(app) -> dict[str, str]:
    """Map each example's stem to its page's docname, for every family."""
    gallery = app.config.sphinx_gallery_conf["gallery_dirs"]
    pages = {}
    for folder in _family_dirs(app):
        for name in _reading_order(folder):
            stem = Path(name).stem
            pages[stem] = f"{gallery}/{folder.name}/{stem}"
    return pages


# -- landing page cards ----------------------------------------------------------------
class FamiliesDirective(Directive):
    """Cards for the lesson families, with the first page's thumbnail."""

    has_content = False

    def run(self):
        app = self.state.document.settings.env.app
        gallery = app.config.sphinx_gallery_conf["gallery_dirs"]
        lines = [".. container:: effpt-cards", ""]
        for number, folder in enumerate(_family_dirs(app), start=1):
            title, intro = _header_title_and_intro(folder)
            order = _reading_order(folder)
            # The first page in reading order that drew a figure gives the card its picture.
            images = _generated(app) / folder.name / "images"
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


# -- measurements ----------------------------------------------------------------------
def load_records(app) -> list[dict]:
    """Every record under auto_examples/_records, validated; bad ones fail the build."""
    folder = _generated(app) / "_records"
    pages = _example_pages(app)
    rows = []
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        if path.stem not in pages:
            msg = f"measurement record {path} comes from an unknown page {path.stem!r}"
            raise ExtensionError(msg)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                record = json.loads(line)
                for field, kind in RECORD_FIELDS.items():
                    if not isinstance(record[field], kind):
                        msg = f"field {field!r} is {type(record[field]).__name__}"
                        raise TypeError(msg)
                if not (math.isfinite(record["median_s"]) and record["median_s"] > 0):
                    msg = f"median_s={record['median_s']!r} is not a positive number"
                    raise ValueError(msg)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                msg = f"malformed measurement record {path}:{number}: {exc!r}"
                raise ExtensionError(msg) from exc
            rows.append({**record, "page": path.stem, "docname": pages[path.stem]})
    return rows


def _ratio(rows: list[dict], row: dict) -> float:
    for other in rows:
        if (other["page"], other["task"], other["variant"]) == (
            row["page"],
            row["task"],
            row["baseline"],
        ):
            return other["median_s"] / row["median_s"]
    return float("nan")


class MeasurementsDirective(Directive):
    """One table of every record, then the source material's claims against them."""

    has_content = False

    def run(self):
        env = self.state.document.settings.env
        rows = load_records(env.app)
        for row in rows:
            env.note_dependency(str(_generated(env.app) / "_records" / f"{row['page']}.jsonl"))
        lines = [
            ".. list-table:: Every timing in the gallery",
            "   :header-rows: 1",
            "   :class: effpt-measurements",
            "",
            "   * - Page",
            "     - Task",
            "     - Variant",
            "     - Median",
            "     - IQR",
            "     - vs baseline",
            "     - Machine",
        ]
        for row in rows:
            ratio = _ratio(rows, row)
            lines += [
                f"   * - :doc:`/{row['docname']}`",
                f"     - {row['task']}",
                f"     - ``{row['variant']}``",
                f"     - {format_seconds(row['median_s'])}",
                f"     - {format_seconds(row['iqr_s'])}",
                f"     - {ratio:.2f}×" if math.isfinite(ratio) else "     - n/a",
                f"     - {row['machine']}",
            ]
        if not rows:
            lines = ["*No page of this build recorded a measurement.*"]
        lines = [*claim_lines(rows), "", *lines]
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source="measurements"), container)
        return container.children


#: The source material's speed claims: (claim, page, task, slow variant, fast variant,
#: the speed-up the source reports). A task ending in "…" matches the last (largest)
#: task of the page with that prefix, since sizes differ between CPU and GPU builds;
#: "a|b" names alternative variants (the first recorded one counts). A claim whose page
#: ran but recorded no such task fails the build.
CLAIMS: list[tuple[str, str, str, str, str, float]] = [
    (
        "Iterating rows with unbind is about 30 % faster than indexing them",
        "plot_overloaded_operators",
        "row sum 500×10",
        "m[i] loop",
        "unbind loop",
        1.3,
    ),
    (
        "One torch.sum is about 100× faster than a loop over rows",
        "plot_overloaded_operators",
        "row sum 500×10",
        "m[i] loop",
        "torch.sum",
        100.0,
    ),
    (
        "The pdist uniformity loss as a matrix product: 19.4 ms → 2.26 ms on a GPU (8.6×)",
        "plot_timing_pytorch_code",
        "uniformity loss, forward + backward",
        "pdist",
        "matmul",
        8.6,
    ),
    (
        "A TorchScript loop is about 10 % faster than the Python loop",
        "plot_batch_gather",
        "batch gather, batch …",
        "python loop",
        "TorchScript loop",
        1.1,
    ),
    (
        "Vectorised batch gather is about 100× faster than the loop",
        "plot_batch_gather",
        "batch gather, batch …",
        "python loop",
        "flat + offset",
        100.0,
    ),
    (
        "Fusing the box IoU takes 238 µs to 40.3 µs on a GPU (5.9×)",
        "plot_fusing_elementwise_work",
        "box IoU, …",
        "eager",
        "torch.compile",
        5.9,
    ),
    (
        "Mixed precision trains the checkerboard up to 2× faster (float16 on a GPU)",
        "plot_checkerboard_amp",
        "checkerboard step, …",
        "float32",
        "float16 autocast|bfloat16 autocast",
        2.0,
    ),
]


def _verdict(ratio: float, promised: float) -> str:
    """'yes' at or above the promised speed-up, 'nearly' within 15 % of it, else 'no'."""
    if ratio >= promised:
        return "yes"
    return "nearly" if ratio >= 0.85 * promised else "no"


def claim_lines(rows: list[dict]) -> list[str]:
    """A table of the source's claims, each with this build's ratio and a verdict."""
    if not CLAIMS:
        return []
    lines = [
        ".. list-table:: The source material's claims, measured by this build",
        "   :header-rows: 1",
        "",
        "   * - Claim",
        "     - Source says",
        "     - This build",
        "     - Met?",
    ]
    for claim, page, task, slow, fast, promised in CLAIMS:
        if task.endswith("…"):
            tasks = [
                r["task"] for r in rows if r["page"] == page and r["task"].startswith(task[:-1])
            ]
            task = tasks[-1] if tasks else task  # noqa: PLW2901  (the concrete task name)
        found = {r["variant"]: r for r in rows if r["page"] == page and r["task"] == task}
        fast = next((v for v in fast.split("|") if v in found), fast)  # noqa: PLW2901
        if not any(r["page"] == page for r in rows):
            # That page has not been executed in this build tree (e.g. a one-example build).
            lines += [f"   * - {claim}", f"     - {promised:g}×", "     - not measured", "     - —"]
            continue
        if slow not in found or fast not in found:
            msg = f"claim {claim!r}: no records for {slow!r} and {fast!r} of {task!r} on {page}"
            raise ExtensionError(msg)
        ratio = found[slow]["median_s"] / found[fast]["median_s"]
        lines += [
            f"   * - {claim} (:doc:`/{found[fast]['docname']}`, {task})",
            f"     - {promised:g}×",
            f"     - {ratio:.2f}× on {found[fast]['machine']}",
            f"     - {_verdict(ratio, promised)}",
        ]
    return lines


# -- checks and the freshness line on gallery pages ------------------------------------
def _check_example_source(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    last_cell = text.rsplit("# %%", 1)[-1]
    prose = [ln[2:].strip() for ln in last_cell.splitlines() if ln.startswith("# ")]
    if not prose or prose[0] not in SUMMARY_TITLES:
        msg = f"{path}: the last cell must be a closing summary titled one of {SUMMARY_TITLES}"
        raise ExtensionError(msg)


_IMAGE = re.compile(r"^\.\. image-sg:: (\S+)", re.MULTILINE)
_TIME = re.compile(r"\*\*Total running time of the script:\*\* \(.*\)")


def _freshness(app, docname: str, source: list[str]) -> None:
    """source-read hook: check a gallery page and add when and where it was executed."""
    pages = {doc: stem for stem, doc in _example_pages(app).items()}
    if docname not in pages:
        return
    stem = pages[docname]
    folder = _examples(app) / Path(docname).parent.name
    _check_example_source(folder / f"{stem}.py")
    text = source[0]
    for image in _IMAGE.findall(text):
        _check_image(Path(app.srcdir) / image.lstrip("/"), docname)
    if str(app.config.plot_gallery).strip().lower() in {"0", "false", "no", "off"}:
        return  # a --no-exec build: pages keep the outputs of their last execution
    not_executed = app.config.effpt_not_executed
    cost = Path(app.srcdir, docname).with_suffix(".cost.json")
    seconds = json.loads(cost.read_text())["time"] if cost.is_file() else 0.0
    if seconds <= 0 and stem not in not_executed:
        msg = (
            f"{docname}: the example reports zero execution time; run it, or list it in "
            "effpt_not_executed in conf.py with the reason"
        )
        raise ExtensionError(msg)
    stamp_file = _generated(app) / "_records" / f"{stem}{STAMP_SUFFIX}"
    if stem in not_executed:
        line = f"*Not executed in this build: {not_executed[stem]}*"
    elif stamp_file.is_file():
        stamp = json.loads(stamp_file.read_text(encoding="utf-8"))
        line = f"*Executed {stamp['executed_at']} on {stamp['machine']} in {seconds:.1f} s.*"
    else:
        msg = f"{docname}: executed without effpt's gallery hook (no {stamp_file.name})"
        raise ExtensionError(msg)
    block = f"\n\n.. rst-class:: effpt-stamp\n\n{line}\n"
    match = _TIME.search(text)
    source[0] = text[: match.end()] + block + text[match.end() :] if match else text + block


def _check_image(path: Path, docname: str) -> None:
    from PIL import Image  # noqa: PLC0415  (docs-only dependency)

    try:
        with Image.open(path) as image:
            image.verify()
    except (OSError, SyntaxError) as exc:
        msg = f"{docname}: figure {path.name} did not render ({exc})"
        raise ExtensionError(msg) from exc


# -- execution times -----------------------------------------------------------------
class ExecutionTimesDirective(Directive):
    """Seconds and peak memory of every example, slowest first, with per-family totals.

    Replaces sphinx-gallery's own page, which loads jQuery and DataTables from CDNs.
    """

    has_content = False

    def run(self):
        app = self.state.document.settings.env.app
        generated = _generated(app)
        rows, totals = [], {}
        for stem, docname in _example_pages(app).items():
            cost = Path(app.srcdir, docname).with_suffix(".cost.json")
            if not cost.is_file():
                continue
            self.state.document.settings.env.note_dependency(str(cost))
            data = json.loads(cost.read_text(encoding="utf-8"))
            family = Path(docname).parent.name
            rows.append((data["time"], data.get("memory", 0.0), family, stem, docname))
            totals[family] = totals.get(family, 0.0) + data["time"]
        if not rows:
            return [nodes.paragraph(text="No example has been executed in this build tree.")]
        rows.sort(reverse=True)
        total = sum(totals.values())
        slowest = rows[0]
        lines = [
            (
                f"The whole gallery ran in **{total:.1f} s**; the slowest page is "
                f":doc:`/{slowest[4]}` at **{slowest[0]:.1f} s**."
            ),
            "",
            ".. list-table:: Per family",
            "   :header-rows: 1",
            "",
            "   * - Family",
            "     - Pages",
            "     - Total",
        ]
        for family in app.config.effpt_families:
            if family in totals:
                count = sum(1 for r in rows if r[2] == family)
                doc = f"/{generated.name}/{family}/index"
                lines += [
                    f"   * - :doc:`{doc}`",
                    f"     - {count}",
                    f"     - {totals[family]:.1f} s",
                ]
        lines += [
            "",
            ".. list-table:: Per page, slowest first",
            "   :header-rows: 1",
            "",
            "   * - Page",
            "     - Time",
            "     - Peak memory",
        ]
        for seconds, memory, _family, _stem, docname in rows:
            lines += [
                f"   * - :doc:`/{docname}`",
                f"     - {seconds:.1f} s",
                f"     - {memory:.0f} MB",
            ]
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source="times"), container)
        return container.children


# -- accessibility fixes for markup that the theme and sphinx-gallery generate ---------
_FIXES = [
    # The sidebar's expand/collapse toggles are icon-only <summary> elements.
    (
        re.compile(r'<summary><span class="toctree-toggle" role="presentation">'),
        (
            '<summary aria-label="Show or hide this section\'s pages">'
            '<span class="toctree-toggle" role="presentation">'
        ),
    ),
    # The search button's label must contain its visible text ("Search Ctrl+K").
    (
        re.compile(r'(class="btn search-button-field[^"]*" title="Search") aria-label="Search"'),
        r"\1",
    ),
    # Gallery thumbnails: the link covering the card gets the page title as its name.
    (
        re.compile(
            r'(<div class="sphx-glr-thumbcontainer"[^>]*>.*?<p>)<a class="reference internal" '
            r'href="([^"]+)"><span class="doc">([^<]+)</span></a>',
            re.DOTALL,
        ),
        r'\1<a class="reference internal" href="\2" aria-label="\3"><span class="doc">\3</span></a>',
    ),
]


def _fix_accessibility(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = original = page.read_text(encoding="utf-8")
        for pattern, replacement in _FIXES:
            text = pattern.sub(replacement, text)
        if text != original:
            page.write_text(text, encoding="utf-8")


# -- no math markup: MathJax would be fetched from a CDN, and it outweighs a page --------
def _forbid_math(app, doctree) -> None:
    if next(iter(doctree.findall(lambda n: isinstance(n, (nodes.math, nodes.math_block)))), None):
        docname = app.env.docname
        msg = (
            f"{docname}: uses math markup, which would make the page load MathJax from a "
            "CDN; write formulas in Unicode or as code (x², log₂ n, ``exp(x)``)"
        )
        raise ExtensionError(msg)


# -- minigalleries in the API reference ------------------------------------------------
def _add_minigallery(app, what, name, obj, options, lines):  # noqa: ARG001
    if what in {"function", "class"} and name.startswith("effpt."):
        lines += [
            "",
            f".. minigallery:: {name}",
            f"   :add-heading: Pages that use ``{name.rsplit('.', 1)[-1]}``",
            "   :heading-level: ^",
            "",
        ]


def setup(app):
    app.add_config_value("effpt_not_executed", {}, "env")
    app.add_config_value("effpt_families", [], "env")
    app.add_directive("effpt-families", FamiliesDirective)
    app.add_directive("effpt-measurements", MeasurementsDirective)
    app.add_directive("effpt-execution-times", ExecutionTimesDirective)
    app.connect("build-finished", _fix_accessibility)
    app.connect("doctree-read", _forbid_math)
    app.connect("source-read", _freshness)
    app.connect("autodoc-process-docstring", _add_minigallery)
    app.add_css_file("effpt.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
