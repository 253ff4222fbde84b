"""Run one gallery page in a subprocess, alone in an empty folder: the one page runner.

Used by every place that runs a page outside the docs build: the tests session's
plain-python run (tests/test_examples.py), the reader's test (tests/reader), the torch
matrix (docs/_tools/compat_run.py) and the machine stand-ins (docs/_tools/standins.py).
It imports nothing but the standard library, so any interpreter can load it by path
(tests/conftest.py and the tools put docs/_tools on ``sys.path``); the page itself runs
under the interpreter the caller names (the reader's, a matrix entry's, the tests').

What every run gets:

* the page copied alone into an empty folder, run there as ``python plot_x.py`` (or,
  when a start method, the warning policy or a warning log is asked for, through a
  small bootstrap that then runs the page as ``__main__`` exactly as ``python`` would;
  or, with ``as_gallery``, as sphinx-gallery runs it: its code executed in a fresh dict
  of globals named ``__main__``, with no ``__file__``);
* a clean environment: this process's variables without ``PYTHON*``, ``EFFPT_*``,
  ``VIRTUAL_ENV`` and ``NOX_*`` and without ``PATH`` entries inside the repository
  (nothing of the repository or of nox leaks into the page), plus ``MPLBACKEND=Agg``
  (figures drawn off-screen), plus what the caller adds. Nothing that changes a timing is
  set here: a page measures what a reader's plain run measures;
* ``EFFPT_EXPECTATIONS_FILE`` and ``EFFPT_CLAIMS_FILE`` naming files in that folder, so
  the caller reads the page's expectations and claim outcomes back
  (:meth:`PageRun.expectations_file`, :meth:`PageRun.claims_file`, then
  ``effpt.expect.read_expectations`` or ``effpt.claims.read_outcomes`` in an
  interpreter that has effpt);
* a timeout that ends the page and every process it started (its own session); so
  does an interruption of the caller.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXT = ROOT / "docs" / "_ext"
SCRIPTS = sorted((ROOT / "examples").rglob("plot_*.py"))
#: Prefixes of the variables a page never inherits: they would point it at the
#: repository, at nox's environment or at the site's records.
STRIPPED_PREFIXES = ("PYTHON", "EFFPT_", "VIRTUAL_ENV", "NOX_")
#: What every page run gets: only what changes no measurement (tests/test_build_environment.py).
BASE_ENV = {"MPLBACKEND": "Agg"}
EXPECTATIONS_NAME = "expectations.jsonl"
CLAIMS_NAME = "claims.jsonl"
#: Pages whose code starts processes (DataLoader workers, distributed ranks).
STARTS_PROCESSES = re.compile(r"num_workers\s*=\s*[1-9a-z]|multiprocessing|torch\.distributed")
START_METHODS = ("fork", "forkserver", "spawn")

# Runs a page as `python plot_x.py` would (or, with as_gallery, as sphinx-gallery does:
# no __file__), after choosing the start method, applying the site's warning policy and
# logging shown warnings, as asked in the JSON of argv[1].
BOOTSTRAP = r"""
import json, runpy, sys
options = json.loads(sys.argv[1])
if options.get("start_method"):
    import multiprocessing as mp
    mp.set_start_method(options["start_method"], force=True)
if options.get("warning_policy"):
    from effpt_site.hooks import apply_warning_policy
    apply_warning_policy()
if options.get("warnings_log"):
    import warnings
    def record(message, category, filename, lineno, file=None, line=None):
        with open(options["warnings_log"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"category": category.__name__, "message": str(message),
                                  "where": f"{filename}:{lineno}"}) + "\n")
    warnings.showwarning = record
sys.argv = sys.argv[2:]
if options.get("as_gallery"):
    with open(sys.argv[0], encoding="utf-8") as page:
        code = compile(page.read(), sys.argv[0], "exec")
    exec(code, {"__name__": "__main__"})
else:
    runpy.run_path(sys.argv[0], run_name="__main__")
"""


def page_id(script: Path) -> str:
    """``family/plot_x.py``: how tests and reports name a page (its name if elsewhere)."""
    path = Path(script).resolve()
    if path.is_relative_to(ROOT / "examples"):
        return str(path.relative_to(ROOT / "examples"))
    return path.name


def starts_processes(script: Path) -> bool:
    """Whether the page's code starts processes (then start methods matter)."""
    return bool(STARTS_PROCESSES.search(Path(script).read_text(encoding="utf-8")))


def _inside_repo(path: str) -> bool:
    return Path(path).resolve().is_relative_to(ROOT)


def outside_temp_dir() -> Path:
    """A temporary folder's parent outside the repository (nox points TMPDIR into .nox)."""
    for candidate in (tempfile.gettempdir(), "/tmp", "/var/tmp"):
        if Path(candidate).is_dir() and not _inside_repo(candidate):
            return Path(candidate)
    return Path(tempfile.gettempdir())


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without what must not leak into a page, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(STRIPPED_PREFIXES)}
    # nox puts its environment's bin first on PATH: nothing of the repository stays there.
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and not _inside_repo(p)
    )
    env.update(BASE_ENV)
    env.update(extra or {})
    return env


@dataclass
class PageRun:
    """What one run of a page did."""

    script: Path
    how: str
    returncode: int | None  # None when it timed out
    stdout: str
    stderr: str
    seconds: float
    folder: Path
    timeout_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def expectations_file(self) -> Path:
        """The JSON-lines file the page's ``effpt.expect.expect`` calls appended to."""
        return self.folder / EXPECTATIONS_NAME

    @property
    def claims_file(self) -> Path:
        """The JSON-lines file the page's ``effpt.claims`` checks appended their outcomes to."""
        return self.folder / CLAIMS_NAME

    def expectation_dicts(self) -> list[dict]:
        """The page's expectations as dicts (no effpt needed; see read_expectations)."""
        path = self.expectations_file
        if not path.is_file():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    def failure(self, tail: int = 3000) -> str:
        """Why the run failed, in one message; a missing module names the install line."""
        missing = re.search(r"ModuleNotFoundError: No module named '([^']+)'", self.stderr)
        if missing:
            return (
                f"{page_id(self.script)} imports {missing.group(1)!r}, which its install line "
                "does not provide"
            )
        if self.timed_out:
            head = f"{page_id(self.script)} ({self.how}) timed out after {self.timeout_s:.0f} s"
        else:
            head = f"{page_id(self.script)} ({self.how}) exited with {self.returncode}"
        return f"{head}\n--- stderr (last {tail} chars) ---\n{self.stderr[-tail:]}"


def run_page(
    script: Path,
    folder: Path,
    *,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
    start_method: str | None = None,
    warning_policy: bool = False,
    warnings_log: Path | None = None,
    as_gallery: bool = False,
    timeout_s: float = 900,
) -> PageRun:
    """Copy ``script`` alone into the empty ``folder`` and run it there with ``python``.

    ``env`` is added to the clean environment (see :func:`clean_env`). With
    ``warning_policy`` the site's warning policy (docs/_ext) applies, as in the docs
    build: ``docs/_ext`` goes on the page's ``PYTHONPATH``, nothing else of the
    repository. ``warnings_log`` collects the warnings shown (not raised) as JSON lines.
    With ``as_gallery`` the page runs as the docs build and a notebook run it: without a
    ``__file__``, so a page whose workers re-import it by path would fail here too.
    A run that outlives ``timeout_s`` is ended with every process it started.
    """
    script = Path(script).resolve()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(script, folder / script.name)
    expectations = folder / EXPECTATIONS_NAME
    expectations.write_text("", encoding="utf-8")
    claims = folder / CLAIMS_NAME
    claims.write_text("", encoding="utf-8")
    extra = {
        **(env or {}),
        "EFFPT_EXPECTATIONS_FILE": str(expectations),
        "EFFPT_CLAIMS_FILE": str(claims),
    }
    if warning_policy:
        extra["PYTHONPATH"] = str(EXT)
    options = {
        "start_method": start_method,
        "warning_policy": warning_policy,
        "warnings_log": str(warnings_log) if warnings_log else None,
        "as_gallery": as_gallery,
    }
    if any(options.values()):
        command = [python, "-c", BOOTSTRAP, json.dumps(options), script.name]
    else:
        command = [python, script.name]
    hows = ["as sphinx-gallery runs it"] if as_gallery else []
    hows += [f"start method {start_method}"] if start_method else []
    how = ", ".join(hows) or f"python {script.name}"
    began = time.perf_counter()
    # Its own session, so that a timeout ends the workers and ranks the page started too.
    with subprocess.Popen(
        command,
        cwd=folder,
        env=clean_env(extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
            returncode: int | None = process.returncode
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            stdout, stderr = process.communicate()
            returncode = None
        except BaseException:  # interrupted (Ctrl-C, SIGTERM): leave nothing behind
            _kill_group(process.pid)
            raise
    return PageRun(
        script, how, returncode, stdout, stderr, time.perf_counter() - began, folder, timeout_s
    )


def _kill_group(pgid: int) -> None:
    with suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


# Keeps one core busy with arithmetic until its deadline, or until its parent is gone.
_LOAD = r"""
import os, sys, time
deadline, parent = time.monotonic() + float(sys.argv[1]), os.getppid()
x = 0
while time.monotonic() < deadline and os.getppid() == parent:
    for i in range(20000):
        x = (x * 1103515245 + i) % 2147483648
"""


class Load:
    """The load processes of :func:`busy_cores`: their ids and the CPU time they used."""

    def __init__(self, workers: list[subprocess.Popen]) -> None:
        self.workers = workers
        self.began = time.monotonic()

    @property
    def pids(self) -> list[int]:
        return [w.pid for w in self.workers]

    def cores_used(self) -> float | None:
        """Cores' worth of CPU the load used so far (Linux: /proc), None where unknown."""
        ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        total = 0.0
        for pid in self.pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                return None
            total += (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
        return total / max(time.monotonic() - self.began, 1e-9)


@contextmanager
def busy_cores(cores: int | None = None, *, at_most_s: float = 1000) -> Iterator[Load]:
    """Keep ``cores`` cores (all by default) busy with other work inside the ``with``.

    One Python process per core spins on integer arithmetic at normal priority. Each
    is bounded twice: it stops by itself after ``at_most_s`` seconds and as soon as
    the process that started it is gone, so none is ever left behind; leaving the
    ``with`` stops them all at once. Yields a :class:`Load`.
    """
    count = cores or os.cpu_count() or 1
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _LOAD, str(at_most_s)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Each in a session of its own, as the page is: where the kernel shares the CPU
            # between sessions (autogroup), one session of load would weigh as one process.
            start_new_session=True,
        )
        for _ in range(count)
    ]
    try:
        yield Load(workers)
    finally:
        for w in workers:
            w.kill()
        for w in workers:
            w.wait()


def tail(text: str, lines: int = 25) -> str:
    """The last ``lines`` lines of ``text``."""
    return "\n".join(text.splitlines()[-lines:])


def scripts_matching(patterns: Sequence[str]) -> list[Path]:
    """Gallery pages whose path contains any of ``patterns`` (all without patterns)."""
    if not patterns:
        return list(SCRIPTS)
    return [s for s in SCRIPTS if any(p in page_id(s) for p in patterns)]
