"""Machine stand-ins: every gallery page, run as a reader runs it, on machines unlike this one.

Run by ``nox -s standins`` with the interpreter of the reader's environment (effpt's
wheel and nothing else of the repository). Each page is copied alone into an empty
folder and run with the page runner (docs/_tools/page_runner.py) on each stand-in.
The stand-ins are defined in one place, :data:`STANDINS` below (the machine each stands
for, what it sets, its start method, what its probe must find); ``--list`` prints them,
and every other text that names them points here.

The kernel stand-ins run at one thread so that a verdict that differs between them and
``one-thread`` is the kernels' doing alone, and one that differs between ``one-thread``
and this machine's own run is the threads'.

Each stand-in has its own Inductor cache, as a separate machine would. A probe run
first checks that the stand-in took effect (torch's CPU capability, oneDNN's ISA,
Inductor's vector ISA, the threads, the CPU the load processes really used); a
stand-in that did not take effect fails. Pages that start processes run under a
different start method on each stand-in, so fork, forkserver and spawn are all covered.

The pages of the one-thread stand-ins run two at a time (one per core), unless
``--serial``; the busy stand-in runs one page at a time. The budget reads the seconds
of that run: a one-thread stand-in stands for a one-core machine, where the worker
processes a page starts share its one core, as two pages on two cores share them.

Writes docs/_build/standins/report.json (each page's expectations, claim outcomes and
source hash per stand-in: ``nox -s evidence`` makes a record of each) and prints, per page, each expectation's
verdict on each stand-in (and on this machine's own run, from ``nox -s reader``, when
it left its expectations in docs/_build/standins/native), marking those that flipped.
Names each page that took longer than its budget (:data:`BUDGET_S`) on a stand-in, in
a line "over budget (15 s): <page> <seconds> s on <stand-in>" (not a failure).
Exits 1 when any page failed on any stand-in, naming stand-in, page and stderr tail.

Usage: python standins.py [-k SUBSTRING ...] [--only NAME ...] [--serial] [--out DIR] [--list]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shutil
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from page_runner import (
    ROOT,
    busy_cores,
    outside_temp_dir,
    page_id,
    run_page,
    scripts_matching,
    starts_processes,
    tail,
)

OUT = ROOT / "docs" / "_build" / "standins"
TIMEOUT_S = 900
#: Seconds a page may take on any machine, stand-ins included (issue 35): a page over it
#: is named in the summary, and the run does not fail for it.
BUDGET_S = 15


@dataclass(frozen=True)
class StandIn:
    name: str
    machine: str
    env: dict[str, str]
    start_method: str
    busy: bool = False
    #: What the probe must find for the stand-in to count as taking effect.
    checks: dict[str, object] = field(default_factory=dict)

    @property
    def one_thread(self) -> bool:
        return self.env.get("OMP_NUM_THREADS") == "1"


ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _kernels(name: str, machine: str, caps: tuple[str, str, str, str], start: str) -> StandIn:
    """A kernel stand-in: torch's and oneDNN's kernels capped, at one thread.

    ``caps`` is (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA, the ISA oneDNN must then report,
    the vector ISA Inductor must then pick); the probe checks the last three and torch's
    capability, so a cap that did not take effect fails the stand-in.
    """
    aten, onednn, onednn_reports, inductor_picks = caps
    return StandIn(
        name,
        machine,
        {"ATEN_CPU_CAPABILITY": aten, "ONEDNN_MAX_CPU_ISA": onednn, **ONE_THREAD},
        start,
        checks={
            "capability": aten.upper(),
            "onednn_isa": onednn_reports,
            "inductor_isa": inductor_picks,
            "threads": 1,
        },
    )


#: The kernel stand-ins run at one thread too: a flip between them and ``one-thread``
#: is then the kernels' doing alone (one between ``one-thread`` and this machine's own
#: run, the threads'), and all three run two pages at a time on a two-core machine.
STANDINS = (
    StandIn(
        "one-thread",
        "one thread only (a one-core laptop or VM)",
        ONE_THREAD,
        "spawn",
        checks={"threads": 1},
    ),
    _kernels(
        "default-kernels",
        "torch's portable kernels, no AVX (an old or small CPU)",
        ("default", "SSE41", "Intel SSE4.1", "None"),
        "forkserver",
    ),
    _kernels(
        "avx2",
        "AVX2 kernels, no AVX-512 or AMX (a desktop CPU)",
        ("avx2", "AVX2", "Intel AVX2", "avx2"),
        "fork",
    ),
    StandIn(
        "busy",
        "every core busy with other work",
        {},
        "fork",
        busy=True,
        checks={"load_share_vs_probe": 0.5},
    ),
)

# What the stand-in's interpreter sees: printed as one JSON line.
PROBE = r"""
import json, os, resource, time
import torch
x = torch.randn(2, 16, 16, 16)
conv = torch.nn.Conv2d(16, 16, 3)
with torch.no_grad(), torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
    conv(x)
try:
    from torch._inductor.cpu_vec_isa import pick_vec_isa
    isa = pick_vec_isa()
    inductor_isa = str(isa) if isa else "None"
except Exception as exc:  # an older torch: report, do not fail the probe
    inductor_isa = f"unknown ({type(exc).__name__})"
began, cpu = time.perf_counter(), time.process_time()
n = 0
while time.perf_counter() - began < 1.0:
    n += 1
share = (time.process_time() - cpu) / (time.perf_counter() - began)
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(),
                  "threads": torch.get_num_threads(), "inductor_isa": inductor_isa,
                  "share_of_a_core": round(share, 2), "cpus": os.cpu_count()}))
"""


def probe(standin: StandIn, env: dict[str, str], work: Path) -> dict:
    """Run the probe on the stand-in; return what it saw and the checks that failed."""
    script = work / "probe_standin.py"
    script.write_text(PROBE, encoding="utf-8")
    with busy_cores() if standin.busy else nullcontext() as load:
        run = run_page(script, work / "probe", env=env, timeout_s=300)
        load_cores = load.cores_used() if load else None
    if not run.ok:
        return {"failed": [f"the probe failed:\n{tail(run.stderr)}"]}
    lines = run.stdout.splitlines()
    seen = json.loads(lines[-1])
    isa = [ln.split("isa:", 1)[1] for ln in lines if ",info,cpu,isa:" in ln]
    seen["onednn_isa"] = isa[0] if isa else "unknown"
    if load_cores is not None:
        seen["load_used_cores"] = round(load_cores, 2)
    failed = []
    for key, wanted in standin.checks.items():
        if key == "load_share_vs_probe":
            # Each load process must get a fair share beside the probe: at least ``wanted``
            # of what the probe got (the machine may be shared with other work too).
            used, share = seen.get("load_used_cores"), seen["share_of_a_core"]
            per_process = None if used is None else used / (seen["cpus"] or 1)
            if per_process is None or per_process < wanted * share:
                failed.append(
                    f"each load process used {per_process} of a core while the probe got "
                    f"{share} (expected at least {wanted} of it): the cores are not busy"
                )
        elif str(seen.get(key)) != str(wanted):
            failed.append(f"{key} is {seen.get(key)!r}, expected {wanted!r}")
    seen["failed"] = failed
    return seen


def prepare(standin: StandIn, work: Path) -> tuple[dict[str, str], dict]:
    """The stand-in's environment (its own Inductor cache) and what its probe saw."""
    cache = work / standin.name / "inductor-cache"
    cache.mkdir(parents=True)
    env = {**standin.env, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    seen = probe(standin, env, work / standin.name)
    print(f"[{standin.name}] {standin.machine}: probe saw {seen}", flush=True)
    return env, seen


def run_one(standin: StandIn, env: dict[str, str], script: Path, work: Path) -> dict:
    """One page on one stand-in (under the load, for the busy one)."""
    method = standin.start_method if starts_processes(script) else None
    folder = work / standin.name / script.stem
    with busy_cores(at_most_s=TIMEOUT_S + 60) if standin.busy else nullcontext() as load:
        run = run_page(script, folder, env=env, start_method=method, timeout_s=TIMEOUT_S)
        load_cores = load.cores_used() if load else None
    from effpt.claims import read_outcomes  # noqa: PLC0415  (the reader's effpt)
    from effpt.expect import read_expectations  # noqa: PLC0415

    expectations = [e.to_dict() for e in read_expectations(run.expectations_file)]
    claims = [c.to_dict() for c in read_outcomes(run.claims_file)]
    status = "ok" if run.ok else "FAILED"
    print(
        f"[{standin.name}] {page_id(script)}"
        f"{f' (start method {method})' if method else ''}: {status} in {run.seconds:.1f} s, "
        f"{len(expectations)} expectations",
        flush=True,
    )
    shutil.rmtree(folder, ignore_errors=True)
    return {
        "ok": run.ok,
        "seconds": round(run.seconds, 1),
        "start_method": method,
        "load_used_cores": None if load_cores is None else round(load_cores, 2),
        "expectations": expectations,
        "claims": claims,
        "source_sha256": hashlib.sha256(script.read_bytes()).hexdigest(),
        "error": None if run.ok else run.failure(tail=2500),
    }


def run_all(
    chosen: list[StandIn], scripts: list[Path], work: Path, *, serial: bool
) -> dict[str, dict]:
    """Every page on every chosen stand-in; a column (probe, seconds, pages) per stand-in.

    Pages of one-thread stand-ins leave the other core free, so they share one pool of
    two (one page per core; each then shares caches and memory bandwidth with its
    neighbour; ``--serial`` avoids it), pages that start processes first, so that the
    slowest start no core idle at the end. The busy stand-in runs one page at a time.
    """
    columns: dict[str, dict] = {}
    envs: dict[str, dict[str, str]] = {}
    for standin in chosen:
        began = time.monotonic()
        env, seen = prepare(standin, work)
        columns[standin.name] = {
            "probe": seen,
            "machine": standin.machine,
            "env": standin.env,
            "probe_seconds": round(time.monotonic() - began, 1),
            "pages": {},
        }
        if not seen["failed"]:
            envs[standin.name] = env
    ready = [s for s in chosen if s.name in envs]
    pooled = [s for s in ready if s.one_thread and not s.busy and not serial]
    jobs = [(s, script) for s in pooled for script in scripts]
    jobs.sort(key=lambda job: not starts_processes(job[1]))  # stable: page order otherwise
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = pool.map(lambda job: run_one(job[0], envs[job[0].name], job[1], work), jobs)
        for (standin, script), result in zip(jobs, results, strict=True):
            columns[standin.name]["pages"][page_id(script)] = result
    if pooled:
        names = ", ".join(s.name for s in pooled)
        print(
            f"[{names}] {len(jobs)} page runs, two at a time, in {time.monotonic() - began:.0f} s"
        )
    for standin in ready:
        if standin in pooled:
            continue
        began = time.monotonic()
        for script in scripts:
            columns[standin.name]["pages"][page_id(script)] = run_one(
                standin, envs[standin.name], script, work
            )
        seconds = time.monotonic() - began
        columns[standin.name]["seconds"] = round(seconds, 1)
        print(f"[{standin.name}] {len(scripts)} pages, one at a time, in {seconds:.0f} s")
    for column in columns.values():
        column["page_seconds"] = round(sum(p["seconds"] for p in column["pages"].values()), 1)
    return columns


def native_column(scripts: list[Path]) -> dict | None:
    """This machine's own run (``nox -s reader``), if it left its expectations here."""
    folder = OUT / "native"
    if not folder.is_dir():
        return None
    from effpt.expect import read_expectations  # noqa: PLC0415

    pages = {}
    for script in scripts:
        path = folder / f"{script.stem}.jsonl"
        if path.is_file():
            pages[page_id(script)] = {
                "ok": None,
                "expectations": [e.to_dict() for e in read_expectations(path)],
            }
    written = max((p.stat().st_mtime for p in folder.glob("*.jsonl")), default=0)
    when = datetime.fromtimestamp(written, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return {"probe": {"from": f"nox -s reader, {when}"}, "pages": pages}


SHORT = {"holds here": "holds", "does not hold here": "NOT", "inconclusive": "incon."}


def flips(columns: dict[str, dict]) -> dict[str, dict[str, dict[str, str]]]:
    """Per page, per expectation (statement, with #n when it repeats): verdict per stand-in."""
    table: dict[str, dict[str, dict[str, str]]] = {}
    for name, column in columns.items():
        for page, result in column["pages"].items():
            counts: dict[str, int] = {}
            for e in result["expectations"]:
                counts[e["statement"]] = counts.get(e["statement"], 0) + 1
                n = counts[e["statement"]]
                key = e["statement"] + (f" #{n}" if n > 1 else "")
                cell = f"{SHORT[e['verdict']]} {e['value']:.3g}{e['unit']}".rstrip()
                table.setdefault(page, {}).setdefault(key, {})[name] = cell
    return table


def listing() -> str:
    """Each stand-in: its name, the machine it stands for, what it sets, its start method."""
    lines = []
    for s in STANDINS:
        sets = " ".join(f"{k}={v}" for k, v in s.env.items()) or "nothing"
        load = "; one load process per core" if s.busy else ""
        lines.append(
            f"{s.name}: {s.machine}. Sets {sets}{load}; pages that start processes: {s.start_method}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", action="append", default=[], help="only pages whose path has it")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        choices=[s.name for s in STANDINS],
        help="only these stand-ins",
    )
    parser.add_argument("--list", action="store_true", help="print the stand-ins and stop")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--serial", action="store_true", help="one page at a time on one-thread stand-ins too"
    )
    args = parser.parse_args()
    if args.list:
        print(listing())
        return 0
    scripts = scripts_matching(args.k)
    chosen = [s for s in STANDINS if not args.only or s.name in args.only]
    if not scripts or not chosen:
        print(f"nothing to run: {len(scripts)} pages, {len(chosen)} stand-ins")
        return 2
    import torch  # noqa: PLC0415

    columns: dict[str, dict] = {}
    native = native_column(scripts)
    if native:
        columns["native"] = native
    # SIGTERM ends the run as Ctrl-C does: the page runner then stops the page and its load.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="effpt-standins-", dir=outside_temp_dir()))
    try:
        columns.update(run_all(chosen, scripts, work, serial=args.serial))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    table = flips(columns)
    flipped = {
        page: {k: v for k, v in rows.items() if len({c.split()[0] for c in v.values()}) > 1}
        for page, rows in table.items()
    }
    flipped = {page: rows for page, rows in flipped.items() if rows}
    failures = [
        (name, page, result["error"])
        for name, column in columns.items()
        for page, result in column["pages"].items()
        if result.get("ok") is False
    ]
    not_effective = [
        (name, c["probe"]["failed"]) for name, c in columns.items() if c["probe"].get("failed")
    ]
    report = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "standins": columns,
        "verdicts": table,
        "flipped": flipped,
        "failed": [{"standin": n, "page": p, "error": e} for n, p, e in failures],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(
        json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print_table(columns, table, flipped)
    print(f"Wrote {args.out / 'report.json'}")
    for name, why in not_effective:
        print(f"\nSTAND-IN {name} DID NOT TAKE EFFECT: " + "; ".join(why))
    for name, page, error in failures:
        print(f"\nFAILED on stand-in {name}: {page}\n{error}")
    if failures or not_effective:
        print(
            f"\n{len(failures)} page runs failed; "
            f"{len(not_effective)} stand-ins did not take effect",
            file=sys.stderr,
        )
        return 1
    return 0


def over_budget(columns: dict[str, dict], budget_s: float = BUDGET_S) -> list[str]:
    """One line per page that ran past ``budget_s`` on a stand-in (failed runs excluded)."""
    return [
        f"over budget ({budget_s:g} s): {page} {result['seconds']:.1f} s on {name}"
        for name, column in columns.items()
        for page, result in column["pages"].items()
        if result.get("ok") and result["seconds"] > budget_s
    ]


def print_table(columns: dict[str, dict], table: dict, flipped: dict) -> None:
    names = list(columns)
    print("\nPages on each stand-in (seconds, or FAILED):")
    print("  " + "page".ljust(44) + "".join(n[:15].rjust(16) for n in names))
    pages = sorted({p for c in columns.values() for p in c["pages"]})
    for page in pages:
        cells = []
        for n in names:
            r = columns[n]["pages"].get(page)
            if r is None or r.get("ok") is None:
                cells.append("-" if r is None else "(reader)")
            else:
                cells.append(f"{r['seconds']:.1f}" if r["ok"] else "FAILED")
        print("  " + page.ljust(44) + "".join(c.rjust(16) for c in cells))
    print("\nExpectations: verdict and value on each stand-in (FLIP: the verdicts differ):")
    if not table:
        print("  (no page recorded an expectation)")
    for page, rows in sorted(table.items()):
        print(f"  {page}")
        for statement, cells in rows.items():
            mark = "FLIP " if statement in flipped.get(page, {}) else "     "
            print(f"    {mark}{statement}")
            print("          " + "  ".join(f"{n}: {cells.get(n, '-')}" for n in names))
    over = over_budget(columns)
    print()
    print("\n".join(over) or f"every page within its budget ({BUDGET_S:g} s) on every stand-in")


if __name__ == "__main__":
    sys.exit(main())
