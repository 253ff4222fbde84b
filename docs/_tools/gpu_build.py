"""The GPU build as one prepared call: the English site, every page executed, and its evidence.

Run in the repository's root, on a machine with torch (and, for the GPU build, CUDA)
but perhaps without Sphinx or a network::

    EFFPT_DEVICE=cuda python3 docs/_tools/gpu_build.py --out "$OUT"

What it does, each step logged to ``OUT/build.log``:

1. installs the wheels in ``.whl/`` (``nox -s gpu_wheels`` downloads them) with
   ``pip install --no-index --no-deps --target`` into a folder outside the repository,
   and puts that folder and ``src/`` on the build's ``PYTHONPATH`` (effpt from the
   tree, nothing installed); ``--no-wheels`` uses the interpreter's own packages;
2. checks the machine before spending minutes on it: the device that ``EFFPT_DEVICE``
   asks for, a C++ compiler (Inductor compiles C++ on the CPU even in a GPU build), and
   every package the build imports; it prints torch's build and ``torch.version.cuda``;
3. copies the tree (without build outputs) to a fresh folder and builds the English
   site there, executing every gallery page (sphinx-gallery goes on past a failing
   page). A build still running at ``--deadline-s`` is stopped, and the record says
   which pages it did not reach;
4. writes to ``OUT``: ``build.log``; the evidence record of the machine
   (``<slug>.json``, docs/_tools/evidence.py: for every page whether it ran or why
   not, seconds, peak GPU memory, device, expectations and claim outcomes);
   ``pages.txt``, one line per page; and ``site.tar.xz``, the built site, unless it
   would exceed 16 MiB (then the log says so and the record still comes back).

It exits 0 when every page ran and Sphinx reported no warning, 1 when a page failed
or Sphinx did (the record tells which), 2 when the machine is not fit to build on.
``nox -s gpu_rehearsal`` runs it here on the CPU (``EFFPT_DEVICE=cpu``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import evidence

ROOT = evidence.ROOT
#: What the build imports, by distribution name (checked before building).
NEEDED = (
    "sphinx",
    "sphinx-gallery",
    "myst-parser",
    "pydata-sphinx-theme",
    "sphinx-copybutton",
    "sphinxext-opengraph",
    "matplotlib",
    "pillow",
    "numpy",
    "networkx",
    "fonttools",
    "brotli",
    "torch",
)
#: Never copied into the build's folder: outputs of earlier builds and tool folders.
NOT_COPIED = (
    ".git",
    ".nox",
    ".whl",
    ".gl",
    ".venv",
    "_build",
    "auto_examples",
    "gen_modules",
    "sg_execution_times.rst",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "*.pt",
    "*.pt2",
    "*.mo",
)
#: The largest file a device call may bring back.
MAX_ARCHIVE_BYTES = 16 * 2**20
#: How the build is run: the same as ``nox -s docs``' English pass.
RUN_ENV = {"MPLBACKEND": "Agg", "OMP_WAIT_POLICY": "PASSIVE", "KINETO_LOG_LEVEL": "3"}

# The child that runs Sphinx in its own process, so that the parent can stop it at the
# deadline and still read what it left. It writes the machine's fields first, and the
# failing pages when the build ends or is stopped (SIGTERM).
CHILD = r"""
import json, signal, sys
from pathlib import Path
out, docs, html, device = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
sys.path.insert(0, sys.argv[5])
overrides = json.loads(sys.argv[6])
import evidence
(out / "machine.json").write_text(json.dumps(evidence.this_machine_fields(device)))
from sphinx.application import Sphinx
app = None
def dump(*_):
    conf = app.config.sphinx_gallery_conf if app is not None else {}
    failing = {str(k): v for k, v in dict(conf.get("failing_examples", {})).items()}
    (out / "failing.json").write_text(json.dumps(failing))
def stop(*_):
    dump()
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
app = Sphinx(docs, docs, html, html + "/.doctrees", "html", confoverrides=overrides,
             warningiserror=True, keep_going=True, parallel=1, freshenv=True)
app.connect("build-finished", lambda app, exc: dump(), priority=100)
try:
    app.build()
except Exception as exc:  # sphinx-gallery raises after listing the failing pages
    dump()
    print(f"gpu_build: Sphinx ended with {type(exc).__name__}: {exc}", flush=True)
    sys.exit(1)
dump()
sys.exit(app.statuscode)
"""


class Log:
    """Lines to the terminal and to ``build.log``, with the seconds since the start."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.began = time.monotonic()

    def __call__(self, line: str) -> None:
        text = f"[gpu_build {time.monotonic() - self.began:6.0f} s] {line}"
        print(text, flush=True)
        with self.path.open("a", encoding="utf-8") as log:  # Sphinx writes to it between
            log.write(text + "\n")


def install_wheels(wheels: Path, target: Path, log: Log) -> bool:
    """``pip install --no-index --no-deps --target`` every wheel in ``wheels``; False if none or pip failed."""
    found = sorted(wheels.glob("*.whl"))
    if not found:
        log(f"no wheels in {wheels}: run `nox -s gpu_wheels` where pip reaches PyPI")
        return False
    log(f"installing {len(found)} wheels from {wheels} into {target}")
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--no-deps",
        "--no-compile",
        "--no-cache-dir",
        "--upgrade",
        "--target",
        str(target),
        *map(str, found),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        log(f"pip failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        return False
    return True


def check_machine(env: dict[str, str], device: str, log: Log) -> bool:
    """Log what the build will run on; False when it cannot build (missing device, package)."""
    probe = (
        "import json, sys, torch\n"
        "print(json.dumps({'python': sys.version.split()[0], 'torch': torch.__version__,\n"
        "  'cuda_build': torch.version.cuda, 'cuda': torch.cuda.is_available(),\n"
        "  'gpu': torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,\n"
        "  'capability': torch.backends.cpu.get_cpu_capability(),\n"
        "  'threads': torch.get_num_threads()}))\n"
    )
    seen = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False
    )
    if seen.returncode != 0:
        log(f"torch cannot be imported:\n{seen.stderr[-3000:]}")
        return False
    facts = json.loads(seen.stdout.splitlines()[-1])
    log(
        f"Python {facts['python']}, torch {facts['torch']} (torch.version.cuda "
        f"{facts['cuda_build']}), CUDA available: {facts['cuda']}, GPU: {facts['gpu']}, "
        f"CPU capability {facts['capability']}, {facts['threads']} threads, EFFPT_DEVICE={device}"
    )
    fit = True
    if device == "cuda" and not facts["cuda"]:
        log(
            "EFFPT_DEVICE=cuda but torch.cuda.is_available() is False: not building on CPU fallbacks"
        )
        fit = False
    compiler = shutil.which(env.get("CXX", "c++")) or shutil.which("g++")
    log(f"C++ compiler: {compiler or 'NONE (torch.compile on the CPU will fail)'}")
    fit = fit and compiler is not None
    versions = subprocess.run(
        [sys.executable, "-c", _VERSIONS, *NEEDED],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if versions.returncode != 0:
        log(f"the packages could not be checked:\n{versions.stderr[-3000:]}")
        return False
    checked = json.loads(versions.stdout)
    found = checked["found"]
    missing = [name for name in NEEDED if found.get(name) is None]
    log("packages: " + ", ".join(f"{n} {found.get(n) or 'MISSING'}" for n in NEEDED))
    if missing:
        log(f"missing packages: {missing}; `nox -s gpu_wheels` downloads them into .whl/")
        fit = False
    if checked["conflicts"]:  # logged, not fatal: the build may still work, and says so
        log("WARNING: requirements not met: " + "; ".join(checked["conflicts"]))
    return fit


_VERSIONS = r"""
import importlib.metadata, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        found[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        found[name] = None
# Each needed distribution's own requirements, against what is installed (pip check for
# the build's packages alone: the machine's other packages are not ours to judge).
conflicts = []
try:
    from packaging.requirements import Requirement
except ImportError:
    Requirement = None
seen, todo = {"torch"}, [n for n in sys.argv[1:] if found[n]]
while Requirement is not None and todo:
    name = todo.pop()
    if name in seen:
        continue
    seen.add(name)
    for text in importlib.metadata.requires(name) or []:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            have = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            conflicts.append(f"{name} needs {req}, which is missing")
            continue
        if not req.specifier.contains(have, prereleases=True):
            conflicts.append(f"{name} needs {req}, found {have}")
        todo.append(req.name)
print(json.dumps({"found": found, "conflicts": conflicts}))
"""


def copy_tree(work: Path) -> Path:
    """A fresh copy of the repository (no outputs of earlier builds) in ``work/effpt``."""
    tree = work / "effpt"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(*NOT_COPIED), symlinks=True)
    return tree


def run_sphinx(
    tree: Path,
    out: Path,
    env: dict[str, str],
    device: str,
    deadline_s: float,
    log: Log,
    example: str | None = None,
) -> tuple[int | None, dict[str, str]]:
    """Build the English site in ``tree``; the exit status (None: stopped) and the failing pages.

    ``example`` executes only the pages whose file name contains it (as ``nox -s docs
    -- --example``), for a quick check of this script; the others are then not run.
    """
    docs = tree / "docs"
    html = docs / "_build" / "html"
    overrides = {}
    if example:
        name = example.removeprefix("plot_").removesuffix(".py")
        overrides["sphinx_gallery_conf.filename_pattern"] = f"/plot_.*{name}"
    command = [sys.executable, "-c", CHILD, str(out), str(docs), str(html), device]
    command += [str(Path(__file__).resolve().parent), json.dumps(overrides)]
    log(f"building the English site in {docs}, deadline {deadline_s:.0f} s")
    with (out / "build.log").open("a", encoding="utf-8") as sink:
        child = subprocess.Popen(command, cwd=tree, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            status: int | None = child.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            log(f"the build passed its deadline of {deadline_s:.0f} s: stopping it")
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=20)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            status = None
    failing_file = out / "failing.json"
    failing = json.loads(failing_file.read_text()) if failing_file.is_file() else {}
    failing_file.unlink(missing_ok=True)
    by_page = {}
    for path, why in failing.items():
        p = Path(path)
        by_page[f"{p.parent.name}/{p.stem}"] = why
    return status, by_page


def archive(html: Path, out: Path, log: Log) -> None:
    """The built site as ``out/site.tar.xz``, if it fits what a device call brings back."""
    if not (html / "index.html").is_file():
        log(f"no site to archive: {html / 'index.html'} is missing")
        return
    path = out / "site.tar.xz"
    with tarfile.open(path, "w:xz", preset=6) as tar:
        tar.add(html, arcname="html", filter=lambda t: None if ".doctrees" in t.name else t)
    size = path.stat().st_size
    if size > MAX_ARCHIVE_BYTES:
        path.unlink()
        log(f"the site's archive is {size / 2**20:.1f} MiB, over 16 MiB: not written")
    else:
        log(f"wrote {path.name}: {size / 2**20:.1f} MiB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-build-out")))
    parser.add_argument("--wheels", type=Path, default=ROOT / ".whl")
    parser.add_argument("--no-wheels", action="store_true", help="use this Python's packages")
    parser.add_argument("--work", type=Path, default=Path("/tmp/effpt-gpu-build"))
    parser.add_argument("--deadline-s", type=float, default=480.0)
    parser.add_argument("--example", help="execute only pages whose name has this (a check)")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "build.log").write_text("", encoding="utf-8")
    log = Log(out / "build.log")
    device = os.environ.get("EFFPT_DEVICE", "cuda").strip().lower()
    env = {**os.environ, **RUN_ENV, "EFFPT_DEVICE": device, "EFFPT_INTERSPHINX": "0"}
    paths = [str(ROOT / "src")]
    args.work.mkdir(parents=True, exist_ok=True)
    if not args.no_wheels:
        target = args.work / "site-packages"
        shutil.rmtree(target, ignore_errors=True)
        if not install_wheels(args.wheels, target, log):
            return 2
        paths.insert(0, str(target))
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if not check_machine(env, device, log):
        log("this machine cannot build the site: see above")
        return 2
    tree = copy_tree(args.work)
    began = time.monotonic()
    status, failing = run_sphinx(tree, out, env, device, args.deadline_s, log, args.example)
    seconds = time.monotonic() - began
    log(
        f"Sphinx {'was stopped' if status is None else f'exited with {status}'} after {seconds:.0f} s"
    )

    pages = evidence.pages_from_gallery(tree / "docs", root=tree, failures=failing)
    if status is None:
        for entry in pages.values():
            if not entry["ran"] and entry["error"].startswith("not executed"):
                entry["error"] = (
                    f"not reached before the build's deadline of {args.deadline_s:.0f} s"
                )
    machine = json.loads((out / "machine.json").read_text())
    (out / "machine.json").unlink()
    source = "gpu build" if machine["kind"] == "cuda" else "docs build"
    record = evidence.make_record(
        machine, pages, source=source, environment=evidence.timing_environment(env)
    )
    path = evidence.write_record(record, out)
    ran = [p for p, e in pages.items() if e["ran"]]
    lines = [
        f"{page}: "
        + (
            f"ran in {e['seconds']:.1f} s on {e['device']}"
            if e["ran"]
            else "NOT RUN"
            if e["error"].startswith(("not executed", "not reached"))
            else "STOPPED"
            if e["error"].startswith("did not finish")
            else "FAILED"
        )
        + (f", peak GPU {e['peak_gpu_bytes'] / 2**20:.0f} MiB" if e["peak_gpu_bytes"] else "")
        + f", {len(e['expectations'])} expectations, {len(e['claims'])} claims"
        + ("" if e["ran"] else f": {e['error'].strip().splitlines()[-1]}")
        for page, e in pages.items()
    ]
    (out / "pages.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for line in lines:
        log(line)
    log(f"wrote {path.name}: {len(ran)} of {len(pages)} pages ran; build took {seconds:.0f} s")
    archive(tree / "docs" / "_build" / "html", out, log)
    return 0 if status == 0 and len(ran) == len(pages) else 1


if __name__ == "__main__":
    sys.exit(main())
