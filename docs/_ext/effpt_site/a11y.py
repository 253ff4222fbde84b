"""Accessibility fixes for markup that the theme and sphinx-gallery generate.

Each fix names the axe-core rule it satisfies. They run once the HTML is written,
because the markup comes from templates this site does not own.
"""

from __future__ import annotations

import re
from pathlib import Path

FIXES = [
    # summary-name: the sidebar's expand/collapse toggles are icon-only <summary> elements.
    (
        re.compile(r'<summary><span class="toctree-toggle" role="presentation">'),
        (
            '<summary aria-label="Show or hide this section\'s pages">'
            '<span class="toctree-toggle" role="presentation">'
        ),
    ),
    # label-content-name-mismatch: the search button's label must contain its visible text.
    (
        re.compile(r'(class="btn search-button-field[^"]*" title="Search") aria-label="Search"'),
        r"\1",
    ),
    # link-name: the link covering a gallery thumbnail gets the page title as its name.
    (
        re.compile(
            r'(<div class="sphx-glr-thumbcontainer"[^>]*>.*?<p>)<a class="reference internal" '
            r'href="([^"]+)"><span class="doc">([^<]+)</span></a>',
            re.DOTALL,
        ),
        r'\1<a class="reference internal" href="\2" aria-label="\3"><span class="doc">\3</span></a>',
    ),
]


def fix_accessibility(app, exception) -> None:
    """build-finished hook: apply :data:`FIXES` to every HTML page written."""
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = original = page.read_text(encoding="utf-8")
        for pattern, replacement in FIXES:
            text = pattern.sub(replacement, text)
        if text != original:
            page.write_text(text, encoding="utf-8")


def setup(app) -> None:
    app.connect("build-finished", fix_accessibility)
