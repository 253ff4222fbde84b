"""Evidence records (docs/_tools/evidence.py): what they hold, and bad ones named by file and field."""

from __future__ import annotations

import copy
import doctest
import hashlib
import json
from pathlib import Path

import evidence
import pytest

ROOT = Path(__file__).resolve().parent.parent
HASH = "ab" * 32

CPU = {
    "kind": "cpu",
    "name": "x86_64 CPU (AMD EPYC)",
    "threads": 2,
    "cuda": None,
    "torch": "2.13.0",
    "cpu_model": "AMD EPYC",
    "capability": "AVX512",
    "flags": ["avx2", "avx512f", "avx512_bf16"],
}
EXPECTATION = {
    "statement": "sum beats the loop",
    "value": 41.0,
    "low": 38.0,
    "high": 44.0,
    "side": "above",
    "bound": 10.0,
    "unit": "×",
    "verdict": "holds here",
    "machine": {k: CPU[k] for k in ("kind", "name", "threads", "cuda", "torch")},
}


def a_record() -> dict:
    page = evidence.page_entry(
        HASH, ran=True, seconds=1.5, device="cpu", expectations=[EXPECTATION]
    )
    failed = evidence.page_entry(HASH, ran=False, error="RuntimeError: boom")
    return evidence.make_record(
        CPU,
        {"basics/plot_autograd": page, "basics/plot_modules": failed},
        source="docs build",
        environment={},
        created="2026-11-27",
    )


def write(tmp_path: Path, record: object, name: str = "cpu-x.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def test_doctests():
    assert doctest.testmod(evidence, optionflags=doctest.ELLIPSIS).failed == 0


def test_a_written_record_reads_back_and_is_named_by_its_machine(tmp_path):
    path = evidence.write_record(a_record(), tmp_path)
    assert path.name == "cpu-amd-epyc-avx512-2t-torch2.13.0.json"
    assert evidence.read_evidence(path) == a_record()
    assert list(evidence.read_all(tmp_path)) == ["cpu-amd-epyc-avx512-2t-torch2.13.0"]


@pytest.mark.parametrize(
    ("damage", "field"),
    [
        (lambda r: r.pop("format"), "'format': missing"),
        (lambda r: r.update(format=2), "'format': is 2"),
        (lambda r: r.update(format="1"), "'format': is '1'"),
        (lambda r: r.pop("machine"), "'machine': missing"),
        (lambda r: r.update(machine="AMD EPYC, 2 threads"), "'machine': must be a JSON object"),
        (lambda r: r["machine"].pop("torch"), "'machine': missing fields ['torch']"),
        (lambda r: r["machine"].update(threads=None), "'machine.threads': machine field 'threads'"),
        (lambda r: r["machine"].update(capability=""), "'machine.capability'"),
        (lambda r: r["machine"].update(flags="avx2"), "'machine.flags'"),
        (
            lambda r: r["pages"]["basics/plot_autograd"].pop("source_sha256"),
            "'pages.basics/plot_autograd': missing fields ['source_sha256']",
        ),
        (
            lambda r: r["pages"]["basics/plot_autograd"].update(source_sha256="abc"),
            "'pages.basics/plot_autograd.source_sha256': must be 64 hex digits, got 'abc'",
        ),
        (
            lambda r: r["pages"]["basics/plot_autograd"].update(source_sha256=HASH.upper()),
            "'pages.basics/plot_autograd.source_sha256'",
        ),
        (lambda r: r["pages"]["basics/plot_modules"].update(error=None), "must say why"),
        (lambda r: r["pages"]["basics/plot_autograd"].update(ran="yes"), ".ran'"),
        (lambda r: r["pages"]["basics/plot_autograd"].update(seconds=-1), ".seconds'"),
        (lambda r: r["pages"]["basics/plot_autograd"].update(peak_gpu_bytes=1.5), ".peak_gpu"),
        (
            lambda r: r["pages"]["basics/plot_autograd"]["expectations"][0].pop("verdict"),
            "'pages.basics/plot_autograd.expectations[0]': missing fields ['verdict']",
        ),
        (
            lambda r: r["pages"].update({"plot_x": r["pages"]["basics/plot_autograd"]}),
            "'pages.plot_x'",
        ),
        (lambda r: r.update(source="a laptop"), "'source'"),
        (lambda r: r.update(created="27.11.2026"), "'created'"),
        (lambda r: r.update(environment={"OMP_NUM_THREADS": 1}), "'environment'"),
    ],
)
def test_a_bad_record_names_the_file_and_the_field(tmp_path, damage, field):
    record = copy.deepcopy(a_record())
    damage(record)
    path = write(tmp_path, record)
    with pytest.raises(evidence.EvidenceError) as caught:
        evidence.read_evidence(path)
    assert str(caught.value).startswith(f"{path}: field ")
    assert field in str(caught.value)
    with pytest.raises(evidence.EvidenceError, match=r"cpu-x\.json"):
        evidence.read_all(tmp_path)


def test_a_file_that_is_not_json_is_named(tmp_path):
    path = tmp_path / "cpu-x.json"
    path.write_text('{"format": 1,', encoding="utf-8")
    with pytest.raises(evidence.EvidenceError, match=r"cpu-x\.json: not JSON"):
        evidence.read_evidence(path)


def test_slugs_of_a_standin_and_a_gpu():
    assert (
        evidence.slug({**CPU, "threads": 1, "capability": "DEFAULT"}, "default-kernels")
        == "standin-default-kernels-cpu-amd-epyc-default-1t-torch2.13.0"
    )
    gpu = {**CPU, "kind": "cuda", "name": "NVIDIA H200", "threads": None, "cuda": "13.0"}
    assert evidence.slug({**gpu, "torch": "2.11.0"}) == "cuda-nvidia-h200-cu13.0-torch2.11.0"


def test_cpu_flags_keep_the_vector_extensions_in_order():
    info = "processor\t: 0\nflags\t\t: fpu sse4_2 avx512f avx2 amx_tile avx512_bf16 ht\n"
    assert evidence.cpu_flags(info) == ["sse4_2", "avx2", "avx512f", "avx512_bf16", "amx_tile"]


def gallery(tmp_path: Path) -> tuple[Path, Path]:
    """A repository with two pages; a docs build that ran the first (with outputs), not the second."""
    root = tmp_path / "repo"
    (root / "examples" / "basics").mkdir(parents=True)
    (root / "docs" / "_ext" / "effpt_site").mkdir(parents=True)
    (root / "docs" / "_ext" / "effpt_site" / "outputs.py").write_bytes(
        (ROOT / "docs" / "_ext" / "effpt_site" / "outputs.py").read_bytes()
    )
    for stem in ("plot_a", "plot_b"):
        (root / "examples" / "basics" / f"{stem}.py").write_text(f"# {stem} today\n")
    docs = root / "docs"
    out = docs / "auto_examples"
    (out / "basics").mkdir(parents=True)
    (out / "basics" / "plot_a.py").write_text("# plot_a as it ran\n")
    (out / "basics" / "plot_a.cost.json").write_text('{"time": 2.5, "memory": 0}')
    machine = {k: CPU[k] for k in ("kind", "name", "threads", "cuda", "torch")}
    stamp = {
        "executed_at": "2026-11-27 11:00 UTC",
        "machine": {
            **machine,
            "kind": "cuda",
            "name": "NVIDIA H100",
            "threads": None,
            "cuda": "13.0",
        },
        "gpu_peak_mib": 1.5,
    }
    (out / "_records").mkdir()
    (out / "_records" / "plot_a.stamp.json").write_text(json.dumps(stamp))
    (out / "_expectations").mkdir()
    (out / "_expectations" / "plot_a.jsonl").write_text(json.dumps(EXPECTATION) + "\n")
    (out / "_claims").mkdir()
    (out / "_claims" / "plot_a.jsonl").write_text("")
    return root, docs


def test_pages_from_a_docs_build(tmp_path):
    root, docs = gallery(tmp_path)
    pages = evidence.pages_from_gallery(docs, root=root)
    ran = pages["basics/plot_a"]
    assert ran["ran"] is True
    assert ran["error"] is None
    assert ran["seconds"] == 2.5
    assert ran["device"] == "cuda"
    assert ran["peak_gpu_bytes"] == 3 * 2**19
    assert ran["expectations"] == [EXPECTATION]
    assert ran["claims"] == []
    # the hash is of the page as it ran, so evidence of an older version shows as such
    assert ran["source_sha256"] == hashlib.sha256(b"# plot_a as it ran\n").hexdigest()
    assert evidence.page_status(ran, root / "examples" / "basics" / "plot_a.py") == "older version"
    assert evidence.page_status(ran, root / "examples" / "basics" / "plot_gone.py") == "page gone"
    assert pages["basics/plot_b"]["ran"] is False
    assert "not executed" in pages["basics/plot_b"]["error"]


def test_a_failed_page_keeps_its_reason_and_its_outputs(tmp_path):
    root, docs = gallery(tmp_path)
    pages = evidence.pages_from_gallery(
        docs, root=root, failures={"basics/plot_a": "Traceback ...\nRuntimeError: CUDA"}
    )
    assert pages["basics/plot_a"]["ran"] is False
    assert pages["basics/plot_a"]["error"].endswith("RuntimeError: CUDA")
    assert pages["basics/plot_a"]["expectations"] == [EXPECTATION]


def test_a_malformed_expectations_line_is_named(tmp_path):
    root, docs = gallery(tmp_path)
    (docs / "auto_examples" / "_expectations" / "plot_a.jsonl").write_text("{oops\n")
    with pytest.raises(evidence.EvidenceError, match=r"plot_a\.jsonl:1: not JSON"):
        evidence.pages_from_gallery(docs, root=root)


def test_records_of_the_standins(tmp_path):
    report = {
        "standins": {
            "native": {"probe": {"from": "nox -s reader"}, "pages": {}},
            "one-thread": {
                "probe": {"capability": "AVX512", "threads": 1, "failed": []},
                "env": {"OMP_NUM_THREADS": "1"},
                "pages": {
                    "basics/plot_autograd.py": {
                        "ok": True,
                        "seconds": 3.0,
                        "expectations": [EXPECTATION],
                        "claims": [],
                        "error": None,
                        "source_sha256": HASH,
                    }
                },
            },
            "avx2": {"probe": {"failed": ["capability is 'AVX512'"]}, "pages": {}},
        }
    }
    (record,) = evidence.records_from_standins(report, CPU, created="2026-11-27")
    assert record["standin"] == "one-thread"
    assert record["machine"]["threads"] == 1
    assert record["environment"] == {"OMP_NUM_THREADS": "1"}
    assert record["pages"]["basics/plot_autograd"]["expectations"] == [EXPECTATION]
    path = evidence.write_record(record, tmp_path)
    assert path.name == "standin-one-thread-cpu-amd-epyc-avx512-1t-torch2.13.0.json"


def test_every_committed_record_is_valid_and_named_by_its_machine():
    for name, record in evidence.read_all().items():
        assert name == evidence.slug(record["machine"], record["standin"])


def test_a_page_stopped_while_it_ran_did_not_run(tmp_path):
    # Its stamp is written before it runs, its cost file only when it passed.
    root, docs = gallery(tmp_path)
    (docs / "auto_examples" / "basics" / "plot_a.cost.json").unlink()
    entry = evidence.pages_from_gallery(docs, root=root)["basics/plot_a"]
    assert entry["ran"] is False
    assert "did not finish" in entry["error"]


FIXTURES = Path(__file__).resolve().parent / "evidence_fixtures"


def test_the_hand_written_fixture_reads():
    (data,) = evidence.read_all(FIXTURES).values()
    assert data["standin"] == "fixture"
    assert data["pages"]["fam/plot_a"]["expectations"][0]["verdict"] == "holds here"
