"""A one-page gallery site that the site's tests build with the real extension.

Several test files check what a module of docs/_ext/effpt_site does to a page that
sphinx-gallery really executed. They differ in the page, the extensions and a few
settings; the project around the page (examples folder, family ``fam``, conf.py,
index) is this one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace

DOCS = Path(__file__).resolve().parent.parent / "docs"

CONF = """
import sys
sys.path.insert(0, {ext!r})
extensions = {extensions!r}
sphinx_gallery_conf = {{
    "examples_dirs": "../examples",
    "gallery_dirs": "auto",
    "filename_pattern": "/plot_",
    "reset_modules": ("effpt_site.hooks.reset_state",),
    "reset_modules_order": "both",
    "min_reported_time": float("{min_reported_time}"),
    "show_memory": {show_memory!r},
    "write_computation_times": False,
}}
{extra}
def setup(app):
    app.add_config_value("effpt_families", ["fam"], "env")
"""


def family_of_one(root: Path, script: str = '"""\nA\n=\n"""\n') -> Path:
    """Write the family ``fam`` under ``root/examples``, its one page ``plot_a.py``
    holding ``script``; return the page's path."""
    family = root / "examples" / "fam"
    family.mkdir(parents=True)
    (family / "GALLERY_HEADER.rst").write_text(
        "Fam\n---\n\nIntro.\n\n.. reading order:\n   plot_a.py\n", encoding="utf-8"
    )
    page = family / "plot_a.py"
    page.write_text(script, encoding="utf-8")
    return page


def stub_app(root: Path, families: Sequence[str] = ("fam",), **config: object) -> SimpleNamespace:
    """The part of a Sphinx application that the site's readers of a gallery use.

    Its source folder is ``root/docs``, its gallery ``root/examples`` built into
    ``auto``; ``config`` adds settings (``effpt_evidence_dir="evidence"``).
    """
    settings = SimpleNamespace(
        sphinx_gallery_conf={"examples_dirs": "../examples", "gallery_dirs": "auto"},
        effpt_families=list(families),
        **config,
    )
    return SimpleNamespace(srcdir=str(root / "docs"), config=settings)


def one_page_gallery(
    root: Path,
    page: str,
    script: str,
    *,
    extensions: Sequence[str],
    pages: Mapping[str, str] | None = None,
    conf_extra: str = "",
    min_reported_time: float = float("inf"),
    show_memory: bool = False,
) -> Path:
    """Write a gallery of one page under ``root``; return its docs folder.

    ``page`` (``plot_a.py``) holds ``script`` in the family ``fam``. The index's
    toctree lists the gallery, then ``pages`` (name to reST text, written beside the
    index), then the compatibility page that ``effpt_site.compat`` fills in.
    ``conf_extra`` is appended to conf.py (settings of the extensions under test).
    """
    family = root / "examples" / "fam"
    family.mkdir(parents=True)
    (root / "examples" / "GALLERY_HEADER.rst").write_text("Gallery\n=======\n")
    (family / "GALLERY_HEADER.rst").write_text(f"Fam\n---\n\n.. reading order:\n   {page}\n")
    (family / page).write_text(script, encoding="utf-8")
    docs = root / "docs"
    docs.mkdir()
    conf = CONF.format(
        ext=str(DOCS / "_ext"),
        extensions=list(extensions),
        min_reported_time=min_reported_time,
        show_memory=show_memory,
        extra=conf_extra,
    )
    (docs / "conf.py").write_text(conf)
    pages = {**(pages or {}), "compatibility": "Compatibility\n=============\n"}
    for name, text in pages.items():
        (docs / f"{name}.rst").write_text(text)
    toctree = "".join(f"   {name}\n" for name in ("auto/index", *pages))
    (docs / "index.rst").write_text(f"Site\n====\n\n.. toctree::\n\n{toctree}")
    return docs


def build(docs: Path, out: Path, builder: str = "html", language: str = "en") -> None:
    """Build ``docs`` into ``out`` with ``builder``, in ``language``, quietly."""
    from sphinx.application import Sphinx

    doctrees = out.parent / f"{out.name}-doctrees"
    overrides = {"language": language}
    Sphinx(docs, docs, out, doctrees, builder, confoverrides=overrides, status=None).build()
