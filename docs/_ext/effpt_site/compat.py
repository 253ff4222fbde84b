"""The compatibility page and each gallery page's badge, from the torch matrix's data.

``nox -s compat -- VERSION`` runs the unit tests and every page on one torch version
and writes docs/compat/torch-VERSION.json. This module reads those files (the build
never installs torch itself) and renders, for each page and version, whether it ran,
the warnings raised while it ran, and how its printed output changed between
versions, with timings, rates and addresses masked so that only real changes show.
"""

from __future__ import annotations

import difflib
import html
import itertools
import json
import re
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.addnodes import pending_xref
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

from effpt.machine import Machine
from effpt_site.i18n import freeze, language_of, translate, translator
from effpt_site.layout import example_pages

#: Volatile parts of printed output, replaced before outputs are compared.
MASKS = [
    (re.compile(r"\b0x[0-9a-fA-F]+"), "0x…"),
    (re.compile(r"torch \d+\.\d+\.\d+\S*"), "torch ‹version›"),
    (
        re.compile(r"\d+(?:\.\d+)?× \(\S+–\S+\)(?: (?:faster|slower|inconclusive))?"),
        "‹speed-up›",
    ),
    (re.compile(r"\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?×"), "‹ratio›"),
    (re.compile(r"\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)? ?(?:ns|µs|us|ms|s|min)\b"), "‹time›"),
    (
        re.compile(
            r"\d[\d,]*(?:\.\d+)? ?(?:[KMGT]i?B/s|[KMGTP]?FLOP/s|[KMGT]i?B|bytes/s|images/s)(?!\w)"
        ),
        "‹rate›",
    ),
    (re.compile(r"\d+(?:\.\d+)? ?%"), "‹share›"),  # a profiler's or a timer's share of time
    # A temporary folder (tempfile's 8 random characters) lies elsewhere on every run.
    (re.compile(r"(?:/[^\s/'\"]+)*?/(?:tmp|[A-Za-z][\w-]*-)[a-z0-9_]{8}(?=[/\s'\"]|$)"), "‹tmp›"),
    (re.compile(r"[ \t]+"), " "),  # columns padded to the width of a masked number
]


def mask(text: str) -> str:
    """Replace timings, speed-ups, rates, shares, addresses and temporary folders with placeholders.

    Examples
    --------
    >>> mask("slow  2.00 ms  100 µs  4.0× (3.8–4.2) faster at 0x7f3a")
    'slow ‹time› ‹time› ‹speed-up› at 0x…'
    >>> mask("12.5 GB/s, 3× fewer, torch 2.13.0+cpu")
    '‹rate›, ‹ratio› fewer, torch ‹version›'
    >>> mask("aten::mm   29.71%  at 6,134 images/s in /tmp/effpt-files-z4g453yb/ckpt.pt")
    'aten::mm ‹share› at ‹rate› in ‹tmp›/ckpt.pt'
    """
    for pattern, placeholder in MASKS:
        text = pattern.sub(placeholder, text)
    return text


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def load_matrix(srcdir: str | Path) -> list[dict]:
    """Every docs/compat/torch-*.json, oldest torch first, each run's machine a :class:`Machine`.

    A file written before machines had fields stores describe()'s line: it reads too.
    """
    folder = Path(srcdir) / "compat"
    runs = []
    for path in folder.glob("torch-*.json"):
        run = json.loads(path.read_text(encoding="utf-8"))
        runs.append({**run, "machine": Machine.in_file(run, path)})
    return sorted(runs, key=lambda run: _version_key(run["torch"]))


def badge_text(runs: list[dict], stem: str, language: str = "en") -> str:
    """One line for a page: the torch versions the matrix ran it on, and the outcome.

    Examples
    --------
    The matrix runs on a CPU: the badge says so, so that a GPU build's page does not
    read as verified on the GPU it ran on.

    >>> cpu = Machine("cpu", "x86_64 CPU", 2, None, "2.13.0")
    >>> runs = [{"torch": v, "machine": cpu, "pages": {"plot_a": {"ok": ok}}}
    ...         for v, ok in [("2.6.0", True), ("2.13.0", True), ("2.15.0", True)]]
    >>> badge_text(runs, "plot_a")
    'Verified on a CPU with torch 2.6.0, 2.13.0 and 2.15.0'
    >>> badge_text(runs, "plot_a", "zh_CN")
    '已在 CPU 上用 torch 2.6.0、2.13.0 和 2.15.0 验证'
    >>> runs[1]["pages"]["plot_a"]["ok"] = False
    >>> badge_text(runs, "plot_a")
    'Verified on a CPU with torch 2.6.0 and 2.15.0; failed on 2.13.0'
    >>> badge_text(runs, "plot_new")
    'Not yet run by the torch matrix'
    """
    ran = [(run["torch"], run["pages"][stem]["ok"]) for run in runs if stem in run["pages"]]
    if not ran:
        return translate(language, "Not yet run by the torch matrix")

    def listed(versions: list[str]) -> str:
        if len(versions) == 1:
            return versions[0]
        comma, also = translate(language, ", "), translate(language, " and ")
        return f"{comma.join(versions[:-1])}{also}{versions[-1]}"

    passed = [v for v, ok in ran if ok]
    failed = [v for v, ok in ran if not ok]
    if passed:
        gpu = any(run["machine"].kind == "cuda" for run in runs if run["torch"] in passed)
        where = (
            "Verified on a GPU with torch {versions}"
            if gpu
            else "Verified on a CPU with torch {versions}"
        )
        text = translate(language, where, versions=listed(passed))
    else:
        text = translate(language, "Not verified on any torch")
    if failed:
        text += translate(language, "; ") + translate(
            language, "failed on {versions}", versions=listed(failed)
        )
    return text


def badge(app, stem: str) -> nodes.paragraph:
    """A gallery page's torch badge, linking to the compatibility page.

    :mod:`effpt_site.decorations` puts it under the page's title.
    """
    env = app.env
    language = language_of(app)
    for path in (Path(env.srcdir) / "compat").glob("torch-*.json"):
        env.note_dependency(str(path))
    paragraph = nodes.paragraph(classes=["effpt-badge"])
    paragraph += nodes.Text(
        badge_text(load_matrix(env.srcdir), stem, language) + translate(language, " (")
    )
    ref = pending_xref(
        "", refdomain="std", reftype="doc", reftarget="/compatibility", refexplicit=True
    )
    ref += nodes.inline(text=translate(language, "compatibility"))
    paragraph += ref
    paragraph += nodes.Text(translate(language, ")"))
    return freeze(paragraph)


def _details(summary: str, body: str) -> list[str]:
    """A collapsed block with preformatted text (reST has no native one)."""
    block = (
        f"<details><summary>{html.escape(summary)}</summary>"
        f"<pre class='effpt-diff'>{html.escape(body)}</pre></details>"
    )
    return ["", ".. raw:: html", "", f"   {block}", ""]


def _output(run: dict, stem: str) -> list[str]:
    """A page's output in ``run``, masked, its machine's name replaced: runs compare across machines."""
    return mask(run["pages"][stem]["output"].replace(run["machine"].name, "‹machine›")).splitlines()


def _diff(old: dict, new: dict, stem: str) -> str:
    before, after = _output(old, stem), _output(new, stem)
    lines = difflib.unified_diff(
        before, after, f"torch {old['torch']}", f"torch {new['torch']}", n=1, lineterm=""
    )
    return "\n".join(lines)


class CompatibilityDirective(SphinxDirective):
    """The matrix: per version a summary, then per page its outcome, warnings and diffs."""

    has_content = False

    def run(self):
        t = translator(language_of(self.env))
        runs = load_matrix(self.env.srcdir)
        for path in (Path(self.env.srcdir) / "compat").glob("torch-*.json"):
            self.env.note_dependency(str(path))
        if not runs:
            return [
                freeze(nodes.paragraph(text=t("The torch matrix has not been run for this copy.")))
            ]
        pages = example_pages(self.env)
        versions = [run["torch"] for run in runs]
        lines = [
            f".. list-table:: {t('The matrix runs')}",
            "   :header-rows: 1",
            "",
            "   * - torch",
            f"     - {t('Run on')}",
            f"     - {t('Date')}",
            f"     - {t('Pages that ran')}",
            f"     - {t('Unit tests')}",
        ]
        for run in runs:
            ok = sum(page["ok"] for page in run["pages"].values())
            units = run["unit_tests"]
            bad = units["failures"] + units["errors"]
            lines += [
                f"   * - {run['torch']}",
                f"     - {run['machine']}, Python {run['python']}",
                f"     - {run['date']}",
                f"     - {t('{ok} of {total}', ok=ok, total=len(run['pages']))}",
                "     - "
                + t(
                    "{passed} passed, {failed} failed",
                    passed=units["tests"] - bad - units["skipped"],
                    failed=bad,
                )
                + (t(", {skipped} skipped", skipped=units["skipped"]) if units["skipped"] else ""),
            ]
        lines += [
            "",
            f".. list-table:: {t('Each page on each torch (✓ ran, ✗ failed; warnings raised)')}",
            "   :header-rows: 1",
            "",
            f"   * - {t('Page')}",
            *(f"     - {v}" for v in versions),
        ]
        for stem, docname in pages.items():
            lines.append(f"   * - :doc:`/{docname}`")
            for run in runs:
                page = run["pages"].get(stem)
                if page is None:
                    lines.append(f"     - {t('not run')}")
                    continue
                mark = "✓" if page["ok"] else "✗"
                count = len(page["warnings"])
                warned = t(" ({count} warnings)", count=count) if count > 1 else ""
                warned = t(" (1 warning)") if count == 1 else warned
                lines.append(f"     - {mark}{warned}")
        for stem, docname in pages.items():
            ran = [run for run in runs if stem in run["pages"]]
            if not ran:
                continue
            lines += ["", f".. rubric:: :doc:`/{docname}`", ""]
            for run in ran:
                page = run["pages"][stem]
                if not page["ok"]:
                    lines += _details(
                        t("torch {version}: failed", version=run["torch"]), page["error"] or ""
                    )
                for warning in page["warnings"]:
                    text = f"{warning['category']}: {warning['message']} ({warning['where']})"
                    lines += _details(f"torch {run['torch']}: {warning['category']}", text)
            changes = 0
            for old, new in itertools.pairwise(ran):
                diff = _diff(old, new, stem)
                if diff:
                    changes += 1
                    lines += _details(
                        t(
                            "Output changed from torch {old} to {new}",
                            old=old["torch"],
                            new=new["torch"],
                        ),
                        diff,
                    )
            if not changes and len(ran) > 1:
                lines += [
                    "",
                    "The printed output is the same on every version (timings masked).",
                    "",
                ]
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source="compatibility"), container)
        return freeze(container).children


def setup(app) -> None:
    app.add_directive("effpt-compatibility", CompatibilityDirective)
