"""Make the site's own Sphinx extension (docs/_ext/effpt_site) and the page runner
(docs/_tools/page_runner.py) importable by the tests; ``built_site``, the one small real
build of the site's tests (tests/test_site_build.py asserts on it); ``app``, the stand-in
application of a one-page gallery that the readers' tests share.

tests/reader holds the reader's test, which needs an environment built from effpt's
wheel (``nox -s reader`` makes it and names its interpreter in EFFPT_READER_PYTHON);
other sessions do not collect it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

collect_ignore = [] if os.environ.get("EFFPT_READER_PYTHON") else ["reader"]

DOCS = Path(__file__).resolve().parent.parent / "docs"
# docs/_ext: the site's extension; docs/_tools: the page runner (page_runner.py).
for folder in (DOCS / "_ext", DOCS / "_tools"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """One small real build, made once per test session: ``sphinx-build`` of a one-page
    gallery (tests/minisite.py) whose page sphinx-gallery really executes, with the site's
    extension modules in BUILT_EXTENSIONS. Returns ``(docs, html)``: the source folder
    (with what the run left there) and the HTML output. Tests only read it."""
    from minisite import BUILT_EXTENSIONS, BUILT_PAGE, build, one_page_gallery

    root = tmp_path_factory.mktemp("built_site")
    docs = one_page_gallery(
        root,
        "plot_sum.py",
        BUILT_PAGE,
        extensions=BUILT_EXTENSIONS,
        pages={"measurements": "Measurements\n============\n\n.. effpt-expectations::\n"},
        conf_extra='effpt_evidence_dir = "records"',
    )
    (docs / "records").mkdir()
    html = root / "html"
    build(docs, html)
    return docs, html


@pytest.fixture
def app(tmp_path):
    """A stand-in application (tests/minisite.py's ``stub_app``) for a one-page gallery:
    family ``fam`` with its page ``plot_a``, and an empty records folder. A test file
    that needs more around the page defines its own ``app``."""
    from minisite import family_of_one, stub_app

    family_of_one(tmp_path)
    (tmp_path / "docs" / "auto" / "_records").mkdir(parents=True)
    return stub_app(tmp_path)


@pytest.fixture
def calls_to(monkeypatch):
    """``calls_to(module, name)``: ``module.name`` records each call's arguments in the
    list it returns, then does what it did (for tests of what is computed only once)."""

    def counting(module, name):
        calls = []
        real = getattr(module, name)

        def counted(*args, **kwargs):
            calls.append(args)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
        return calls

    return counting


@pytest.fixture
def imports_torch():
    """``imports_torch(code)``: whether running ``code`` in a fresh interpreter, with only
    the site's extension on its path, imported torch (for the no-torch promises of a build
    that executes nothing)."""

    def run(code: str) -> bool:
        done = subprocess.run(
            [sys.executable, "-c", f"{code}\nimport sys\nprint('torch' in sys.modules)"],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONPATH": str(DOCS / "_ext"), "PATH": "/usr/bin:/bin"},
        )
        return done.stdout.split()[-1] == "True"

    return run


@pytest.fixture(scope="module")
def conf():
    """docs/conf.py's settings, read as Sphinx reads them (no network probe)."""
    import runpy

    mp = pytest.MonkeyPatch()
    mp.setenv("EFFPT_INTERSPHINX", "0")
    try:
        return runpy.run_path(str(Path(__file__).resolve().parent.parent / "docs" / "conf.py"))
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def site_app(conf):
    """The real site's gallery settings, as the extension's functions read them from an app."""
    from types import SimpleNamespace

    config = SimpleNamespace(
        sphinx_gallery_conf=conf["sphinx_gallery_conf"], effpt_families=conf["effpt_families"]
    )
    docs = Path(__file__).resolve().parent.parent / "docs"
    return SimpleNamespace(srcdir=str(docs), config=config)
