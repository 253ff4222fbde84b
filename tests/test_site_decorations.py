"""A gallery page's torch badge and run stamp (docs/_ext/effpt_site/decorations.py).

A one-page gallery, built by sphinx-gallery with the site's own settings for its
running-time and memory lines: the badge sits under the title and the stamp before the
download footer, in the build's language, and neither they nor sphinx-gallery's
running time reach the translators' catalogue. The reST sphinx-gallery writes is left
as it wrote it: the site decorates the doctree.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from minisite import build, one_page_gallery

DOCS = Path(__file__).resolve().parent.parent / "docs"

SCRIPT = '''"""
Fit a line
==========

This page prints a slope.
"""

print("slope", 2.0)

# %%
# Summary
# -------
#
# The slope is printed.
'''


@pytest.fixture(scope="module")
def site_conf():
    """The gallery settings of the real site that decide sphinx-gallery's own lines."""
    conf = runpy.run_path(str(DOCS / "conf.py"))["sphinx_gallery_conf"]
    return {"min_reported_time": conf["min_reported_time"], "show_memory": conf["show_memory"]}


EXTENSIONS = [
    "sphinx_gallery.gen_gallery",
    "effpt_site.compat",
    "effpt_site.page_checks",
    "effpt_site.decorations",
]


def gallery_project(tmp_path, site_conf) -> Path:
    """A one-page gallery (family ``fam``, page ``plot_a``); returns its docs folder."""
    return one_page_gallery(tmp_path, "plot_a.py", SCRIPT, extensions=EXTENSIONS, **site_conf)


@pytest.mark.parametrize(("language", "executed"), [("en", "Executed "), ("zh_CN", "执行，用时")])
def test_badge_sits_under_the_title_and_the_stamp_before_the_footer(
    tmp_path, site_conf, language, executed
):
    docs = gallery_project(tmp_path, site_conf)
    out = tmp_path / "html"
    build(docs, out, "html", language)
    page = (out / "auto" / "fam" / "plot_a.html").read_text(encoding="utf-8")
    title = page.index("</h1>")
    badge = page.index('<p class="effpt-badge"')
    intro = page.index("This page prints a slope.")
    assert title < badge < intro
    assert not page[title + len("</h1>") : badge].strip()  # nothing between the title and it
    # sphinx-gallery's download note, written above the title, is moved below it.
    note = page.index("sphx-glr-download-link-note")
    assert badge < note < intro
    assert page.count("sphx-glr-download-link-note") == 1
    stamp = page.index('class="effpt-stamp sphx-glr-timing"')
    assert page.index("The slope is printed.") < stamp < page.index("sphx-glr-footer-example")
    assert executed in page[stamp : stamp + 300]
    assert "Total running time" not in page
    assert "Estimated memory usage" not in page
    assert page.count("effpt-stamp") == 1
    assert page.count('class="effpt-badge"') == 1


def test_sphinx_gallery_writes_its_page_undecorated_and_no_line_reaches_the_catalogue(
    tmp_path, site_conf
):
    docs = gallery_project(tmp_path, site_conf)
    out = tmp_path / "pot"
    build(docs, out, "gettext")
    generated = (docs / "auto" / "fam" / "plot_a.rst").read_text(encoding="utf-8")
    assert "Total running time" not in generated  # sphinx-gallery's own line is off
    assert "Estimated memory usage" not in generated
    assert "effpt-" not in generated  # nothing edits what sphinx-gallery wrote
    catalogue = (out / "auto.pot").read_text(encoding="utf-8")  # the gallery's pages
    assert 'msgid "Fit a line"' in catalogue  # the page's prose is there
    for line in ("Total running time", "Executed", "torch matrix", "compatibility"):
        assert line not in catalogue


def test_the_download_note_moves_below_the_before_you_start_box():
    from docutils import nodes
    from docutils.utils import new_document
    from sphinx.addnodes import only

    from effpt_site.decorations import move_download_note

    doctree = new_document("page")
    wrapper = only(expr="html")
    wrapper += nodes.note(
        "", nodes.paragraph(text="Go to the end"), classes=["sphx-glr-download-link-note"]
    )
    doctree += wrapper
    section = nodes.section()
    section += nodes.title(text="Title")
    section += nodes.paragraph(text="badge", classes=["effpt-badge"])
    section += nodes.container(classes=["effpt-before-you-start"])
    section += nodes.paragraph(text="First sentence.")
    doctree += section
    assert move_download_note(doctree, section)
    assert [child.tagname for child in doctree.children] == ["section"]
    assert [child.tagname for child in section.children] == [
        "title",
        "paragraph",
        "container",
        "only",
        "paragraph",
    ]
    assert not move_download_note(doctree, section)  # nothing left to move
