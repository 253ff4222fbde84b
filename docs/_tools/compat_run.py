"""One entry of the torch matrix: the unit tests and every gallery page on this torch.

Run by ``nox -s compat -- VERSION`` with the interpreter of an environment that has that
torch installed. Writes one JSON file the docs build reads (docs/compat/torch-VERSION.json):
whether each page ran, how long it took, the warnings torch and the others raised while
it ran (deprecations of torch, NumPy, effpt or the page fail it, as in the docs build),
its printed output, and the unit tests' counts. A page that fails is recorded with its
traceback and does not stop the others.

Usage: python compat_run.py OUT_JSON [pytest options for the unit tests ...]

With ``EFFPT_COMPAT_PAGES=name,other`` only the pages whose file name contains one of
the names run; the other pages' entries are kept from OUT_JSON as it was (a page added
since the last full run), and the file says which pages this run covered.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

from page_runner import ROOT, SCRIPTS, run_page

PAGE_TIMEOUT_S = 600


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
