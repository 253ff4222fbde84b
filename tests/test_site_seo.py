"""What search engines and link previews read, built by Sphinx as the site builds it.

docs/_ext/effpt_site/seo.py with sphinxext-opengraph, on a two-page project built in
English at the root and in Chinese under ``zh_CN/``, as ``nox -s docs`` builds the site.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from docutils import nodes

from effpt_site import seo

DOCS = Path(__file__).resolve().parent.parent / "docs"

CONF = """
import sys
sys.path.insert(0, {ext!r})
extensions = ["sphinxext.opengraph", "effpt_site.seo"]
project = "P"
html_baseurl = "https://x.io/p/"
templates_path = ["_templates"]
# As docs/conf.py: no social cards, the description meta tag from the template.
ogp_social_cards = {{"enable": False}}
ogp_enable_meta_description = False
"""

#: The site's description line, as docs/_templates/layout.html writes it.
LAYOUT = """{% extends "!layout.html" %}
{% block extrahead %}<meta name="description" content="{{ effpt_description | e }}"/>
{% endblock %}
"""

#: A page as the site builds one: the torch badge, the box, then its summary paragraph.
PAGES = {
    "en": (
        "Fit a line\n==========\n\n"
        ".. rst-class:: effpt-badge\n\nVerified on torch 2.6.0 to 2.13.0\n\n"
        ".. container:: effpt-before-you-start\n\n"
        "   You need five minutes and a CPU to run this page.\n\n"
        "This page fits a line to noisy points & prints its slope for each x < 10.\n"
    ),
    "zh_CN": (
        "拟合直线\n========\n\n"
        ".. rst-class:: effpt-badge\n\nVerified on torch 2.6.0 to 2.13.0\n\n"
        ".. container:: effpt-before-you-start\n\n"
        "   运行本页需要五分钟和一个 CPU，不需要别的东西。\n\n"
        "本页用一条直线拟合带噪声的点，并打印它找到的斜率，看看最小二乘法怎样工作。\n"
    ),
}
SUMMARY = {
    "en": "This page fits a line to noisy points & prints its slope for each x < 10.",
    "zh_CN": "本页用一条直线拟合带噪声的点，并打印它找到的斜率，看看最小二乘法怎样工作。",
}
#: Where each edition lives: English at the root, Chinese in its folder.
BASE = {"en": "https://x.io/p/", "zh_CN": "https://x.io/p/zh_CN/"}


def build(tmp_path: Path, language: str, page: str | None = None) -> Path:
    """Build the project in ``language``; returns its output folder (kept between calls)."""
    from sphinx.application import Sphinx

    src = tmp_path / f"src_{language}"
    if not src.is_dir():
        (src / "_templates").mkdir(parents=True)
        (src / "conf.py").write_text(CONF.format(ext=str(DOCS / "_ext")), encoding="utf-8")
        (src / "_templates" / "layout.html").write_text(LAYOUT, encoding="utf-8")
        (src / "other.rst").write_text("Other\n=====\n\nA second page.\n", encoding="utf-8")
    (src / "index.rst").write_text(
        (page or PAGES[language]) + "\n.. toctree::\n\n   other\n", encoding="utf-8"
    )
    out = tmp_path / "html" if language == "en" else tmp_path / "html" / language
    app = Sphinx(
        src,
        src,
        out,
        tmp_path / f"doctrees_{language}",
        "html",
        confoverrides={"language": language},
        status=None,
        warningiserror=True,
    )
    app.build()
    return out


def head_tags(page: Path) -> dict[str, str]:
    """The page's meta tags (by name or property) and its canonical link."""
    text = page.read_text(encoding="utf-8")
    tags = {
        key: html.unescape(value)
        for key, value in re.findall(r'<meta (?:name|property)="([^"]+)" content="([^"]*)"', text)
    }
    canonical = re.search(r'<link rel="canonical" href="([^"]+)"', text)
    tags["canonical"] = canonical.group(1) if canonical else ""
    return tags


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_description_is_the_summary_not_the_badge_or_the_box(tmp_path, language):
    tags = head_tags(build(tmp_path, language) / "index.html")
    assert tags["description"] == SUMMARY[language]
    assert tags["og:description"] == SUMMARY[language]


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_page_addresses_name_the_edition_s_folder(tmp_path, language):
    tags = head_tags(build(tmp_path, language) / "other.html")
    assert tags["canonical"] == BASE[language] + "other.html"
    assert tags["og:url"] == BASE[language] + "other.html"
    assert tags["og:title"] == "Other"
    assert tags["og:site_name"] == "P"
    assert "og:image" not in tags  # no social card is drawn


def test_pages_without_a_doctree_keep_their_description(tmp_path):
    tags = head_tags(build(tmp_path, "en") / "genindex.html")
    assert tags["description"] == "Index of every name documented in P."


def sitemap(out: Path) -> list[str]:
    return re.findall(r"<loc>([^<]+)</loc>", (out / "sitemap.xml").read_text(encoding="utf-8"))


def test_sitemap_lists_every_page_of_both_editions(tmp_path):
    for language, base in BASE.items():
        assert sitemap(build(tmp_path, language)) == [base + "index.html", base + "other.html"]


def test_sitemap_still_lists_every_page_after_an_incremental_build(tmp_path):
    """sphinx-sitemap lists only the pages a build wrote (jdillard/sphinx-sitemap#13)."""
    build(tmp_path, "en")
    out = build(tmp_path, "en", page=PAGES["en"].replace("noisy", "scattered"))
    assert sitemap(out) == [BASE["en"] + "index.html", BASE["en"] + "other.html"]


# -- the description and the sitemap, function by function -------------------------------


def _doctree(*children):
    document = nodes.document(None, None)
    section = nodes.section()
    section += nodes.title(text="Title")
    for child in children:
        section += child
    document += section
    return document


def test_description_is_the_first_paragraph_of_prose():
    badge = nodes.paragraph(text="Verified on torch 2.6.0 to 2.15.0", classes=["effpt-badge"])
    note = nodes.note()
    note += nodes.paragraph(text="Go to the end to download the full example code.")
    prose = nodes.paragraph(text="Autograd records the operations on tensors " * 10)
    text = seo.describe_page("p", "P", _doctree(badge, note, prose), "Effective PyTorch")
    assert text.startswith("Autograd records")
    assert len(text) <= seo.DESCRIPTION_CHARS
    assert text.endswith("…")


def test_pages_without_prose_are_described_by_what_they_are():
    assert "Search" in seo.describe_page("search", "Search", None, "X")
    assert seo.describe_page("other", "Other", _doctree(), "X") == "Other: a page of X."


def test_sitemap_lists_every_page(tmp_path):
    builder = SimpleNamespace(format="html", get_target_uri=lambda doc: f"{doc}.html")
    app = SimpleNamespace(
        builder=builder,
        outdir=str(tmp_path),
        config=SimpleNamespace(html_baseurl="https://effpt.github.io/effpt/"),
        env=SimpleNamespace(found_docs={"index", "auto_examples/basics/plot_x"}),
    )
    seo.write_sitemap(app, None)
    text = (tmp_path / "sitemap.xml").read_text(encoding="utf-8")
    assert "<loc>https://effpt.github.io/effpt/index.html</loc>" in text
    assert "<loc>https://effpt.github.io/effpt/auto_examples/basics/plot_x.html</loc>" in text
