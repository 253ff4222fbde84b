"""The gallery's cards carry the page's title and their names where they are made
(docs/_ext/effpt_site/thumbnails.py).

The card test builds a small Sphinx project with only the modules that make the markup, so a
name that some later rewrite of the written HTML supplies would not count.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from sphinx.errors import ExtensionError

from effpt_site.thumbnails import introduction, script_of

DOCS = Path(__file__).resolve().parent.parent / "docs"


SCRIPT = '''"""
Fit a line
==========

This page fits a straight line to noisy points and prints its slope.
"""

print(2.0)
'''

CATALOGUE = """msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

msgid "Fit a line"
msgstr "拟合一条直线"
"""


def gallery_project(tmp_path: Path) -> Path:
    """A gallery of one page (not executed) whose title has a Chinese translation."""
    src = tmp_path / "src"
    (src / "examples").mkdir(parents=True)
    (src / "examples" / "GALLERY_HEADER.rst").write_text(
        "Lessons\n=======\n\nEvery lesson.\n", encoding="utf-8"
    )
    (src / "examples" / "plot_line.py").write_text(SCRIPT, encoding="utf-8")
    messages = src / "locale" / "zh_CN" / "LC_MESSAGES" / "auto_examples"
    messages.mkdir(parents=True)
    (messages / "plot_line.po").write_text(CATALOGUE, encoding="utf-8")
    # The site's catalogues hold each card's link, as sphinx-gallery's reST writes it.
    link = 'msgid ":doc:`/auto_examples/plot_line`"\nmsgstr ":doc:`/auto_examples/plot_line`"\n'
    header = CATALOGUE.split("\n\n", maxsplit=1)[0]
    (messages / "index.po").write_text(f"{header}\n\n{link}", encoding="utf-8")
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\n"
        "extensions = ['sphinx_gallery.gen_gallery', 'effpt_site.thumbnails']\n"
        "sphinx_gallery_conf = {'examples_dirs': 'examples', 'gallery_dirs': 'auto_examples',"
        " 'plot_gallery': False, 'write_computation_times': False}\n"
        "locale_dirs = ['locale/']\ngettext_compact = False\nexclude_patterns = ['examples']\n",
        encoding="utf-8",
    )
    (src / "index.rst").write_text(
        "Home\n====\n\n.. toctree::\n\n   auto_examples/index\n", encoding="utf-8"
    )
    return src


@pytest.mark.parametrize(
    ("language", "title", "tooltip"),
    [
        (
            "en",
            "Fit a line",
            "This page fits a straight line to noisy points and prints its slope.",
        ),
        ("zh_CN", "拟合一条直线", "拟合一条直线"),
    ],
)
def test_gallery_card_has_the_page_title_in_the_builds_language_and_names_its_link(
    tmp_path, monkeypatch, language, title, tooltip
):
    from docutils.parsers.rst import directives
    from sphinx.application import Sphinx

    # As in a fresh build: the parser has not yet looked up "image" (a translated build's
    # parser then notes, inside the card, that it uses the English directive name).
    monkeypatch.setattr(directives, "_directives", {})
    src = gallery_project(tmp_path)
    out = tmp_path / "out"
    overrides = {"language": language}
    app = Sphinx(src, src, out, tmp_path / "d", "html", confoverrides=overrides, status=None)
    app.build()
    page = (out / "auto_examples" / "index.html").read_text(encoding="utf-8")
    cards = re.findall(r'<div class="sphx-glr-thumbcontainer".*?</div>\s*</div>', page, re.DOTALL)
    assert len(cards) == 1, page
    card = cards[0]
    assert f'tooltip="{tooltip}"' in card
    assert "<img " in card  # the thumbnail sphinx-gallery wrote
    link = re.search(r"<a [^>]*>", card).group(0)
    assert 'href="plot_line.html"' in link
    assert f'aria-label="{title}"' in link  # sphinx-gallery's CSS hides the link's text
    assert f'<div class="sphx-glr-thumbnail-title">{title}</div>' in card
    if language != "en":
        assert "Fit a line" not in card


# -- the card's source and its errors ------------------------------------------------------


def _gallery_app(tmp_path, examples, gallery):
    conf = {"examples_dirs": examples, "gallery_dirs": gallery}
    return SimpleNamespace(srcdir=str(tmp_path), config=SimpleNamespace(sphinx_gallery_conf=conf))


def test_a_card_finds_its_script_in_whichever_gallery_it_belongs_to(tmp_path):
    app = _gallery_app(tmp_path, ["../examples", "../more"], ["auto", "auto_more"])
    assert script_of(app, "auto/fam/plot_a") == tmp_path / "../examples" / "fam" / "plot_a.py"
    assert script_of(app, "auto_more/x/plot_b") == tmp_path / "../more" / "x" / "plot_b.py"
    one = _gallery_app(tmp_path, "../examples", "auto")  # sphinx-gallery also takes strings
    assert script_of(one, "auto/fam/plot_a") == tmp_path / "../examples" / "fam" / "plot_a.py"


def test_a_card_linking_outside_the_gallery_fails_naming_the_page(tmp_path):
    app = _gallery_app(tmp_path, ["../examples"], ["auto"])
    with pytest.raises(ExtensionError, match=r"'automatic/plot_a' is not a page of the gallery"):
        script_of(app, "automatic/plot_a")  # shares a prefix with "auto", not its folder


def test_the_tooltip_is_the_first_paragraph_of_the_docstring(tmp_path):
    script = tmp_path / "plot_line.py"
    script.write_text(SCRIPT.replace("its slope.", "its slope.\n\nA second paragraph."))
    assert introduction(script) == (
        "This page fits a straight line to noisy points and prints its slope."
    )
