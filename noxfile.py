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
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import nox

nox.needs_version = ">=2024.4.15"
nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "yes"

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
CONSTRAINTS = ROOT / "constraints.txt"
# What every session sets: only what changes no measurement (figures drawn off-screen, the
# profiler's own log lines silenced). Pages are timed in the environment a reader's plain
# run has; tests/test_build_environment.py holds this list to that.
RUN_ENV = {"MPLBACKEND": "Agg", "KINETO_LOG_LEVEL": "3"}
DOCS = ROOT / "docs"
BUILD = DOCS / "_build"


def _once(marker: Path, *parts: object, needs: Path | None = None):
    """What to call once an install has run, or None when it need not run.

    Every cached install here goes through this: the environment keeps a marker file
    with a hash of what it was built from (constraints, pyproject.toml, the requirement
    list, a version), so an unchanged session skips pip or npm (seconds, not minutes).
    ``needs`` is a file the install makes; when it is missing the install runs anyway.
    The marker is written only by the returned function, so a failed install runs again.
    """
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.read_bytes() if isinstance(part, Path) else repr(part).encode())
    key = digest.hexdigest()
    if marker.is_file() and marker.read_text() == key and (needs is None or needs.exists()):
        return None
    return lambda: marker.write_text(key)


def install(session: nox.Session, *groups: str, editable: bool = True) -> None:
    """Install effpt and dependency groups under the constraints, unless already done."""
    requirements = [
        req for group in groups for req in nox.project.dependency_groups(PYPROJECT, group)
    ]
    marker = Path(session.virtualenv.location) / ".effpt-installed"
    done = _once(marker, CONSTRAINTS, ROOT / "pyproject.toml", (groups, editable))
    if done is None:
        session.log("Dependencies unchanged since the last install: skipping pip.")
        return
    package = ["-e", "."] if editable else ["."]
    session.install("-c", str(CONSTRAINTS), *package, *requirements)
    done()


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
    done = _once(Path(session.virtualenv.location) / ".effpt-installed", CONSTRAINTS, requirements)
    if done is None:
        session.log("Tools unchanged since the last install: skipping pip.")
        return
    session.install("-c", str(CONSTRAINTS), *requirements)
    done()


@nox.session
def tests(session: nox.Session) -> None:
    """Run unit tests, doctests of src/effpt, and every gallery script as plain ``python``.

    Pass pytest options after ``--``, e.g. ``nox -s tests -- -m "not gallery"`` to
    skip the gallery scripts or ``-k autograd`` to run one of them.
    """
    install(session, "test")
    session.run("pytest", *session.posargs, env=RUN_ENV)


def _reader_python(session: nox.Session) -> Path:
    """Build and check effpt's wheel; install it alone in an environment outside the repo.

    Returns that environment's ``python``. Its dependencies are reinstalled only when
    the constraints or pyproject.toml changed; the wheel itself is always the one just
    built. Shared by the reader's test and the machine stand-ins.
    """
    _install_tools(session, "release")
    dist = Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.run("python", "-m", "build", "--outdir", str(dist), str(ROOT))
    session.run("twine", "check", "--strict", *(str(p) for p in sorted(dist.iterdir())))
    (wheel,) = dist.glob("effpt-*.whl")

    # Outside the repository, so that nothing of it can leak into the reader's imports.
    tag = hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]
    env_dir = Path(tempfile.gettempdir()) / f"effpt-reader-env-{tag}"
    python = env_dir / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    done = _once(env_dir / ".effpt-deps", CONSTRAINTS, ROOT / "pyproject.toml", needs=python)
    if done is not None:
        session.run("python", "-m", "venv", "--clear", str(env_dir))
        session.run(*pip, "-c", str(CONSTRAINTS), str(wheel), external=True)
        done()
    session.run(*pip, "--no-deps", "--force-reinstall", str(wheel), external=True)
    return python


@nox.session
def reader(session: nox.Session) -> None:
    """The reader's test: each page alone in an empty folder, with only effpt installed.

    Builds the wheel and sdist (``python -m build``) and checks them with ``twine
    check``; installs the wheel under the constraints into a virtual environment of its
    own, outside the repository. Then serves the built site (``nox -s docs`` first) on a
    local port as GitHub Pages would, removes effpt and reinstalls it by running a
    page's install line as it stands, from the site's own ``packages/`` folder
    (tests/reader/conftest.py); then copies each gallery script alone into an empty
    folder and runs it with that environment's ``python``, and the pages that start
    processes under fork, forkserver and spawn. Each page's expectations land in
    docs/_build/standins/native for ``nox -s standins``'s report. Options after ``--``
    go to pytest.
    """
    if not (BUILD / "html" / "packages").is_dir():
        session.error("No built site with its packages/ folder: run `nox -s docs` first.")
    _install_tools(session, "release")
    session.install("-c", str(CONSTRAINTS), *nox.project.dependency_groups(PYPROJECT, "test"))
    python = _reader_python(session)
    session.run(
        "pytest",
        str(ROOT / "tests" / "reader"),
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env={**RUN_ENV, "EFFPT_READER_PYTHON": str(python)},
    )


@nox.session(default=False)
def standins(session: nox.Session) -> None:
    """Every page as the reader runs it, on stand-ins for machines unlike this one.

    The wheel and the reader's environment as in ``nox -s reader``; then each page,
    copied alone into an empty folder, on the stand-ins docs/_tools/standins.py defines
    (``nox -s standins -- --list`` prints them with what each sets). Each has
    its own Inductor cache and is probed first to prove it took effect; the pages that
    start processes run under each stand-in's own start method. The one-thread
    stand-ins run two pages at a time. Fails when a page fails on any
    stand-in; writes docs/_build/standins/report.json and prints each expectation's
    verdict per stand-in (beside this machine's own run from ``nox -s reader``) and
    which flipped. Options after ``--``: ``-k SUBSTRING`` (pages), ``--only NAME``
    (stand-ins), ``--serial``, ``--list``.
    """
    python = _reader_python(session)
    session.run(
        str(python),
        str(DOCS / "_tools" / "standins.py"),
        *session.posargs,
        env=RUN_ENV,
        external=True,
    )


#: What the GPU machine the device tool lends already has (python3 3.12 with torch 2.11 and
#: CUDA 13): torch and its own dependencies, NumPy, matplotlib and theirs. gpu_wheels
#: carries everything else the docs build imports.
GPU_MACHINE_HAS = re.compile(
    r"^(torch|numpy|matplotlib|pillow|contourpy|cycler|kiwisolver|pyparsing|python-dateutil"
    r"|six|packaging|sympy|mpmath|networkx|filelock|fsspec|jinja2|markupsafe"
    r"|typing-extensions|setuptools|triton|nvidia-.*)$"
)
#: The manylinux tags pip must be told one by one (it matches each exactly).
MANYLINUX = ("2_17", "2_24", "2_27", "2_28", "2_31", "2_34", "2_35")
WHEELS = ROOT / ".whl"


@nox.session(default=False)
def gpu_wheels(session: nox.Session) -> None:
    """Download into .whl/ the wheels the GPU build needs and the GPU machine lacks.

    For CPython 3.12 on manylinux x86-64: Sphinx, its extensions and theme, and their
    dependencies, at the versions constraints.txt pins, less what the GPU machine has
    (``GPU_MACHINE_HAS``). jieba (an sdist only) is left out: the GPU build is English
    only, and only the Chinese search index needs it. docs/_tools/gpu_build.py installs
    the wheels there; .whl/ is ignored by git and travels with ``carry``.
    """
    requirements = [
        r
        for group in ("docs", "assets")
        for r in nox.project.dependency_groups(PYPROJECT, group)
        if not r.startswith("jieba")
    ]
    constraints = Path(session.create_tmp()) / "constraints-gpu.txt"
    constraints.write_text(
        "\n".join(ln for ln in CONSTRAINTS.read_text().splitlines() if not ln.startswith("torch=="))
    )
    download = Path(session.create_tmp()) / "wheels"
    shutil.rmtree(download, ignore_errors=True)
    platforms = [a for tag in MANYLINUX for a in ("--platform", f"manylinux_{tag}_x86_64")]
    session.run(
        "python", "-m", "pip", "download", "--quiet", "--only-binary=:all:",
        "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
        "--abi", "abi3", "--abi", "none", *platforms, "--platform", "manylinux2014_x86_64",
        "--platform", "any", "-c", str(constraints), "-d", str(download), *requirements,
    )  # fmt: skip
    shutil.rmtree(WHEELS, ignore_errors=True)
    WHEELS.mkdir()
    kept, left = [], []
    for wheel in sorted(download.glob("*.whl")):
        name = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        if GPU_MACHINE_HAS.match(name):
            left.append(name)
        else:
            shutil.copy2(wheel, WHEELS / wheel.name)
            kept.append(wheel)
    size = sum(w.stat().st_size for w in kept)
    session.log("left out (the GPU machine has them): " + ", ".join(left))
    for wheel in kept:
        session.log(f"  {wheel.name} ({wheel.stat().st_size / 2**20:.1f} MiB)")
    session.log(f"{len(kept)} wheels, {size / 2**20:.1f} MiB, in {WHEELS}")
    if size > 40 * 2**20:
        session.error("the wheels exceed 40 MiB: with the tree they would pass the 64 MiB carried")


@nox.session(default=False)
def gpu_rehearsal(session: nox.Session) -> None:
    """The GPU build's entry point (docs/_tools/gpu_build.py), run here on the CPU.

    Builds the English site in a fresh copy of the tree with every page executed on the
    CPU (``EFFPT_DEVICE=cpu``), with this session's packages instead of .whl/, and
    writes what the GPU call would bring back to docs/_build/gpu-rehearsal: the log,
    the evidence record, one line per page and the site's archive. Options after
    ``--`` go to gpu_build.py (e.g. ``--deadline-s 3000``).
    """
    install(session, "docs", "assets")
    out = BUILD / "gpu-rehearsal"
    work = Path(tempfile.gettempdir()) / f"effpt-gpu-rehearsal-{os.getpid()}"
    try:
        session.run(
            "python",
            str(DOCS / "_tools" / "gpu_build.py"),
            "--no-wheels",
            "--out",
            str(out),
            "--work",
            str(work),
            *session.posargs,
            env={**RUN_ENV, "EFFPT_DEVICE": "cpu"},
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


@nox.session(default=False)
def evidence(session: nox.Session) -> None:
    """Write the evidence records of this machine and of each stand-in into docs/evidence.

    This machine's from the outputs of the last ``nox -s docs`` (docs/auto_examples);
    each stand-in's from ``nox -s standins``' docs/_build/standins/report.json. Either
    is skipped, with a warning, when its outputs are missing; ``-- docs`` or
    ``-- standins`` writes only that one, ``-- --out DIR`` elsewhere. Commit the
    records (docs/_tools/evidence.py says what they hold).
    """
    install(session, "docs", "assets")
    tool = str(DOCS / "_tools" / "evidence.py")
    kinds = ("docs", "standins")
    wanted = [a for a in session.posargs if a in kinds] or list(kinds)
    options = [a for a in session.posargs if a not in kinds]  # e.g. --out DIR
    if "docs" in wanted:
        if (DOCS / "auto_examples" / "_records").is_dir():
            session.run("python", tool, "docs", *options, env=RUN_ENV)
        else:
            session.warn("docs/auto_examples has no outputs: run `nox -s docs` first")
    if "standins" in wanted:
        if (BUILD / "standins" / "report.json").is_file():
            session.run("python", tool, "standins", *options, env=RUN_ENV)
        else:
            session.warn("docs/_build/standins/report.json is missing: run `nox -s standins`")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site in English and Chinese, executing every example once.

    The English site lands in docs/_build/html, the Chinese one in docs/_build/html/zh_CN,
    built from the same executed pages (sphinx-gallery finds every example current and
    runs nothing again) and the catalogues in docs/locale/zh_CN.

    Options after ``--``:

    * ``--no-exec``: build without running examples (for prose edits);
    * ``--example NAME``: execute only the examples whose file name contains NAME,
      e.g. ``nox -s docs -- --example fitting_a_curve``;
    * ``--english-only``: skip the Chinese build;
    * anything else is passed to ``sphinx-build``.

    Warnings are errors (``-W --keep-going -n``), so a broken reference fails the build,
    and so does any example that raises, and a Chinese edition below its coverage
    threshold.
    """
    install(session, "docs", "assets")
    args = list(session.posargs)
    extra: list[str] = []
    if "--no-exec" in args:
        args.remove("--no-exec")
        extra += ["-D", "plot_gallery=0"]
    if "--example" in args:
        i = args.index("--example")
        # "plot_batch_gather" and "batch_gather" both name the page (the pattern adds plot_)
        name = args[i + 1].removeprefix("plot_").removesuffix(".py")
        del args[i : i + 2]
        extra += ["-D", f"sphinx_gallery_conf.filename_pattern=/plot_.*{name}"]
    english_only = "--english-only" in args
    if english_only:
        args.remove("--english-only")
    sphinx = ["sphinx-build", "-b", "html", "-W", "--keep-going", "-n"]
    session.run(*sphinx, "-j", "1", *extra, *args, str(DOCS), str(BUILD / "html"), env=RUN_ENV)
    session.log(f"Open {BUILD / 'html' / 'index.html'} in a browser.")
    if english_only:
        return
    if not (DOCS / "locale" / "zh_CN").is_dir():
        session.warn("docs/locale/zh_CN does not exist: the Chinese edition is NOT built")
        return
    began = time.monotonic()
    # The Chinese pass executes nothing: two processes read and write its pages (every
    # extension is parallel-safe; effpt_site merges what its readers count). On this
    # 2-core box, idle, -j 2 took 35-39 s against 50 s; with the other core busy it
    # gains nothing (the English pass stays -j 1: it times the pages it runs).
    session.run(
        *sphinx,
        "-j",
        "2",
        "-D",
        "language=zh_CN",
        *extra,
        *args,
        str(DOCS),
        str(BUILD / "html" / "zh_CN"),
        env=RUN_ENV,
    )
    session.log(f"The Chinese edition took {time.monotonic() - began:.0f} s more.")


@nox.session(default=False)
def translations(session: nox.Session) -> None:
    """Refresh the Chinese catalogues from the English pages, for translators.

    Runs Sphinx's gettext builder (examples already executed by ``nox -s docs`` are not
    run again), which also writes effpt_site.pot, every string the site's extension
    shows (docs/_ext/effpt_site/messages.py), then ``sphinx-intl update``, which adds new
    messages and marks changed ones fuzzy in docs/locale/zh_CN/LC_MESSAGES. Prints each
    catalogue's counts.
    """
    install(session, "translations")
    pot = BUILD / "gettext"
    session.run("sphinx-build", "-b", "gettext", "-q", str(DOCS), str(pot), env=RUN_ENV)
    session.run(
        "sphinx-intl",
        "update",
        "-p",
        str(pot),
        "-d",
        str(DOCS / "locale"),
        "-l",
        "zh_CN",
        "-w",
        "0",
    )
    # sphinx-intl stat exits with 1 while anything is untranslated: that is its report.
    session.run(
        "sphinx-intl", "stat", "-d", str(DOCS / "locale"), "-l", "zh_CN", success_codes=[0, 1]
    )


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


#: Where each torch version's results live; the docs build reads them (never installs torch).
COMPAT_DATA = DOCS / "compat"
COMPAT_RUN = DOCS / "_tools" / "compat_run.py"


@nox.session(default=False)
def compat(session: nox.Session) -> None:
    """One entry of the torch matrix: ``nox -s compat -- 2.15.0``.

    Installs that torch from PyPI (on Linux its CUDA build, which runs on a CPU too)
    with effpt and the test group into an environment of its own, runs the unit tests
    and every gallery page there (a failing page is recorded with its traceback and the
    others still run), and writes docs/compat/torch-VERSION.json for the compatibility
    page. docs/_tools/compat_run.py makes that environment (``prepare``: constraints.txt
    without its pins of torch and of torch's own dependencies, plus ``torch==VERSION``;
    pip's reason when that torch cannot be installed) and runs the entry.
    ``--pages NAME[,NAME]`` runs only the pages whose file name contains a NAME and keeps
    the other pages' entries of the existing file (for a page added since the last full
    run). Other options after the version go to pytest for the unit tests.
    """
    if not session.posargs or session.posargs[0].startswith("-"):
        session.error(
            "usage: nox -s compat -- VERSION [--pages NAME,...] [pytest options], e.g. 2.15.0"
        )
    version, *pytest_args = session.posargs
    pages_env = {}
    if "--pages" in pytest_args:
        i = pytest_args.index("--pages")
        pages_env = {"EFFPT_COMPAT_PAGES": pytest_args[i + 1]}
        del pytest_args[i : i + 2]
    env_dir = Path(session.virtualenv.location).parent / f"compat-torch-{version}"
    test_reqs = nox.project.dependency_groups(PYPROJECT, "test")
    session.run(
        "python", str(COMPAT_RUN), "prepare", version, str(env_dir), str(CONSTRAINTS), *test_reqs
    )
    out = COMPAT_DATA / f"torch-{version}.json"
    session.run(
        str(env_dir / "bin" / "python"),
        str(COMPAT_RUN),
        str(out),
        *pytest_args,
        env={**RUN_ENV, **pages_env},
        external=True,
    )
    session.log(f"Wrote {out.relative_to(ROOT)}")


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
    _warn_without_cjk_font(session)
    _install_tools(session, "browser")
    axe_dir = Path(session.virtualenv.location) / "axe"
    axe_js = axe_dir / "node_modules" / "axe-core" / "axe.min.js"
    axe_dir.mkdir(exist_ok=True)
    done = _once(axe_dir / ".effpt-installed", AXE_CORE, needs=axe_js)
    if done is not None:
        session.run(
            "npm", "install", "--no-save", "--prefix", str(axe_dir), AXE_CORE, external=True
        )
        done()
    session.run(
        "python",
        str(DOCS / "_tools" / "browser_check.py"),
        str(site),
        str(axe_js),
        str(BUILD / "screenshots"),
    )


def _warn_without_cjk_font(session: nox.Session) -> None:
    """Say so when no font here covers Chinese: the Chinese pages render as boxes.

    A reader's system has one; without it the screenshots show empty boxes and Chromium
    searches every font for each character, which is not what a reader's browser does.
    """
    probe = (
        subprocess.run(
            ["fc-list", ":lang=zh", "family"], capture_output=True, text=True, check=False
        )
        if shutil.which("fc-list")
        else None
    )
    if probe is None or not probe.stdout.strip():
        session.warn(
            "No font here covers Chinese (fc-list :lang=zh is empty): the Chinese pages "
            "render as boxes. apt-get install -y fonts-noto-cjk"
        )


#: The newest Lighthouse that runs on Debian's Node.js 20 (13.x needs Node.js 22).
LIGHTHOUSE = "lighthouse@12.8.2"


@nox.session(default=False)
def lighthouse(session: nox.Session) -> None:
    """Score a sample of built pages with Lighthouse's mobile profile, served with gzip.

    Serves docs/_build/html as GitHub Pages does (gzip, ten-minute cache) on a local
    port and runs Lighthouse from npm with Debian's chromium on the landing page,
    three gallery pages, an explanation, an API page, the measurements, compatibility
    and execution-times pages, and the Chinese landing page and a Chinese gallery page.
    Prints the four scores, the compressed page weight and the paint timings per page.
    Fails on facts: accessibility, best practices or SEO under 1.00, or a page over its
    budgets (compressed bytes, requests, render-blocking requests, layout shift). The
    performance score is measured from this host's task times, so it is an expectation:
    each page's verdict against 0.90 is printed and never fails. The CPU slowdown is fitted to this host
    (Lighthouse's throttling guide); pass ``-- --no-calibrate`` for Lighthouse's fixed
    4x, or page paths to score other pages. Reports land in docs/_build/lighthouse.
    """
    site = BUILD / "html"
    if not (site / "index.html").is_file():
        session.error("No built site in docs/_build/html: run `nox -s docs` first.")
    if not Path("/usr/bin/chromium").exists():
        session.error("/usr/bin/chromium is missing: apt-get install -y chromium")
    _warn_without_cjk_font(session)
    prefix = Path(session.virtualenv.location) / "lighthouse"
    binary = prefix / "node_modules" / ".bin" / "lighthouse"
    done = _once(prefix / ".effpt-installed", LIGHTHOUSE, needs=binary)
    if done is not None:
        session.run(
            "npm",
            "install",
            "--no-save",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(prefix),
            LIGHTHOUSE,
            external=True,
        )
        done()
    session.run(
        "python",
        str(DOCS / "_tools" / "lighthouse_check.py"),
        str(site),
        str(binary),
        str(BUILD / "lighthouse"),
        *session.posargs,
        env={"CHROME_PATH": "/usr/bin/chromium"},
    )


def _version() -> str:
    """effpt's version, read from its source (no import: the session has no effpt)."""
    text = (ROOT / "src" / "effpt" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__ = "([^"]+)"', text, re.MULTILINE)
    if match is None:
        msg = "src/effpt/__init__.py has no __version__ line"
        raise RuntimeError(msg)
    return match.group(1)


@nox.session(default=False)
def archive(session: nox.Session) -> None:
    """The offline copy: the built site, every page as a script and a notebook, in one zip.

    Packs docs/_build/html, each gallery page's ``.py`` and ``.ipynb`` (as
    sphinx-gallery wrote them, by family), constraints.txt and the machine stamp
    (when and where each page ran) into docs/_build/effpt-site-VERSION.zip, with a
    README saying how to use it. Then unpacks it and opens pages from ``file://`` in
    headless Chromium: it fails on a stylesheet, script or picture that does not load.
    Needs a build from ``nox -s docs``.
    """
    site = BUILD / "html"
    if not (site / "index.html").is_file():
        session.error("No built site in docs/_build/html: run `nox -s docs` first.")
    version = _version()
    out = BUILD / f"effpt-site-{version}.zip"
    session.run(
        "python",
        str(DOCS / "_tools" / "archive.py"),
        "pack",
        str(ROOT),
        str(out),
        version,
    )
    if not all(Path(p).exists() for p in ("/usr/bin/chromium", "/usr/bin/chromedriver")):
        session.error("the file:// check needs chromium and chromium-driver (apt-get install)")
    _install_tools(session, "browser")
    session.run("python", str(DOCS / "_tools" / "archive.py"), "check", str(out))
    session.log(f"Wrote {out.relative_to(ROOT)}")


@nox.session(default=False)
def serve(session: nox.Session) -> None:
    """Live preview at http://127.0.0.1:8000 that rebuilds when a page or example changes."""
    install(session, "serve", "assets")
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
