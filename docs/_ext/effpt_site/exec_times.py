"""The execution-times page: seconds (and, on CUDA, peak memory) of every example.

Replaces sphinx-gallery's own page, which loads jQuery and DataTables from CDNs.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

from effpt_site.i18n import freeze, language_of, translator
from effpt_site.layout import example_pages, generated_dir
from effpt_site.outputs import conf_of, read_cost, read_stamp, stamp_file


class ExecutionTimesDirective(SphinxDirective):
    """Seconds of every example, slowest first, with per-family totals."""

    has_content = False

    def run(self):
        t = translator(language_of(self.env))
        generated = generated_dir(self.env)
        memory = bool(self.config.effpt_memory_measured)
        rows, totals = [], {}
        for stem, docname in example_pages(self.env).items():
            cost = read_cost(self.env.srcdir, docname)
            if cost is None:
                continue
            self.env.note_dependency(str(cost.path))
            self.env.note_dependency(str(stamp_file(conf_of(self.env), stem)))
            # The peak GPU memory the site's hook measured (effpt_site.hooks), on CUDA only;
            # none for a page that allocated no CUDA memory (it ran on the CPU).
            mib = (read_stamp(conf_of(self.env), stem) or {}).get("gpu_peak_mib")
            family = Path(docname).parent.name
            rows.append((cost.seconds, mib, family, stem, docname))
            totals[family] = totals.get(family, 0.0) + cost.seconds
        if not rows:
            return [
                freeze(nodes.paragraph(text=t("No example has been executed in this build tree.")))
            ]
        rows.sort(key=lambda row: row[0], reverse=True)
        total = sum(totals.values())
        slowest = rows[0]
        lines = [
            t(
                "The whole gallery ran in **{total} s**; the slowest page is {page} "
                "at **{seconds} s**.",
                total=f"{total:.1f}",
                page=f":doc:`/{slowest[4]}`",
                seconds=f"{slowest[0]:.1f}",
            ),
            "",
        ]
        if not memory:
            lines += [
                t(
                    "This build ran on a CPU, where a page's own peak memory cannot be told "
                    "apart from the memory of the whole build process, so none is shown."
                ),
                "",
            ]
        lines += [
            f".. list-table:: {t('Per family')}",
            "   :header-rows: 1",
            "",
            f"   * - {t('Family')}",
            f"     - {t('Pages')}",
            f"     - {t('Total')}",
        ]
        for family in self.config.effpt_families:
            if family in totals:
                count = sum(1 for r in rows if r[2] == family)
                lines += [
                    f"   * - :doc:`/{generated.name}/{family}/index`",
                    f"     - {count}",
                    f"     - {totals[family]:.1f} s",
                ]
        lines += [
            "",
            f".. list-table:: {t('Per page, slowest first')}",
            "   :header-rows: 1",
            "",
            f"   * - {t('Page')}",
            f"     - {t('Time')}",
        ]
        if memory:
            lines.append(f"     - {t('Peak GPU memory')}")
        for seconds, mib, _family, _stem, docname in rows:
            lines += [f"   * - :doc:`/{docname}`", f"     - {seconds:.1f} s"]
            if memory:
                lines.append(
                    f"     - {t('none, ran on the CPU') if mib is None else f'{mib:.0f} MiB'}"
                )
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source="times"), container)
        return freeze(container).children


def setup(app) -> None:
    app.add_config_value("effpt_memory_measured", False, "env")
    app.add_directive("effpt-execution-times", ExecutionTimesDirective)
