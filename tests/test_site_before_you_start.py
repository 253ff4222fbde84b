"""The optional "before you start" box (docs/_ext/effpt_site/before_you_start.py): rendered in
the build's language, in the translators' catalogue and in the notebook.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


# -- The optional "before you start" box ------------------------------------------------

BOX_PAGE = """Fit a line
==========

.. effpt-before-you-start::
   :learn: How ``lstsq`` fits a line.
   :needs: A CPU is enough.

Prose.
"""


def box_project(tmp_path):
    """A one-page Sphinx project whose page states a box; returns its source folder."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\n"
        "extensions = ['effpt_site.before_you_start']\n",
        encoding="utf-8",
    )
    (src / "index.rst").write_text(BOX_PAGE, encoding="utf-8")
    return src


@pytest.mark.parametrize(
    ("language", "heading", "learn"),
    [("en", "Before you start", "What you will learn"), ("zh_CN", "开始之前", "你将学到")],
)
def test_before_you_start_box_renders_its_parts_in_the_builds_language(
    tmp_path, language, heading, learn
):
    from sphinx.application import Sphinx

    src = box_project(tmp_path)
    (src / "index.cost.json").write_text('{"time": 12.3, "memory": 0}', encoding="utf-8")
    out = tmp_path / "out"
    overrides = {"language": language}
    app = Sphinx(src, src, out, tmp_path / "d", "html", confoverrides=overrides, status=None)
    app.build()
    page = (out / "index.html").read_text(encoding="utf-8")
    box = page[page.index("effpt-before-you-start") :]
    assert heading in box
    assert learn in box
    assert "<code" in box
    assert "lstsq" in box
    assert "12 " in box  # the run time from the page's cost
    assert box.index(learn) < box.index("A CPU is enough")
    assert page.index("effpt-before-you-start") < page.index("Prose.")


def test_before_you_start_box_text_reaches_the_translators_catalogue(tmp_path):
    """The box's own words are the page's prose: gettext must extract them, like any paragraph."""
    from sphinx.application import Sphinx

    src = box_project(tmp_path)
    out = tmp_path / "pot"
    Sphinx(src, src, out, tmp_path / "d", "gettext", status=None).build()
    catalogue = (out / "index.pot").read_text(encoding="utf-8")
    assert 'msgid "How ``lstsq`` fits a line."' in catalogue
    assert 'msgid "A CPU is enough."' in catalogue
    assert "Before you start" not in catalogue  # the headings come from the extension's own


BOX_SCRIPT = '''"""
Fit a line
==========

.. effpt-before-you-start::
   :learn: - How ``lstsq`` fits a line.
           - Why :class:`~torch.nn.Linear` wants
             a feature dimension.
   :read-first: :doc:`plot_autograd` for ``grad``.
   :needs: A CPU is enough.

Prose.
"""

# sphinx_gallery_thumbnail_number = 1
print(1)
# sphinx_gallery_start_ignore
assert 1 == 1
# sphinx_gallery_end_ignore

# %%
# More prose.
print(2)
'''


def _gallery_with_one_page(tmp_path):
    """A gallery folder holding BOX_SCRIPT as basics/plot_line.py, and sphinx-gallery's
    default settings for it: (family folder, script, settings)."""
    import copy

    from sphinx_gallery.gen_gallery import DEFAULT_GALLERY_CONF

    family = tmp_path / "auto_examples" / "basics"
    family.mkdir(parents=True)
    script = family / "plot_line.py"
    script.write_text(BOX_SCRIPT, encoding="utf-8")
    conf = copy.deepcopy(DEFAULT_GALLERY_CONF)
    conf |= {"gallery_dirs": "auto_examples", "remove_config_comments": True}
    return family, script, conf


def test_before_you_start_box_is_a_markdown_cell_of_the_notebook_and_its_zip(tmp_path):
    """The page's notebook is sphinx-gallery's own, with the box as a quoted Markdown cell."""
    import zipfile
    from types import SimpleNamespace

    from sphinx_gallery.notebook import jupyter_notebook, save_notebook
    from sphinx_gallery.py_source_parser import split_code_and_text_blocks

    from effpt_site.before_you_start import write_notebooks

    family, script, conf = _gallery_with_one_page(tmp_path)
    conf["first_notebook_cell"] = "%pip install effpt"
    # What sphinx-gallery writes: the box left as raw reST; and its zip.
    theirs = jupyter_notebook(split_code_and_text_blocks(script)[1], conf, family)
    save_notebook(theirs, family / "plot_line.ipynb")
    with zipfile.ZipFile(family / "plot_line.zip", "w") as archive:
        archive.writestr("plot_line.ipynb", "{}")
    app = SimpleNamespace(srcdir=str(tmp_path), config=SimpleNamespace(sphinx_gallery_conf=conf))

    write_notebooks(app)

    with zipfile.ZipFile(family / "plot_line.zip") as archive:
        zipped = json.loads(archive.read("plot_line.ipynb"))
    written = json.loads((family / "plot_line.ipynb").read_text(encoding="utf-8"))
    assert zipped == written
    assert written["metadata"] == theirs["metadata"]
    sources = ["".join(cell["source"]) for cell in written["cells"]]
    kinds = [cell["cell_type"] for cell in written["cells"]]
    assert kinds == ["code", "markdown", "markdown", "markdown", "code", "markdown", "code"]
    assert sources[0] == "%pip install effpt"
    assert sources[1].strip() == "# Fit a line"
    assert sources[2] == (
        "> **Before you start**\n"
        ">\n"
        "> **What you will learn:**\n"
        ">\n"
        "> - How ``lstsq`` fits a line.\n"
        "> - Why `Linear` wants a feature dimension.\n"
        ">\n"
        "> **Read first:** `plot_autograd` for ``grad``.\n"
        ">\n"
        "> **What it needs:** A CPU is enough.\n"
    )
    assert sources[3].strip() == "Prose."
    assert not any("effpt-before-you-start" in text or ":learn:" in text for text in sources)
    # The code as sphinx-gallery's notebook shows it: hidden asserts and config comments out.
    assert sources[4] == "print(1)"
    assert sources[5].strip() == "More prose."
    assert sources[6] == "print(2)"
    once = (family / "plot_line.ipynb").stat().st_mtime_ns
    write_notebooks(app)  # a second build finds the notebook current and leaves it
    assert (family / "plot_line.ipynb").stat().st_mtime_ns == once


def test_before_you_start_box_says_under_a_second_and_warns_when_the_page_compiles(tmp_path):
    """A page that ran in 0.3 s does not read "0 s"; one that compiles says a lone run pays more."""
    from sphinx.application import Sphinx

    src = box_project(tmp_path)
    (src / "index.cost.json").write_text('{"time": 0.3, "memory": 0}', encoding="utf-8")
    (src / "index.py").write_text("step = torch.compile(step)\n", encoding="utf-8")
    out = tmp_path / "out"
    Sphinx(src, src, out, tmp_path / "d", "html", status=None).build()
    box = (out / "index.html").read_text(encoding="utf-8")
    assert "under 1 s on the machine that built this site. The build shares" in box
    assert " 0 s " not in box
    assert "also pays for compiling" in box


def test_an_unchanged_page_is_not_made_into_a_notebook_again(tmp_path, monkeypatch):
    """With a doctree folder, a notebook is remade only when its script or file changed."""
    from types import SimpleNamespace

    from sphinx_gallery.notebook import jupyter_notebook, save_notebook
    from sphinx_gallery.py_source_parser import split_code_and_text_blocks

    from effpt_site import before_you_start

    family, script, conf = _gallery_with_one_page(tmp_path)

    def sphinx_gallery_writes():
        theirs = jupyter_notebook(split_code_and_text_blocks(script)[1], conf, family)
        save_notebook(theirs, family / "plot_line.ipynb")

    sphinx_gallery_writes()
    app = SimpleNamespace(
        srcdir=str(tmp_path),
        doctreedir=str(tmp_path / "doctrees"),
        config=SimpleNamespace(sphinx_gallery_conf=conf),
    )
    made = []
    page_notebook = before_you_start.page_notebook
    monkeypatch.setattr(
        before_you_start, "page_notebook", lambda *a: made.append(1) or page_notebook(*a)
    )
    before_you_start.write_notebooks(app)
    ours = (family / "plot_line.ipynb").read_bytes()
    before_you_start.write_notebooks(app)
    assert len(made) == 1  # the second build trusted the record
    # sphinx-gallery ran the page again and wrote its own notebook: ours is made again
    sphinx_gallery_writes()
    before_you_start.write_notebooks(app)
    assert len(made) == 2
    assert (family / "plot_line.ipynb").read_bytes() == ours
    # the script changed: made again, with the change
    script.write_text(BOX_SCRIPT.replace("print(2)", "print(3)"), encoding="utf-8")
    before_you_start.write_notebooks(app)
    assert len(made) == 3
    assert "print(3)" in (family / "plot_line.ipynb").read_text(encoding="utf-8")


def test_only_pages_that_build_code_are_said_to_pay_for_compiling():
    """A page whose torch.compile calls all name a capturing backend builds nothing; a page
    that compiles in a child process it writes out as a string does."""
    from effpt_site.before_you_start import compiles

    examples = Path(__file__).resolve().parents[1] / "examples"
    assert compiles(examples / "performance" / "plot_compile_without_surprises.py")
    assert compiles(examples / "compilation" / "plot_batch_gather.py")
    assert not compiles(examples / "compilation" / "plot_timing_pytorch_code.py")
    assert not compiles(examples / "debugging" / "plot_learning_rate_schedules.py")
