"""What a reader can do from a page: report a problem, open a gallery page in Colab.

The Colab links point at the notebooks branch that the Pages workflow publishes; nothing
here can reach Colab or GitHub, so these tests check the links' form and that every
link's target is among what the workflow publishes.
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path, PurePosixPath
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from minisite import family_of_one, stub_app

import effpt
from effpt.machine import Machine
from effpt_site import reader_links
from effpt_site.i18n import translate
from effpt_site.layout import example_pages

H100 = Machine("cuda", "NVIDIA H100 80GB HBM3", None, "13.0", "2.13.0")

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"


@pytest.fixture(scope="module")
def conf():
    """docs/conf.py's settings, read as Sphinx reads them (no network probe)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("EFFPT_INTERSPHINX", "0")
    try:
        return runpy.run_path(str(DOCS / "conf.py"))
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def site_app(conf):
    config = SimpleNamespace(
        sphinx_gallery_conf=conf["sphinx_gallery_conf"], effpt_families=conf["effpt_families"]
    )
    return SimpleNamespace(srcdir=str(DOCS), config=config)


# -- Report a problem ------------------------------------------------------------------


def test_report_link_is_a_new_issue_prefilled_and_encoded():
    url = reader_links.issue_url(
        "https://github.com/effpt/effpt",
        page="https://effpt.github.io/effpt/zh_CN/auto_examples/basics/plot_modules.html",
        title="Modules & parameters: 100% #1?",
        machine="x86_64 CPU (Intel Xeon), 2 threads · torch 2.13.0",
        language="zh_CN",
        effpt_version="0.2.0",
        torch_version="2.13.0+cpu",
    )
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == (
        "https",
        "github.com",
        "/effpt/effpt/issues/new",
    )
    # Everything a URL treats specially is percent-encoded; spaces are %20, never '+'.
    assert " " not in url
    assert "+" not in parts.query
    assert "#" not in url
    assert "&" not in parts.query.replace("&body=", "")
    fields = parse_qs(parts.query, strict_parsing=True)
    assert fields["title"] == ['Problem on "Modules & parameters: 100% #1?"']
    body = fields["body"][0].splitlines()
    assert body[:4] == [
        "Page: https://effpt.github.io/effpt/zh_CN/auto_examples/basics/plot_modules.html",
        "effpt: 0.2.0",
        "torch: 2.13.0+cpu",
        "Machine of the build: x86_64 CPU (Intel Xeon), 2 threads · torch 2.13.0",
    ]
    # The prompt is in the reader's language.
    assert body[-1] == translate("zh_CN", "What went wrong, and what did you expect?")
    assert body[-1] != "What went wrong, and what did you expect?"


def test_report_link_defaults_to_this_effpt_and_torch():
    import torch

    url = reader_links.issue_url("https://github.com/effpt/effpt", page="p", title="t", machine="m")
    body = parse_qs(urlsplit(url).query)["body"][0]
    assert f"effpt: {effpt.__version__}\n" in body
    assert f"torch: {torch.__version__}\n" in body


def test_a_gallery_page_reports_the_machine_of_its_stamp(tmp_path):
    family_of_one(tmp_path)
    records = tmp_path / "docs" / "auto" / "_records"
    records.mkdir(parents=True)
    (records / "plot_a.stamp.json").write_text(
        json.dumps({"executed_at": "2026-11-24 20:00 UTC", "machine": H100.to_dict()}),
        encoding="utf-8",
    )
    app = stub_app(tmp_path)
    assert reader_links.page_machine(app, "auto/fam/plot_a") == str(H100)
    # Any other page names the machine that built the site.
    assert reader_links.page_machine(app, "index") == reader_links.build_machine()
    # A stamp whose machine lacks a field fails naming the stamp.
    stamp = records / "plot_a.stamp.json"
    stamp.write_text(json.dumps({"executed_at": "x", "machine": {"kind": "cuda"}}))
    with pytest.raises(ValueError, match=rf"{stamp}: field 'machine': machine: missing fields"):
        reader_links.page_machine(app, "auto/fam/plot_a")


@pytest.mark.parametrize(
    "bad", ["https://gitlab.com/a/b", "https://github.com/a", "github.com/a/b"]
)
def test_a_repository_that_is_not_on_github_fails_naming_the_setting(bad):
    with pytest.raises(ValueError, match="effpt_repository"):
        reader_links.repository_path(bad)


def test_the_new_strings_are_translated():
    for text in (
        "Report a problem with this page",
        "What went wrong, and what did you expect?",
        "Run in Google Colab",
    ):
        assert translate("zh_CN", text) != text, text


# -- Open in Colab ---------------------------------------------------------------------


def _publish_steps():
    """The workflow's upload of the notebooks and the job that pushes them to a branch."""
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    jobs = workflow["jobs"]
    (upload,) = [
        step
        for step in jobs["build"]["steps"]
        if step.get("uses", "").startswith("actions/upload-artifact@")
        and step["with"]["name"] == "notebooks"
    ]
    (publisher,) = [
        job
        for job in jobs.values()
        if any(
            step.get("uses", "").startswith("actions/download-artifact@")
            and step["with"]["name"] == "notebooks"
            for step in job["steps"]
        )
    ]
    return upload, publisher


def _published_path(pattern: str, path: str) -> str | None:
    """Where upload-artifact puts ``path`` matched by ``pattern``: below the first wildcard."""
    # A glob's wildcards stay within one folder, as in upload-artifact.
    parts = PurePosixPath(pattern).parts
    if len(PurePosixPath(path).parts) != len(parts) or not PurePosixPath(path).match(pattern):
        return None
    fixed = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
    root = PurePosixPath(*parts[:fixed])
    return str(PurePosixPath(path).relative_to(root))


def test_colab_link_has_colabs_github_form():
    url = reader_links.colab_url(
        "https://github.com/effpt/effpt", "notebooks", "basics/plot_modules.ipynb"
    )
    assert url == (
        "https://colab.research.google.com/github/effpt/effpt/blob/notebooks/"
        "basics/plot_modules.ipynb"
    )


def test_every_gallery_notebook_is_published_where_its_colab_link_points(conf, site_app):
    upload, publisher = _publish_steps()
    pattern = upload["with"]["path"]
    assert upload["with"].get("if-no-files-found") == "error"
    gallery = conf["sphinx_gallery_conf"]["gallery_dirs"]
    pages = example_pages(site_app)
    assert pages, "no gallery page found"
    # The notebooks sphinx-gallery writes: beside each generated page.
    generated = {doc: f"docs/{doc}.ipynb" for doc in pages.values()}
    built = sorted(p.relative_to(ROOT).as_posix() for p in (DOCS / gallery).glob("*/*.ipynb"))
    for path in built:
        assert path in generated.values() or "/plot_" not in path, path
    for doc, path in generated.items():
        published = _published_path(pattern, path)
        assert published is not None, f"{path} is not matched by the workflow's {pattern!r}"
        assert published == reader_links.notebook_path(doc, gallery)
        url = reader_links.colab_url(
            conf["effpt_repository"], conf["effpt_notebooks_branch"], published
        )
        assert url.endswith(f"/blob/{conf['effpt_notebooks_branch']}/{published}")
    # The job pushes the downloaded folder, as it is, to the branch the links name.
    (download,) = [s for s in publisher["steps"] if s.get("uses", "").startswith("actions/")]
    (push,) = [s for s in publisher["steps"] if "git push" in s.get("run", "")]
    assert push["working-directory"] == download["with"]["path"]
    assert push["env"]["BRANCH"] == conf["effpt_notebooks_branch"]
    assert 'refs/heads/$BRANCH"' in push["run"]
    assert "github.com/${GITHUB_REPOSITORY}.git" in push["run"]
    assert conf["effpt_repository"] == conf["REPOSITORY"]


def test_only_the_publishing_job_may_write_and_only_contents():
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert workflow["permissions"] == {"contents": "read"}
    _, publisher = _publish_steps()
    assert publisher["permissions"] == {"contents": "write"}
    assert "permissions" not in workflow["jobs"]["build"]


def test_the_notebooks_first_cell_installs_effpt_and_keeps_colabs_torch(conf):
    first = conf["sphinx_gallery_conf"]["first_notebook_cell"].splitlines()
    installs = [line for line in first if "pip install" in line]
    # %pip (not !pip) installs into the kernel's own environment; one package, pinned,
    # from the site's own packages/ folder, and no torch named: pip keeps an installed
    # torch that satisfies effpt's torch>=2.6.
    assert installs == [
        f"%pip install effpt=={effpt.__version__} --find-links {conf['html_baseurl']}packages/"
    ]
    assert not any("torch" in line and "install" in line for line in first)
    assert not any("--upgrade" in line or "-U " in line for line in first)


# -- Related pages and the index of torch names ------------------------------------------


def test_related_pages_are_other_gallery_pages_of_this_site(site_app):
    from effpt_site import related

    paths = related.scripts(site_app)
    assert all(path.is_file() for path in paths.values())
    recommended = related.recommend(paths)
    assert set(recommended) == set(paths)
    for doc, others in recommended.items():
        assert len(others) == min(related.RELATED, len(paths) - 1)
        assert doc not in others
        assert set(others) <= set(paths)


def test_torch_index_keeps_torch_names_and_maps_them_to_pages(tmp_path):
    from effpt_site import related

    docs = tmp_path / "docs"
    target = docs / "auto_examples" / "basics"
    entry = ["plot_a.py", str(tmp_path / "examples" / "basics"), str(target), "i", "A"]
    other = ["plot_b.py", str(tmp_path / "examples" / "basics"), str(target), "i", "B"]
    backrefs = {
        "torch.cat": [other, entry],
        "torch.nn.Linear": [entry],
        "torchvision.io": [entry],  # not torch itself
        "torch.Adam": [entry],  # shortened past what exists (torch.optim.Adam)
        "torch.nn.modules.loss._WeightedLoss": [entry],  # private
        "effpt.bench.compare": [entry],
    }
    assert related.torch_uses(backrefs, docs) == {
        "torch.cat": ["auto_examples/basics/plot_a", "auto_examples/basics/plot_b"],
        "torch.nn.Linear": ["auto_examples/basics/plot_a"],
    }


def test_the_gallery_records_torch_names(conf):
    assert "torch" in conf["sphinx_gallery_conf"]["doc_module"]
    assert conf["sphinx_gallery_conf"]["backreferences_dir"]


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


def test_every_page_gets_a_text_copy_with_its_code_and_llms_txt_lists_it(tmp_path):
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        CONF.format(ext=str(DOCS / "_ext"), here=str(src)), encoding="utf-8"
    )
    (src / "cardext.py").write_text(CARD_EXTENSION, encoding="utf-8")
    (src / "index.rst").write_text(PAGE, encoding="utf-8")
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


def test_before_you_start_box_is_a_markdown_cell_of_the_notebook_and_its_zip(tmp_path):
    """The page's notebook is sphinx-gallery's own, with the box as a quoted Markdown cell."""
    import copy
    import zipfile
    from types import SimpleNamespace

    from sphinx_gallery.gen_gallery import DEFAULT_GALLERY_CONF
    from sphinx_gallery.notebook import jupyter_notebook, save_notebook
    from sphinx_gallery.py_source_parser import split_code_and_text_blocks

    from effpt_site.before_you_start import write_notebooks

    family = tmp_path / "auto_examples" / "basics"
    family.mkdir(parents=True)
    script = family / "plot_line.py"
    script.write_text(BOX_SCRIPT, encoding="utf-8")
    conf = copy.deepcopy(DEFAULT_GALLERY_CONF)
    conf |= {"gallery_dirs": "auto_examples", "remove_config_comments": True}
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
