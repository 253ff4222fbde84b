"""One entry of the torch matrix: the unit tests and every gallery page on this torch.

Run by ``nox -s compat -- VERSION`` with the interpreter of an environment that has that
torch installed. Writes one JSON file the docs build reads (docs/compat/torch-VERSION.json):
whether each page ran, how long it took, the warnings torch and the others raised while
it ran (deprecations of torch, NumPy, effpt or the page fail it, as in the docs build),
its printed output, and the unit tests' counts. A page that fails is recorded with its
traceback and does not stop the others.

Usage: python compat_run.py OUT_JSON [pytest options for the unit tests ...]
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXT = ROOT / "docs" / "_ext"
PAGE_TIMEOUT_S = 600

# Runs one page as `python plot_x.py` would, under the site's warning policy, and
# appends every warning that was shown (not turned into an error) to a JSON-lines file.
PAGE_RUNNER = r"""
import json, runpy, sys, warnings
from effpt_site.hooks import apply_warning_policy
log_path, script = sys.argv[1], sys.argv[2]
apply_warning_policy()
def record(message, category, filename, lineno, file=None, line=None):
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(json.dumps({"category": category.__name__, "message": str(message),
                              "where": f"{filename}:{lineno}"}) + "\n")
warnings.showwarning = record
sys.argv = [script]
runpy.run_path(script, run_name="__main__")
"""


def run_page(script: Path) -> dict:
    """Run one page in an empty folder; return what happened."""
    with tempfile.TemporaryDirectory(prefix="effpt-compat-") as folder:
        log = Path(folder) / "warnings.jsonl"
        env = {
            **os.environ,
            "MPLBACKEND": "Agg",
            "PYTHONHASHSEED": "0",
            "PYTHONPATH": str(EXT),
        }
        env.pop("EFFPT_RECORDS_FILE", None)
        began = time.perf_counter()
        try:
            result = subprocess.run(
                [sys.executable, "-c", PAGE_RUNNER, str(log), str(script)],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=PAGE_TIMEOUT_S,
                check=False,
            )
            returncode, stdout, stderr = result.returncode, result.stdout, result.stderr
        except subprocess.TimeoutExpired as exc:
            returncode, stdout = -1, exc.stdout or ""
            stderr = f"timed out after {PAGE_TIMEOUT_S} s"
            stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
        seconds = time.perf_counter() - began
        warned = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    unique = list({(w["category"], w["message"]): w for w in warned}.values())
    return {
        "ok": returncode == 0,
        "seconds": round(seconds, 1),
        "warnings": unique,
        "output": stdout,
        "error": None if returncode == 0 else stderr[-4000:],
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
    out = Path(sys.argv[1])
    import torch  # noqa: PLC0415  (the torch of this environment)

    from effpt.device import describe  # noqa: PLC0415

    pages = {}
    for script in sorted((ROOT / "examples").rglob("plot_*.py")):
        result = run_page(script)
        status = "ok" if result["ok"] else "FAILED"
        print(f"{script.relative_to(ROOT)}: {status} in {result['seconds']} s")
        if not result["ok"]:
            print(result["error"][-1500:])
        pages[script.stem] = result
    units = run_unit_tests(sys.argv[2:])
    data = {
        "torch": torch.__version__.split("+")[0],
        "python": platform.python_version(),
        "machine": describe("cpu"),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "unit_tests": units,
        "pages": pages,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    failed_pages = [name for name, page in pages.items() if not page["ok"]]
    print(
        f"torch {data['torch']}: {len(pages) - len(failed_pages)} of {len(pages)} pages ran; "
        f"unit tests: {units['tests']} run, {units['failures'] + units['errors']} failed"
    )
    return 1 if failed_pages or units["returncode"] != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
