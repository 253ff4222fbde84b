"""The effpt a reader installs is served by the site: the wheel and sdist it was built with.

Every page's install line names ``--find-links`` at the site's ``packages/`` folder, so
the line works on the day the site is published whether or not effpt reached PyPI.
These tests build the real wheel and sdist, let the real pip read the folder, and
damage a built page to see the build refuse a version the site does not serve.
"""

from __future__ import annotations

import json
import re
import runpy
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from sphinx.errors import ExtensionError

import effpt
from effpt_site import packages
from effpt_site.before_you_start import run_alone_field

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
VERSION = effpt.__version__


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Path:
    """A site folder whose packages/ holds this effpt's wheel, sdist and index."""
    site = tmp_path_factory.mktemp("site")
    packages.write_packages(ROOT, site / packages.FOLDER)
    return site


def test_the_install_line_is_derived_from_the_version_and_the_sites_address():
    line = packages.install_command()
    assert line == f"pip install effpt=={VERSION} --find-links {packages.SITE}packages/"
    field = run_alone_field("en", "plot_a.py")
    assert field.astext() == f"Run it on its own\n\n{line}, then python plot_a.py"


def test_the_site_serves_the_wheel_and_sdist_of_this_effpt(served):
    folder = served / packages.FOLDER
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        f"effpt-{VERSION}-py3-none-any.whl",
        f"effpt-{VERSION}.tar.gz",
        "index.html",
    ]
    assert packages.served_versions(folder) == {VERSION}
    with zipfile.ZipFile(folder / f"effpt-{VERSION}-py3-none-any.whl") as wheel:
        files = wheel.namelist()
    assert "effpt/__init__.py" in files
    assert "effpt/claims.py" in files
    index = (folder / "index.html").read_text(encoding="utf-8")
    assert f'href="effpt-{VERSION}-py3-none-any.whl#sha256=' in index
    assert f'href="effpt-{VERSION}.tar.gz#sha256=' in index


def test_pip_finds_this_effpt_in_the_served_folder_alone(served, tmp_path):
    """The real pip, offline, reading the folder the line names (its index page)."""
    folder = served / packages.FOLDER
    for kind in ("--only-binary=:all:", "--no-binary=:all:"):
        out = tmp_path / kind.strip("-").split("=")[0]
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--no-index",
                kind,
                "--find-links",
                (folder / "index.html").as_uri(),
                "--dest",
                str(out),
                f"effpt=={VERSION}",
            ],
            check=True,
            capture_output=True,
        )
        (got,) = out.iterdir()
        assert got.read_bytes() == (folder / got.name).read_bytes()


def test_a_folder_with_a_wheel_but_no_sdist_does_not_serve_that_version(tmp_path):
    (tmp_path / "effpt-9.9.9-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "effpt-1.0.0-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "effpt-1.0.0.tar.gz").write_bytes(b"")
    assert packages.served_versions(tmp_path) == {"1.0.0"}


def _built_page(site: Path, text: str) -> Path:
    page = site / "auto_examples" / "basics" / "plot_a.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    # Sphinx wraps each word of an inline literal in a span.
    words = "".join(f'<span class="pre">{w}</span> ' for w in text.split())
    page.write_text(f"<p>To run: <code>{words}</code>, then</p>", encoding="utf-8")
    return page


def test_every_built_install_line_names_a_served_version(served):
    _built_page(served, packages.install_command())
    notebook = served / "_downloads" / "x" / "plot_a.ipynb"
    notebook.parent.mkdir(parents=True)
    cell = {"cell_type": "code", "source": [f"%{packages.install_command()}\n"]}
    notebook.write_text(json.dumps({"cells": [cell]}), encoding="utf-8")
    assert packages.check_install_lines(served) == 2


def test_a_translated_page_whose_line_ends_at_a_full_width_comma_passes(served):
    """The Chinese pages write ``…/packages/``，再: the comma is no part of the address."""
    page = _built_page(served, f"先 {packages.install_command()}，再")
    assert packages.check_install_lines(served) >= 1
    page.unlink()


def test_a_page_naming_a_version_the_site_does_not_serve_fails_the_build(served):
    page = _built_page(served, f"pip install effpt==0.0.1 --find-links {packages.SITE}packages/")
    with pytest.raises(
        ExtensionError,
        match=r"plot_a\.html.*effpt==0\.0\.1.*serves " + re.escape(effpt.__version__),
    ):
        packages.check_install_lines(served)
    page.unlink()


def test_a_page_whose_line_does_not_use_the_served_folder_fails_the_build(served):
    page = _built_page(served, f"pip install effpt=={VERSION}")
    with pytest.raises(ExtensionError, match=r"plot_a\.html.*--find-links"):
        packages.check_install_lines(served)
    page.unlink()


def test_the_notebooks_first_cell_is_the_install_line():
    conf = runpy.run_path(str(DOCS / "conf.py"))
    first = conf["sphinx_gallery_conf"]["first_notebook_cell"].splitlines()
    assert first[0] == f"%{packages.install_command()}"
    assert conf["html_baseurl"] == packages.SITE


def test_no_prose_page_repeats_the_version():
    """The README and the site's prose pages derive the line; only gallery docstrings state it.

    (Each gallery docstring states the line literally, so that a downloaded script carries
    it; page_checks fails the build when one differs from src/effpt/__init__.py.)
    """
    stated = []
    for path in [ROOT / "README.md", *DOCS.glob("**/*.md")]:
        if f"effpt=={VERSION}" in path.read_text(encoding="utf-8"):
            stated.append(path.relative_to(ROOT).as_posix())
    assert not stated, f"these repeat effpt's version: {stated}"


def _copy_of_effpt(root: Path) -> Path:
    import shutil

    root.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "src" / "effpt", root / "src" / "effpt")
    return root


def test_the_packages_are_built_again_only_when_their_sources_change(tmp_path, monkeypatch):
    root = _copy_of_effpt(tmp_path / "checkout")
    folder, record = tmp_path / "site" / packages.FOLDER, tmp_path / "doctrees" / "p.json"
    builds = []
    build = packages.build_distributions
    monkeypatch.setattr(packages, "build_distributions", lambda *a: builds.append(1) or build(*a))
    first = packages.write_packages(root, folder, record)
    wheel = (folder / first[0].name).read_bytes()
    assert packages.write_packages(root, folder, record) == first
    assert len(builds) == 1  # the sources are as they were
    assert (folder / first[0].name).read_bytes() == wheel
    # A served file that was damaged or removed is built again.
    (folder / first[1].name).unlink()
    packages.write_packages(root, folder, record)
    assert len(builds) == 2
    # So is a changed source file, and the wheel holds the change.
    ops = root / "src" / "effpt" / "ops.py"
    ops.write_text(ops.read_text(encoding="utf-8") + "\nCHANGED = 1\n", encoding="utf-8")
    built = packages.write_packages(root, folder, record)
    assert len(builds) == 3
    with zipfile.ZipFile(built[0]) as archive:
        assert b"CHANGED = 1" in archive.read("effpt/ops.py")
    assert packages.served_versions(folder) == {VERSION}


def test_a_page_is_read_for_install_lines_again_only_when_it_changed(served, tmp_path, monkeypatch):
    cache = tmp_path / "lines.json"
    page = _built_page(served, packages.install_command())
    count = packages.check_install_lines(served, cache=cache)
    reads = []
    stated = packages.stated_commands
    monkeypatch.setattr(packages, "stated_commands", lambda *a: reads.append(1) or stated(*a))
    assert packages.check_install_lines(served, cache=cache) == count
    assert reads == []  # nothing changed: nothing read
    # Every remembered line is still checked against what the site serves now.
    with pytest.raises(ExtensionError, match=r"plot_a\.html.*effpt==.*serves 0\.0\.1"):
        packages.check_install_lines(served, {"0.0.1"}, cache=cache)
    # A page written anew is read anew.
    _built_page(served, f"pip install effpt==0.0.2 --find-links {packages.SITE}packages/")
    with pytest.raises(ExtensionError, match=r"plot_a\.html: effpt==0\.0\.2"):
        packages.check_install_lines(served, cache=cache)
    assert reads == [1]
    page.unlink()
