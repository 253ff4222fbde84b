#!/usr/bin/env -S uv run --script
# /// script
# dependencies = ["nox>=2024.4.15"]
# ///
"""Sessions that build, test and lint Effective PyTorch.

Every install goes through ``constraints.txt`` so that a build is reproducible and
torch is pinned (on a CPU machine the pin takes the CPU wheel, on a GPU runner the
CUDA one). Virtual environments are reused: a session reinstalls only when
``pyproject.toml`` or ``constraints.txt`` changed since its last install.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import nox

nox.needs_version = ">=2024.4.15"
nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "yes"

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
CONSTRAINTS = ROOT / "constraints.txt"
# Gallery pages run many small operations; OpenMP threads that spin while waiting steal
# the other core from them on a small or busy CPU. Passive waiting costs nothing on a GPU.
RUN_ENV = {"MPLBACKEND": "Agg", "OMP_WAIT_POLICY": "PASSIVE", "KINETO_LOG_LEVEL": "3"}
DOCS = ROOT / "docs"
BUILD = DOCS / "_build"


def install(session: nox.Session, *groups: str, editable: bool = True) -> None:
    """Install effpt and dependency groups under the constraints, unless already done.

    A marker in the virtual environment holds a hash of what was installed, so a
    second run of an unchanged session skips pip entirely (seconds, not minutes).
    """
    requirements = [
        req for group in groups for req in nox.project.dependency_groups(PYPROJECT, group)
    ]
    digest = hashlib.sha256()
    for path in (CONSTRAINTS, ROOT / "pyproject.toml"):
        digest.update(path.read_bytes())
    digest.update(repr((groups, editable)).encode())
    marker = Path(session.virtualenv.location) / ".effpt-installed"
    if marker.is_file() and marker.read_text() == digest.hexdigest():
        session.log("Dependencies unchanged since the last install: skipping pip.")
        return
    package = ["-e", "."] if editable else ["."]
    session.install("-c", str(CONSTRAINTS), *package, *requirements)
    marker.write_text(digest.hexdigest())


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff lint and format check; the workflows against GitHub's schema and zizmor.

    Fix formatting locally with ``nox -s fmt``. Both workflow checks run offline.
    """
    _install_tools(session, "lint")
    session.run("ruff", "check", ".", *session.posargs)
    session.run("ruff", "format", "--check", ".")
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    session.run("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *workflows)
    session.run("zizmor", "--offline", "--persona", "auditor", *workflows)


@nox.session(default=False)
def fmt(session: nox.Session) -> None:
    """Apply ruff's fixes and formatting in place."""
    _install_tools(session, "lint")
    session.run("ruff", "check", "--fix", ".")
    session.run("ruff", "format", ".")


def _install_tools(session: nox.Session, group: str) -> None:
    """Install a tool-only group (no effpt, no torch) under the constraints."""
    requirements = nox.project.dependency_groups(PYPROJECT, group)
    marker = Path(session.virtualenv.location) / ".effpt-installed"
    key = hashlib.sha256(CONSTRAINTS.read_bytes() + repr(requirements).encode()).hexdigest()
    if marker.is_file() and marker.read_text() == key:
        session.log("Tools unchanged since the last install: skipping pip.")
        return
    session.install("-c", str(CONSTRAINTS), *requirements)
    marker.write_text(key)


@nox.session
def tests(session: nox.Session) -> None:
    """Run unit tests, doctests of src/effpt, and every gallery script as plain ``python``.

    Pass pytest options after ``--``, e.g. ``nox -s tests -- -m "not gallery"`` to
    skip the gallery scripts or ``-k autograd`` to run one of them.
    """
    install(session, "test")
    session.run("pytest", *session.posargs, env=RUN_ENV)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the HTML site into docs/_build/html, executing every example.

    Options after ``--``:

    * ``--no-exec``: build without running examples (for prose edits);
    * ``--example NAME``: execute only the examples whose file name contains NAME,
      e.g. ``nox -s docs -- --example fitting_a_curve``;
    * anything else is passed to ``sphinx-build``.

    Warnings are errors (``-W --keep-going -n``), so a broken reference fails the build,
    and so does any example that raises.
    """
    install(session, "docs")
    args = list(session.posargs)
    extra: list[str] = []
    if "--no-exec" in args:
        args.remove("--no-exec")
        extra += ["-D", "plot_gallery=0"]
    if "--example" in args:
        i = args.index("--example")
        name = args[i + 1]
        del args[i : i + 2]
        extra += ["-D", f"sphinx_gallery_conf.filename_pattern=/plot_.*{name}"]
    session.run(
        "sphinx-build",
        "-b",
        "html",
        "-W",
        "--keep-going",
        "-n",
        "-j",
        "1",
        *extra,
        *args,
        str(DOCS),
        str(BUILD / "html"),
        env=RUN_ENV,
    )
    session.log(f"Open {BUILD / 'html' / 'index.html'} in a browser.")


@nox.session(default=False)
def linkcheck(session: nox.Session) -> None:
    """Check links: internal ones must resolve; external ones are reported, not required.

    Examples are not executed. The report is docs/_build/linkcheck/output.txt.
    """
    install(session, "docs")
    out = BUILD / "linkcheck"
    session.run(
        "sphinx-build",
        "-b",
        "linkcheck",
        "-n",
        "-D",
        "plot_gallery=0",
        *session.posargs,
        str(DOCS),
        str(out),
    )
    rows = [json.loads(line) for line in (out / "output.json").read_text().splitlines() if line]
    internal = [r for r in rows if r["status"] == "broken" and not r["uri"].startswith("http")]
    external = [
        r for r in rows if r["status"] in {"broken", "timeout"} and r["uri"].startswith("http")
    ]
    for r in external:
        session.log(f"external link not reachable (reported only): {r['uri']} in {r['filename']}")
    if internal:
        lines = "\n".join(
            f"  {r['filename']}:{r['lineno']}: {r['uri']} ({r['info']})" for r in internal
        )
        session.error(f"broken internal links:\n{lines}")
    session.log(f"{len(rows)} links checked; internal links all resolve.")


AXE_CORE = "axe-core@4.14.1"


@nox.session(default=False)
def browser(session: nox.Session) -> None:
    """Open the built site in headless Chromium: console errors, requests, images, axe-core.

    Needs a build from ``nox -s docs`` and Debian's ``chromium`` and ``chromium-driver``
    (``.ci/run`` installs them). Screenshots land in docs/_build/screenshots.
    """
    site = BUILD / "html"
    if not (site / "index.html").is_file():
        session.error("No built site in docs/_build/html: run `nox -s docs` first.")
    for binary in ("/usr/bin/chromium", "/usr/bin/chromedriver"):
        if not Path(binary).exists():
            session.error(f"{binary} is missing: apt-get install -y chromium chromium-driver")
    _install_tools(session, "browser")
    axe_dir = Path(session.virtualenv.location) / "axe"
    axe_js = axe_dir / "node_modules" / "axe-core" / "axe.min.js"
    if not axe_js.is_file():
        session.run(
            "npm", "install", "--no-save", "--prefix", str(axe_dir), AXE_CORE, external=True
        )
    session.run(
        "python",
        str(DOCS / "_tools" / "browser_check.py"),
        str(site),
        str(axe_js),
        str(BUILD / "screenshots"),
    )


@nox.session(default=False)
def serve(session: nox.Session) -> None:
    """Live preview at http://127.0.0.1:8000 that rebuilds when a page or example changes."""
    install(session, "serve")
    session.run(
        "sphinx-autobuild",
        "--host",
        "127.0.0.1",
        "--watch",
        str(ROOT / "examples"),
        "--watch",
        str(ROOT / "src"),
        "--ignore",
        str(DOCS / "auto_examples"),
        "--ignore",
        str(DOCS / "gen_modules"),
        *session.posargs,
        str(DOCS),
        str(BUILD / "html"),
        env=RUN_ENV,
    )


@nox.session(default=False)
def clean(session: nox.Session) -> None:
    """Remove the built site and the generated gallery, forcing every example to run again."""
    for path in (BUILD, DOCS / "auto_examples", DOCS / "gen_modules"):
        if path.exists():
            session.log(f"Removing {path}")
            shutil.rmtree(path)


if __name__ == "__main__":
    nox.main()
