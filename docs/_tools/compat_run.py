"""One entry of the torch matrix: the unit tests and every gallery page on this torch.

Run by ``nox -s compat -- VERSION`` with the interpreter of an environment that has that
torch installed. Writes one JSON file the docs build reads (docs/compat/torch-VERSION.json):
whether each page ran, how long it took, the warnings torch and the others raised while
it ran (deprecations of torch, NumPy, effpt or the page fail it, as in the docs build),
its printed output, and the unit tests' counts. A page that fails is recorded with its
traceback and does not stop the others.

Usage: python compat_run.py OUT_JSON [pytest options for the unit tests ...]

Before that, ``python compat_run.py prepare VERSION ENV_DIR CONSTRAINTS [REQUIREMENT ...]``
(run by the session with any interpreter) makes the matrix entry's environment: the
constraints without their pins of torch and of torch's own dependencies, plus
``torch==VERSION`` (:func:`matrix_constraints`), effpt and the requirements installed
into ENV_DIR under them; an environment already made from the same inputs is kept. A
torch that pip cannot install there ends it with pip's own reason
(:func:`install_error`).

With ``EFFPT_COMPAT_PAGES=name,other`` only the pages whose file name contains one of
the names run; the other pages' entries are kept from OUT_JSON as it was (a page added
since the last full run), and the file says which pages this run covered.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import venv
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

from page_runner import ROOT, SCRIPTS, run_page

PAGE_TIMEOUT_S = 600
# torch's own dependencies: torch pins some of them exactly (2.6 needs sympy==1.13.1), so
# in a matrix entry torch chooses their versions and our pins of them are dropped.
TORCH_OWN = re.compile(
    r"^(sympy|mpmath|networkx|filelock|fsspec|jinja2|typing[-_]extensions|setuptools|triton"
    r"|nvidia[-_].*)==",
    re.IGNORECASE,
)
VERSION = re.compile(r"^\d+\.\d+\.\d+$")


def matrix_constraints(constraints: str, version: str) -> tuple[str, list[str]]:
    r"""The constraints of one matrix entry, and the pins dropped for torch to choose.

    Our pin of torch becomes ``torch==VERSION``; our pins of torch's own dependencies go.

    Examples
    --------
    >>> text, dropped = matrix_constraints("numpy==2.3.1\ntorch==2.13.0\nsympy==1.14.0\n", "2.6.0")
    >>> print(text, end="")
    numpy==2.3.1
    torch==2.6.0
    >>> dropped
    ['sympy==1.14.0']
    """
    pins, dropped = [], []
    for line in constraints.splitlines():
        if line.startswith("torch=="):
            continue
        (dropped if TORCH_OWN.match(line) else pins).append(line)
    return "\n".join([*pins, f"torch=={version}", ""]), dropped


def install_error(stderr: str) -> str:
    r"""What pip said was wrong: its ``ERROR`` lines, else the end of what it printed.

    Examples
    --------
    >>> install_error("Looking in links\nERROR: Could not find a version that satisfies "
    ...               "torch==1.0.0\nERROR: No matching distribution found for torch==1.0.0\n")
    'ERROR: Could not find a version that satisfies torch==1.0.0 ERROR: No matching distribution found for torch==1.0.0'
    >>> install_error("killed\n")
    'killed'
    """
    reason = [line for line in stderr.splitlines() if line.startswith("ERROR")]
    return " ".join(reason) or stderr.strip()[-800:]


def inputs_key(constraints: str, requirements: list[str]) -> str:
    """What an entry's environment is made from, as the hash its marker file holds."""
    return hashlib.sha256(repr((constraints, requirements)).encode()).hexdigest()


def prepare(version: str, env_dir: Path, constraints: Path, requirements: list[str]) -> int:
    """Make (or keep) the environment of one matrix entry; see the module's docstring.

    The constraints it used are written as ENV_DIR/constraints.txt, passed with ``-c``
    and as PIP_CONSTRAINT (which also replaces any machine-wide pip constraint that
    would cap torch). A marker holds a hash of the inputs, written only after a
    successful install, so a failed one runs again.
    """
    if not VERSION.match(version):
        print(f"not a torch version: {version!r} (e.g. 2.15.0)")
        return 2
    text, dropped = matrix_constraints(constraints.read_text(encoding="utf-8"), version)
    print("torch chooses its own dependencies here: " + ", ".join(dropped))
    python = env_dir / "bin" / "python"
    marker = env_dir / ".effpt-installed"
    key = inputs_key(text, requirements)
    if python.exists() and marker.is_file() and marker.read_text() == key:
        print(f"{env_dir} was made from the same constraints: kept")
        return 0
    venv.create(env_dir, clear=True, with_pip=True)
    used = env_dir / "constraints.txt"
    used.write_text(text, encoding="utf-8")
    command = [str(python), "-m", "pip", "install", "-c", str(used), f"torch=={version}"]
    command += ["-e", str(ROOT), *requirements]
    print(" ".join(command), flush=True)
    began = time.monotonic()
    result = subprocess.run(
        command,
        env={**os.environ, "PIP_CONSTRAINT": str(used)},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        print(f"torch=={version} cannot be installed here: {install_error(result.stderr)}")
        return 1
    marker.write_text(key)
    print(f"Installed torch {version} in {time.monotonic() - began:.0f} s")
    return 0


def run_page_here(script: Path) -> dict:
    """Run one page alone in an empty folder with this torch, under the warning policy."""
    with tempfile.TemporaryDirectory(prefix="effpt-compat-") as folder:
        log = Path(folder) / "warnings.jsonl"
        result = run_page(
            script,
            Path(folder) / "page",
            env={"PYTHONHASHSEED": "0"},
            warning_policy=True,
            warnings_log=log,
            timeout_s=PAGE_TIMEOUT_S,
        )
        warned = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    unique = list({(w["category"], w["message"]): w for w in warned}.values())
    error = None
    if result.timed_out:
        error = f"timed out after {PAGE_TIMEOUT_S} s"
    elif not result.ok:
        error = result.stderr[-4000:]
    return {
        "ok": result.ok,
        "seconds": round(result.seconds, 1),
        "warnings": unique,
        "output": result.stdout,
        "error": error,
    }


def run_unit_tests(extra: list[str]) -> dict:
    """pytest over tests/, src/effpt and docs/_ext, without the gallery scripts."""
    with tempfile.TemporaryDirectory() as folder:
        junit = Path(folder) / "junit.xml"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-m",
                "not gallery",
                "-p",
                "no:cacheprovider",
                f"--junitxml={junit}",
                "-q",
                *extra,
            ],
            cwd=ROOT,
            env={**os.environ, "MPLBACKEND": "Agg"},
            capture_output=True,
            text=True,
            check=False,
        )
        print(result.stdout[-3000:])
        failed = []
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        if junit.exists():
            suite = ET.parse(junit).getroot().find("testsuite")
            for key in counts:
                counts[key] = int(suite.get(key, 0))
            for case in suite.iter("testcase"):
                if case.find("failure") is not None or case.find("error") is not None:
                    failed.append(f"{case.get('classname')}::{case.get('name')}")
    return {**counts, "failed": failed, "returncode": result.returncode}


def main() -> int:
    if sys.argv[1:2] == ["prepare"]:
        version, env_dir, constraints, *requirements = sys.argv[2:]
        return prepare(version, Path(env_dir), Path(constraints), requirements)
    out = Path(sys.argv[1])
    import torch  # noqa: PLC0415  (the torch of this environment)

    from effpt.device import this_machine  # noqa: PLC0415

    wanted = [w for w in os.environ.get("EFFPT_COMPAT_PAGES", "").split(",") if w]
    scripts = [s for s in SCRIPTS if not wanted or any(w in s.stem for w in wanted)]
    if wanted and not scripts:
        print(f"no page's file name contains any of {wanted}")
        return 2
    kept = {}
    if wanted and out.is_file():
        previous = json.loads(out.read_text(encoding="utf-8"))
        if previous.get("torch") != torch.__version__.split("+")[0]:
            print(f"{out} is for torch {previous.get('torch')}: run every page instead")
            return 2
        kept = {k: v for k, v in previous["pages"].items() if k not in {s.stem for s in scripts}}
    pages = {}
    for script in scripts:
        result = run_page_here(script)
        status = "ok" if result["ok"] else "FAILED"
        print(f"{script.relative_to(ROOT)}: {status} in {result['seconds']} s")
        if not result["ok"]:
            print(result["error"][-1500:])
        pages[script.stem] = result
    units = run_unit_tests(sys.argv[2:])
    merged = {**kept, **pages}
    data = {
        "torch": torch.__version__.split("+")[0],
        "python": platform.python_version(),
        "machine": this_machine("cpu").to_dict(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "unit_tests": units,
        "pages": {s.stem: merged[s.stem] for s in SCRIPTS if s.stem in merged},
    }
    if wanted:
        data["partial_run"] = sorted(pages)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    failed_pages = [name for name, page in data["pages"].items() if not page["ok"]]
    print(
        f"torch {data['torch']}: {len(data['pages']) - len(failed_pages)} of "
        f"{len(data['pages'])} pages ran; "
        f"unit tests: {units['tests']} run, {units['failures'] + units['errors']} failed"
    )
    return 1 if failed_pages or units["returncode"] != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
