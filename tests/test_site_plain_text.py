"""Each page's plain-text copy and llms.txt (docs/_ext/effpt_site/plain_text.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


# -- Plain-text copies and llms.txt ----------------------------------------------------

CONF = """
import sys
sys.path[:0] = [{ext!r}, {here!r}]
extensions = ["effpt_site.plain_text", "cardext"]
project = "P"
html_baseurl = "https://x.io/p/"
"""

#: A node only the HTML writer knows, as the site's cards are.
CARD_EXTENSION = """
from docutils import nodes
from docutils.parsers.rst import Directive


class card(nodes.General, nodes.Element):
    pass


class Card(Directive):
    has_content = True

    def run(self):
        node = card()
        node += nodes.paragraph(text=" ".join(self.content))
        return [node]


def setup(app):
    app.add_node(card, html=(lambda self, node: None, lambda self, node: None))
    app.add_directive("card", Card)
"""

PAGE = """Fit a line
==========

This page fits a straight line to noisy points and prints the slope it finds.

.. code-block:: python

   slope = 2.0
   print(slope)

.. card::

   Text inside a card.
"""


def _project(root):
    """The one-page project (conf.py, the card extension, PAGE) under ``root/src``."""
    src = root / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        CONF.format(ext=str(DOCS / "_ext"), here=str(src)), encoding="utf-8"
    )
    (src / "cardext.py").write_text(CARD_EXTENSION, encoding="utf-8")
    (src / "index.rst").write_text(PAGE, encoding="utf-8")
    return src


def test_every_page_gets_a_text_copy_with_its_code_and_llms_txt_lists_it(tmp_path):
    from sphinx.application import Sphinx

    src = _project(tmp_path)
    out = tmp_path / "out"
    app = Sphinx(src, src, out, tmp_path / "doctrees", "html", status=None, warningiserror=True)
    app.build()
    text = (out / "index.txt").read_text(encoding="utf-8")
    assert "Fit a line" in text
    assert "   slope = 2.0\n   print(slope)\n" in text  # code keeps its lines
    assert "Text inside a card." in text  # a node the text writer does not know
    llms = (out / "llms.txt").read_text(encoding="utf-8").splitlines()
    assert llms[0] == "# P"
    assert llms[-1] == (
        "- [Fit a line](https://x.io/p/index.txt): This page fits a straight line to noisy "
        "points and prints the slope it finds."
    )


def test_the_text_copy_reads_the_resolved_page_without_copying_it(tmp_path, monkeypatch):
    """Copying every doctree before writing its text was over half of the text copies'
    time in a cold Chinese build; the text writer only reads the tree."""
    import traceback

    from docutils import nodes
    from sphinx.application import Sphinx

    from effpt_site import plain_text

    src = _project(tmp_path)
    copied = []
    real = nodes.Element.deepcopy

    def deepcopy(node):
        if any(frame.name == "text_of" for frame in traceback.extract_stack()):
            copied.append(node)
        return real(node)

    monkeypatch.setattr(nodes.Element, "deepcopy", deepcopy)
    out = tmp_path / "out"
    app = Sphinx(src, src, out, tmp_path / "doctrees", "html", status=None, warningiserror=True)
    app.build()
    assert copied == []
    doctree = app.env.get_and_resolve_doctree("index", app.builder, tags=app.tags)
    before = doctree.pformat()
    text = plain_text.text_of(app.builder, doctree)
    assert doctree.pformat() == before  # the tree is left as it was
    assert text == (out / "index.txt").read_text(encoding="utf-8")
    assert "Text inside a card." in text


def test_llms_txt_describes_again_only_the_pages_read_again(tmp_path, monkeypatch):
    import traceback

    from sphinx.application import Sphinx
    from sphinx.environment import BuildEnvironment

    before = "This second page shows how a page that is read again gets a new description."
    edited = "This second page was edited, and llms.txt now shows its new first paragraph."
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        CONF.format(ext=str(DOCS / "_ext"), here=str(src)), encoding="utf-8"
    )
    (src / "cardext.py").write_text(CARD_EXTENSION, encoding="utf-8")
    (src / "index.rst").write_text(PAGE + "\n.. toctree::\n\n   other\n", encoding="utf-8")
    (src / "other.rst").write_text(f"Other\n=====\n\n{before}\n", encoding="utf-8")
    loaded = []  # the doctrees llms.txt loaded (Sphinx loads the root page's itself)
    real = BuildEnvironment.get_doctree

    def get_doctree(env, name):
        if any(frame.name == "write_llms_txt" for frame in traceback.extract_stack()):
            loaded.append(name)
        return real(env, name)

    monkeypatch.setattr(BuildEnvironment, "get_doctree", get_doctree)

    def build():
        loaded.clear()
        app = Sphinx(src, src, tmp_path / "out", tmp_path / "doctrees", "html", status=None)
        app.build()
        return (tmp_path / "out" / "llms.txt").read_text(encoding="utf-8")

    first = build()
    assert loaded == ["index", "other"]
    assert f"- [Other](https://x.io/p/other.txt): {before}" in first
    assert build() == first
    assert loaded == []  # no page was read again: llms.txt loads no doctree
    (src / "other.rst").write_text(f"Other\n=====\n\n{edited}\n", encoding="utf-8")
    changed = build()
    assert "other" in loaded
    assert changed == first.replace(before, edited)
