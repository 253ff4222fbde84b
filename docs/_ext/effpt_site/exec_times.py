"""The execution-times page: seconds (and, on CUDA, peak memory) of every example.

Replaces sphinx-gallery's own page, which loads jQuery and DataTables from CDNs.
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.util.nodes import nested_parse_with_titles

from effpt_site.layout import example_pages, generated_dir


class ExecutionTimesDirective(Directive):
    """Seconds of every example, slowest first, with per-family totals."""

    has_content = False

    def run(self):
        app = self.state.document.settings.env.app
        generated = generated_dir(app)
        memory = bool(app.config.effpt_memory_measured)
        rows, totals = [], {}
        for stem, docname in example_pages(app).items():
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
        ]
        if not memory:
            lines += [
                (
                    "This build ran on a CPU, where a page's own peak memory cannot be told "
                    "apart from the memory of the whole build process, so none is shown."
                ),
                "",
            ]
        lines += [
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
                lines += [
                    f"   * - :doc:`/{generated.name}/{family}/index`",
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
        ]
        if memory:
            lines.append("     - Peak GPU memory")
        for seconds, mib, _family, _stem, docname in rows:
            lines += [f"   * - :doc:`/{docname}`", f"     - {seconds:.1f} s"]
            if memory:
                lines.append(f"     - {mib:.0f} MiB")
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source="times"), container)
        return container.children


def setup(app) -> None:
    app.add_config_value("effpt_memory_measured", False, "env")
    app.add_directive("effpt-execution-times", ExecutionTimesDirective)
