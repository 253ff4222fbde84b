"""Evidence records: what every page measured on one machine, one JSON file per machine.

A record lives in ``docs/evidence/<slug>.json``, its name made from the machine by
:func:`slug` (``cpu-amd-epyc-avx512-2t-torch2.13.0``,
``standin-one-thread-cpu-amd-epyc-avx512-1t-torch2.13.0``,
``cuda-nvidia-h100-80gb-hbm3-cu13.0-torch2.11.0``). Its shape (``format`` 1)::

    {"format": 1,
     "machine": {kind, name, threads, cuda, torch (effpt.machine.Machine's fields),
                 "cpu_model": str, "capability": str (torch's CPU capability),
                 "flags": [the CPU's vector extensions: avx2, avx512f, amx_tile, ...]},
     "standin": null or the stand-in's name,
     "environment": {the timing-relevant variables that were set},
     "created": "YYYY-MM-DD",
     "source": "docs build" | "reader" | "standins" | "gpu build",
     "pages": {"<family>/plot_x": {
         "source_sha256": hash of the page's .py as it ran,
         "ran": bool, "error": null or why it did not run or failed,
         "seconds": float or null, "peak_gpu_bytes": int or null,
         "device": "cpu" | "cuda" | ... or null,
         "expectations": [each as effpt.expect writes it to its JSON-lines file],
         "claims": [each outcome as effpt.claims writes it]}}}

Who writes them: the GPU entry point (docs/_tools/gpu_build.py, ``gpu build``) and
``nox -s evidence`` (this machine's docs build, and each stand-in from
``nox -s standins``' report). Who reads them: the site's extension, through
:func:`read_evidence` and :func:`read_all`, which check every record and raise
:class:`EvidenceError` naming the file and the field of a bad one.

This module needs nothing but the standard library, so that any interpreter loads it
alone (``importlib`` by path, or ``docs/_tools`` on ``sys.path``). The few functions
that describe the running machine (:func:`this_machine_fields`) import torch and effpt
when called.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: Where the committed records live.
EVIDENCE_DIR = ROOT / "docs" / "evidence"
#: The format this module writes and the only one it reads.
FORMAT = 1
#: Where a record's measurements came from.
SOURCES = ("docs build", "reader", "standins", "gpu build")
#: effpt.machine.Machine's fields, as Machine.to_dict stores them.
MACHINE_FIELDS = ("kind", "name", "threads", "cuda", "torch")
#: The fields a record adds to a Machine's.
EXTRA_MACHINE_FIELDS = ("cpu_model", "capability", "flags")
#: The fields of every page's entry.
PAGE_FIELDS = (
    "source_sha256",
    "ran",
    "error",
    "seconds",
    "peak_gpu_bytes",
    "device",
    "expectations",
    "claims",
)
#: The fields effpt.expect writes for each expectation, and effpt.claims for each outcome.
EXPECTATION_FIELDS = ("statement", "value", "low", "high", "side", "bound", "unit", "verdict")
CLAIM_FIELDS = ("key", "verdict", "slow", "fast")
#: The CPU flags (Linux's names) that decide which kernels torch can use, in this order.
VECTOR_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx_vnni",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "sve",
)
_PAGE = re.compile(r"[A-Za-z0-9_]+/plot_[A-Za-z0-9_]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


class EvidenceError(ValueError):
    """A record that is not one this module writes; the message names file and field."""


def _fail(where: object, field: str, problem: str) -> EvidenceError:
    return EvidenceError(f"{where}: field {field!r}: {problem}")


# -- reading and checking -------------------------------------------------------------


def machine_class(root: Path = ROOT):
    """effpt.machine.Machine of the checkout at ``root``, loaded alone (stdlib only): no
    effpt or torch needed to check a record (the site archive's tool uses it too)."""
    return machine_module(root).Machine


def machine_module(root: Path = ROOT):
    """The module effpt.machine of the checkout at ``root``, loaded alone (stdlib only)."""
    name = "effpt.machine"
    if name in sys.modules and root == ROOT:
        return sys.modules[name]
    path = root / "src" / "effpt" / "machine.py"
    spec = importlib.util.spec_from_file_location("effpt_evidence_machine", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building one
    spec.loader.exec_module(module)
    return module


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_machine(machine: object, where: object) -> None:
    if not isinstance(machine, dict):
        raise _fail(where, "machine", f"must be a JSON object, got {type(machine).__name__}")
    missing = [f for f in (*MACHINE_FIELDS, *EXTRA_MACHINE_FIELDS) if f not in machine]
    if missing:
        raise _fail(where, "machine", f"missing fields {missing}")
    try:
        machine_class().from_dict({f: machine[f] for f in MACHINE_FIELDS})
    except (TypeError, ValueError) as exc:
        # Machine's message names the field it refused ("machine field 'threads' ..."):
        # name it in the record's terms too.
        named = re.search(r"field '(\w+)'", str(exc))
        field = f"machine.{named.group(1)}" if named else "machine"
        raise _fail(where, field, str(exc)) from None
    for name in ("cpu_model", "capability"):
        if not isinstance(machine[name], str) or not machine[name].strip():
            got = machine[name]
            raise _fail(where, f"machine.{name}", f"must be a non-empty str, got {got!r}")
    flags = machine["flags"]
    if not isinstance(flags, list) or not all(isinstance(f, str) and f for f in flags):
        raise _fail(where, "machine.flags", f"must be a list of flag names, got {flags!r}")


def _check_entries(entries: object, field: str, names: tuple[str, ...], where: object) -> None:
    if not isinstance(entries, list):
        raise _fail(where, field, f"must be a list, got {type(entries).__name__}")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise _fail(where, f"{field}[{i}]", f"must be a JSON object, got {entry!r}")
        missing = [n for n in names if n not in entry]
        if missing:
            raise _fail(where, f"{field}[{i}]", f"missing fields {missing}")


def _check_page(page: str, entry: object, where: object) -> None:
    at = f"pages.{page}"
    if not _PAGE.fullmatch(page):
        raise _fail(where, at, "a page is named '<family>/plot_<name>'")
    if not isinstance(entry, dict):
        raise _fail(where, at, f"must be a JSON object, got {type(entry).__name__}")
    missing = [f for f in PAGE_FIELDS if f not in entry]
    if missing:
        raise _fail(where, at, f"missing fields {missing}")
    digest = entry["source_sha256"]
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise _fail(where, f"{at}.source_sha256", f"must be 64 hex digits, got {digest!r}")
    if not isinstance(entry["ran"], bool):
        raise _fail(where, f"{at}.ran", f"must be true or false, got {entry['ran']!r}")
    if entry["error"] is not None and not isinstance(entry["error"], str):
        raise _fail(where, f"{at}.error", f"must be null or a str, got {entry['error']!r}")
    if not entry["ran"] and not entry["error"]:
        raise _fail(where, f"{at}.error", "a page that did not run must say why")
    seconds = entry["seconds"]
    if seconds is not None and not (_is_number(seconds) and seconds >= 0):
        raise _fail(where, f"{at}.seconds", f"must be null or seconds >= 0, got {seconds!r}")
    peak = entry["peak_gpu_bytes"]
    if peak is not None and not (
        isinstance(peak, int) and not isinstance(peak, bool) and peak >= 0
    ):
        raise _fail(where, f"{at}.peak_gpu_bytes", f"must be null or an int >= 0, got {peak!r}")
    if entry["device"] is not None and not (isinstance(entry["device"], str) and entry["device"]):
        raise _fail(
            where, f"{at}.device", f"must be null or a device type, got {entry['device']!r}"
        )
    _check_entries(entry["expectations"], f"{at}.expectations", EXPECTATION_FIELDS, where)
    _check_entries(entry["claims"], f"{at}.claims", CLAIM_FIELDS, where)


def check_record(record: object, where: object = "evidence record") -> dict[str, Any]:
    """``record`` if it is a record of this format, else raise EvidenceError naming ``where`` and the field.

    Examples
    --------
    >>> check_record({"machine": {}}, where="x.json")
    Traceback (most recent call last):
    ...
    evidence.EvidenceError: x.json: field 'format': missing (this module reads format 1)
    """
    if not isinstance(record, dict):
        msg = f"{where}: a record is a JSON object, got {type(record).__name__}"
        raise EvidenceError(msg)
    if "format" not in record:
        raise _fail(where, "format", f"missing (this module reads format {FORMAT})")
    if record["format"] != FORMAT or isinstance(record["format"], bool):
        raise _fail(where, "format", f"is {record['format']!r}; this module reads {FORMAT}")
    if "machine" not in record:
        raise _fail(where, "machine", "missing")
    _check_machine(record["machine"], where)
    for name in ("standin", "environment", "created", "source", "pages"):
        if name not in record:
            raise _fail(where, name, "missing")
    standin = record["standin"]
    if standin is not None and not (isinstance(standin, str) and standin.strip()):
        raise _fail(where, "standin", f"must be null or a stand-in's name, got {standin!r}")
    env = record["environment"]
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise _fail(where, "environment", f"must map names to str values, got {env!r}")
    if not isinstance(record["created"], str) or not _DATE.fullmatch(record["created"]):
        raise _fail(where, "created", f"must be YYYY-MM-DD, got {record['created']!r}")
    if record["source"] not in SOURCES:
        raise _fail(where, "source", f"must be one of {SOURCES}, got {record['source']!r}")
    pages = record["pages"]
    if not isinstance(pages, dict):
        raise _fail(where, "pages", f"must be a JSON object, got {type(pages).__name__}")
    for page, entry in pages.items():
        _check_page(page, entry, where)
    return record


def read_evidence(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The record in the file ``path``, checked; a bad one raises EvidenceError naming file and field.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "cpu-x.json"
    >>> _ = p.write_text('{"format": 1, "machine": {"kind": "cpu"}}')
    >>> read_evidence(p)
    Traceback (most recent call last):
    ...
    evidence.EvidenceError: .../cpu-x.json: field 'machine': missing fields ['name', 'threads', 'cuda', 'torch', 'cpu_model', 'capability', 'flags']
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        msg = f"{path}: not JSON: {exc}"
        raise EvidenceError(msg) from None
    return check_record(data, where=path)


def read_all(folder: str | os.PathLike[str] = EVIDENCE_DIR) -> dict[str, dict[str, Any]]:
    """Every record in ``folder`` (``*.json``), checked, by file stem (its slug), sorted.

    A folder that does not exist holds no records. Any bad record raises.

    Examples
    --------
    >>> import tempfile
    >>> read_all(tempfile.mkdtemp())
    {}
    """
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    return {p.stem: read_evidence(p) for p in sorted(folder.glob("*.json"))}


def page_status(entry: Mapping[str, Any], script: str | os.PathLike[str] | None) -> str:
    """Whether a page's evidence is ``"current"``, from an ``"older version"``, or its ``"page gone"``.

    ``script`` is the page's ``.py`` today (None or a missing file: the page no longer exists).
    """
    if script is None or not Path(script).is_file():
        return "page gone"
    return "current" if entry["source_sha256"] == source_hash(script) else "older version"


# -- writing --------------------------------------------------------------------------


def source_hash(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a page's file, in hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _words(text: str) -> str:
    text = re.sub(r"\((r|tm)\)|\bprocessor\b|\bcpu\b|@.*$", " ", text.lower())
    return "-".join(re.findall(r"[a-z0-9.]+", text))


def slug(machine: Mapping[str, Any], standin: str | None = None) -> str:
    """The file name (without ``.json``) of a record of ``machine``.

    Examples
    --------
    >>> cpu = {"kind": "cpu", "name": "x86_64 CPU (AMD EPYC)", "threads": 2, "cuda": None,
    ...        "torch": "2.13.0", "cpu_model": "AMD EPYC", "capability": "AVX512", "flags": []}
    >>> slug(cpu), slug({**cpu, "threads": 1}, standin="one-thread")
    ('cpu-amd-epyc-avx512-2t-torch2.13.0', 'standin-one-thread-cpu-amd-epyc-avx512-1t-torch2.13.0')
    >>> gpu = {**cpu, "kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "threads": None,
    ...        "cuda": "13.0", "torch": "2.11.0"}
    >>> slug(gpu)
    'cuda-nvidia-h100-80gb-hbm3-cu13.0-torch2.11.0'
    """
    if machine["kind"] == "cpu":
        model = _words(machine["cpu_model"]) or "unknown"
        vector = _words(machine["capability"]) or "unknown"
        base = f"cpu-{model}-{vector}-{machine['threads']}t-torch{machine['torch']}"
    elif machine["kind"] == "cuda":
        base = f"cuda-{_words(machine['name'])}-cu{machine['cuda']}-torch{machine['torch']}"
    else:
        base = f"{machine['kind']}-{_words(machine['name'])}-torch{machine['torch']}"
    return f"standin-{standin}-{base}" if standin else base


def cpu_flags(cpuinfo: str | None = None) -> list[str]:
    """The vector extensions of :data:`VECTOR_FLAGS` that this CPU has (Linux), in that order."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8")
        except OSError:
            return []
    for line in cpuinfo.splitlines():
        if line.startswith(("flags", "Features")):
            have = set(line.split(":", 1)[1].split())
            return [f for f in VECTOR_FLAGS if f in have]
    return []


def cpu_model() -> str:
    """The CPU's model name as Linux tells it, else the architecture.

    :func:`effpt.machine.cpu_model`, from the module loaded alone (stdlib only).
    """
    return machine_module().cpu_model()


def timing_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The timing variables set in ``env`` (default: this process's), as the stamp names them.

    One list for the whole site: :data:`effpt.machine.TIMING_VARIABLES`, through
    :func:`effpt.machine.timing_environment` (loaded alone, like :class:`Machine`).
    """
    return sys.modules[machine_class().__module__].timing_environment(env)


def this_machine_fields(device: str | None = None, **overrides: Any) -> dict[str, Any]:
    """A record's ``machine`` for this process's ``device`` (imports torch and effpt).

    ``overrides`` replace fields (a stand-in's ``threads`` and ``capability``).
    """
    import torch  # noqa: PLC0415

    from effpt.device import this_machine  # noqa: PLC0415

    fields = this_machine(device).to_dict()
    fields.update(
        cpu_model=cpu_model(),
        capability=torch.backends.cpu.get_cpu_capability(),
        flags=cpu_flags(),
    )
    fields.update(overrides)
    return fields


def page_entry(
    source_sha256: str,
    *,
    ran: bool,
    error: str | None = None,
    seconds: float | None = None,
    peak_gpu_bytes: int | None = None,
    device: str | None = None,
    expectations: Iterable[dict] = (),
    claims: Iterable[dict] = (),
) -> dict[str, Any]:
    """One page's entry of a record."""
    return {
        "source_sha256": source_sha256,
        "ran": ran,
        "error": error,
        "seconds": None if seconds is None else round(float(seconds), 3),
        "peak_gpu_bytes": peak_gpu_bytes,
        "device": device,
        "expectations": list(expectations),
        "claims": list(claims),
    }


def make_record(
    machine: Mapping[str, Any],
    pages: Mapping[str, dict],
    *,
    source: str,
    standin: str | None = None,
    environment: Mapping[str, str] | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    """A checked record of ``pages`` measured on ``machine``."""
    record = {
        "format": FORMAT,
        "machine": dict(machine),
        "standin": standin,
        "environment": dict(timing_environment() if environment is None else environment),
        "created": created or datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "source": source,
        "pages": {page: pages[page] for page in sorted(pages)},
    }
    return check_record(record, where=f"the record of {slug(machine, standin)}")


def write_record(record: Mapping[str, Any], folder: str | os.PathLike[str]) -> Path:
    """Check ``record`` and write it to ``folder/<slug>.json``; return the path."""
    path = Path(folder) / f"{slug(record['machine'], record['standin'])}.json"
    check_record(dict(record), where=path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record, indent=1, ensure_ascii=False, sort_keys=False)
    path.write_text(text + "\n", encoding="utf-8")
    return path


# -- from a docs build's outputs ------------------------------------------------------


def _outputs(root: Path):
    """docs/_ext/effpt_site/outputs.py, alone (the package imports Sphinx): the one reader of page outputs."""
    path = root / "docs" / "_ext" / "effpt_site" / "outputs.py"
    spec = importlib.util.spec_from_file_location("effpt_evidence_outputs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _json_lines(path: Path) -> list[dict]:
    """The objects of a JSON-lines file, as written (none when it does not exist)."""
    if not path.is_file():
        return []
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            msg = f"{path}:{number}: not JSON: {exc}"
            raise EvidenceError(msg) from None
        if not isinstance(data, dict):
            msg = f"{path}:{number}: a JSON object was expected, got {data!r}"
            raise EvidenceError(msg)
        out.append(data)
    return out


def pages_from_gallery(
    docs: str | os.PathLike[str],
    *,
    root: str | os.PathLike[str] = ROOT,
    failures: Mapping[str, str] | None = None,
    gallery: str = "auto_examples",
) -> dict[str, dict]:
    """Each gallery page's entry from what a docs build left in ``docs/<gallery>``.

    Reads through ``effpt_site.outputs`` (its stamps, cost files, expectations and
    claim outcomes). ``failures`` maps a page (``family/plot_x``) to why it failed, as
    the build reported it. A page the build did not execute gets ``ran: false`` and
    says so; its hash is of the page's source in ``root/examples`` today. One with a
    stamp but neither a cost file nor a failure was stopped while it ran.
    """
    root, docs = Path(root), Path(docs)
    outputs = _outputs(root)
    conf = {"src_dir": str(docs), "gallery_dirs": gallery}
    failures = dict(failures or {})
    pages: dict[str, dict] = {}
    for script in sorted((root / "examples").glob("*/plot_*.py")):
        family, stem = script.parent.name, script.stem
        page = f"{family}/{stem}"
        ran_copy = docs / gallery / family / script.name
        stamp = outputs.read_stamp(conf, stem)
        cost = outputs.read_cost(docs, f"{gallery}/{family}/{stem}")
        if stamp is None or not ran_copy.is_file():
            pages[page] = page_entry(
                source_hash(script),
                ran=False,
                error=failures.get(page, "not executed by this build (no output found)"),
            )
            continue
        peak_mib = stamp.get("gpu_peak_mib")
        machine = stamp.get("machine")
        # sphinx-gallery writes the cost file of a page that passed; the stamp is written
        # before the page runs. A stamp without a cost and without a failure: stopped.
        error = failures.get(page)
        if error is None and cost is None:
            error = "did not finish: the build stopped while it ran (no cost file)"
        pages[page] = page_entry(
            source_hash(ran_copy),
            ran=error is None,
            error=error,
            seconds=None if cost is None else cost.seconds,
            peak_gpu_bytes=None if peak_mib is None else round(peak_mib * 2**20),
            device=machine.get("kind") if isinstance(machine, dict) else None,
            expectations=_json_lines(outputs.expectations_file(conf, stem)),
            claims=_json_lines(outputs.claims_file(conf, stem)),
        )
    return pages


# -- from the stand-ins' report -------------------------------------------------------


def records_from_standins(
    report: Mapping[str, Any], host: Mapping[str, Any], *, created: str | None = None
) -> list[dict[str, Any]]:
    """One record per stand-in of ``nox -s standins``' report.json.

    ``host`` is this machine's ``machine`` fields (:func:`this_machine_fields` on the
    CPU); each stand-in's threads and CPU capability are what its probe saw. Stand-ins
    whose probe failed (they did not take effect) get no record.
    """
    records = []
    for name, column in report["standins"].items():
        probe = column.get("probe", {})
        if name == "native" or probe.get("failed") or "threads" not in probe:
            continue
        machine = {**host, "threads": probe["threads"], "capability": probe["capability"]}
        pages = {}
        for page_file, result in column["pages"].items():
            page = page_file.removesuffix(".py")
            pages[page] = page_entry(
                result.get("source_sha256") or source_hash(ROOT / "examples" / page_file),
                ran=bool(result["ok"]),
                error=result.get("error"),
                seconds=result.get("seconds"),
                device="cpu",
                expectations=result.get("expectations", []),
                claims=result.get("claims", []),
            )
        env = {k: str(v) for k, v in column.get("env", {}).items()}
        records.append(
            make_record(
                machine, pages, source="standins", standin=name, environment=env, created=created
            )
        )
    return records


def main(argv: list[str] | None = None) -> int:
    """``evidence.py docs [DOCS]`` / ``standins [REPORT]`` / ``check [FILE ...]``."""
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    docs = sub.add_parser("docs", help="this machine's record from a docs build's outputs")
    docs.add_argument("docs", nargs="?", type=Path, default=ROOT / "docs")
    standins = sub.add_parser("standins", help="each stand-in's record from its report")
    standins.add_argument(
        "report",
        nargs="?",
        type=Path,
        default=ROOT / "docs" / "_build" / "standins" / "report.json",
    )
    check = sub.add_parser("check", help="check records (default: every committed one)")
    check.add_argument("files", nargs="*", type=Path)
    for p in (docs, standins):
        p.add_argument("--out", type=Path, default=EVIDENCE_DIR)
    args = parser.parse_args(argv)
    if args.what == "check":
        records = {p.stem: read_evidence(p) for p in args.files} if args.files else read_all()
        for name, record in records.items():
            ran = sum(p["ran"] for p in record["pages"].values())
            print(f"{name}: {ran} of {len(record['pages'])} pages ran")
        return 0
    host = this_machine_fields("cpu")
    if args.what == "docs":
        record = make_record(host, pages_from_gallery(args.docs), source="docs build")
        written = [write_record(record, args.out)]
    else:
        if not args.report.is_file():
            print(f"{args.report} is missing: run `nox -s standins` first", file=sys.stderr)
            return 2
        report = json.loads(args.report.read_text(encoding="utf-8"))
        written = [write_record(r, args.out) for r in records_from_standins(report, host)]
    for path in written:
        record = read_evidence(path)
        ran = sum(p["ran"] for p in record["pages"].values())
        print(
            f"Wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
            f"{ran} of {len(record['pages'])} pages ran"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
