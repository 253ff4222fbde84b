"""The sidebar's toggles carry their names where they are made (docs/_ext/effpt_site/a11y.py).

The test builds a small Sphinx project with only the module that makes the markup, so a
name that some later rewrite of the written HTML supplies would not count. (Gallery cards
are named where effpt_site.thumbnails makes them: tests/test_site_thumbnails.py.)
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"


SECTIONS = {
    "index": "Home\n====\n\n.. toctree::\n\n   part\n",
    "part": "Part\n====\n\n.. toctree::\n\n   chapter\n",
    "chapter": "Chapter\n=======\n\n.. toctree::\n\n   section\n",
    "section": "Section\n=======\n\nText.\n",
}


@pytest.mark.parametrize(
    ("language", "name"),
    [("en", "Show or hide this section's pages"), ("zh_CN", "展开或收起本节的页面")],
)
def test_sidebar_toggles_are_named_in_the_builds_language(tmp_path, language, name):
    """pydata-sphinx-theme writes each toggle as an icon-only <summary> (axe: summary-name)."""
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    (src / "_templates").mkdir(parents=True)
    shutil.copy(DOCS / "_templates" / "sidebar-nav-bs.html", src / "_templates")
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\n"
        "extensions = ['effpt_site.a11y']\nhtml_theme = 'pydata_sphinx_theme'\n"
        "templates_path = ['_templates']\n",
        encoding="utf-8",
    )
    for page_name, text in SECTIONS.items():
        (src / f"{page_name}.rst").write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    overrides = {"language": language}
    app = Sphinx(src, src, out, tmp_path / "d", "html", confoverrides=overrides, status=None)
    app.build()
    # The theme builds the sidebar of part.html and reuses it, written out, for the others.
    for page_name in ("part", "chapter", "section"):
        page = (out / f"{page_name}.html").read_text(encoding="utf-8")
        summaries = re.findall(r"<summary[^>]*>", page)
        assert summaries, f"the sidebar of {page_name}.html has no toggle to name"
        assert all(html.unescape(s) == f'<summary aria-label="{name}">' for s in summaries), (
            page_name,
            summaries,
        )
