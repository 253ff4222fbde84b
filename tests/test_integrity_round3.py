"""Issue 34, items 2-18: each defect found by probing effpt as a careless or hostile user would.

Item 1 (verdicts drawn from a confidence interval) is tested in test_verdicts.py.
"""

from __future__ import annotations

import json
import math
import os
import tarfile
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from effpt import bench, ddp, viz
from effpt._validate import read_json_lines
from effpt.bench import Timing
from effpt.claims import Outcome, claim, read_outcomes
from effpt.data import CorruptItemError, ImageFolder, ShardStream, write_image_folder
from effpt.data.tars import iter_members, write_tar_shards
from effpt.device import this_machine
from effpt.expect import Expectation, expect, read_expectations
from effpt.machine import Machine
from effpt.ops import box_iou, uniformity_loss
from effpt.records import Ratio, Record, read_records

CPU = this_machine("cpu")


def _record(
    variant="slow", seconds=(1.9e-3, 1.95e-3, 2e-3, 2.05e-3, 2.1e-3), machine=CPU, *, kept=False
):
    """A record of five repeats; ``kept`` keeps them (``per_call_s``), as compare() does."""
    q1, med, q3 = seconds[1], seconds[2], seconds[3]
    record = Record("sum 500×10", variant, med, q3 - q1, q1, q3, len(seconds), 10, "slow", machine)
    return replace(record, per_call_s=seconds) if kept else record


FAST = (1.58e-5, 1.59e-5, 1.6e-5, 1.6e-5, 1.61e-5)


# -- 2: a class folder that is a dangling link ---------------------------------------------


def test_dangling_class_folder_link_raises_instead_of_relabelling(tmp_path):
    write_image_folder(tmp_path, 12, size=8)
    (tmp_path / "aaa").symlink_to(tmp_path / "gone")  # sorts first: would shift every label
    with pytest.raises(FileNotFoundError, match=r"class folder '.*aaa' is a link to '.*gone'"):
        ImageFolder(tmp_path)


# -- 3: an extended header that declares a huge size ---------------------------------------


def _shard_with_huge_long_name(tmp_path: Path, filler: int) -> Path:
    [shard] = write_tar_shards(write_image_folder(tmp_path / "img", 1, size=8), tmp_path, 1)
    head = shard.read_bytes().rstrip(b"\0")
    head += bytes(-len(head) % 512)
    evil = tarfile.TarInfo("././@LongLink")
    evil.type, evil.size = tarfile.GNUTYPE_LONGNAME, 2**40
    block = evil.tobuf(tarfile.GNU_FORMAT)[:512]
    path = tmp_path / "evil.tar"
    path.write_bytes(head + block + os.urandom(filler))
    return path


def test_huge_extended_header_is_refused_before_tarfile_reads_it(tmp_path):
    shard = _shard_with_huge_long_name(tmp_path, 16 * 2**20)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptItemError, match="declares 1099511627776 bytes"):
            list(iter_members(shard))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"reading the shard took {peak / 2**20:.0f} MiB"


# -- 4: text effpt wrote itself, with U+2028, U+2029 or U+0085 -----------------------------


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85"])
def test_files_effpt_wrote_read_back_whatever_the_text(tmp_path, monkeypatch, char):
    path = tmp_path / "page.jsonl"
    monkeypatch.setenv("EFFPT_EXPECTATIONS_FILE", str(path))
    e = expect(f"one{char}two", (2.0, 1.9, 2.1), above=1.0, device="cpu", show=False)
    assert read_expectations(path) == [e]
    claims_file = tmp_path / "claims.jsonl"
    monkeypatch.setenv("EFFPT_CLAIMS_FILE", str(claims_file))
    slow = replace(_record(), task=f"sum{char}")
    fast = replace(_record("fast", FAST), task=f"sum{char}")
    out = claim("guide: torch.sum over a row loop").check(slow, fast, show=False)
    assert read_outcomes(claims_file) == [out]


# -- 5: a CPU claim scored on another device class -----------------------------------------


@pytest.mark.parametrize("kind", ["xpu", "meta", "mps"])
def test_cpu_claim_is_not_comparable_on_other_device_classes(kind):
    other = Machine(kind, f"some {kind}", None, None, torch.__version__)
    slow, fast = _record(machine=other), _record("fast", FAST, machine=other)
    assert claim("guide: torch.sum over a row loop").check(slow, fast, show=False).verdict == (
        "not comparable"
    )


# -- 6, 7: JSON-lines files: bytes that are not UTF-8, huge numbers, deep nesting ----------


def test_line_not_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "page.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": "\xff"}\n')
    with pytest.raises(ValueError, match=r"page.jsonl:2: not UTF-8"):
        read_json_lines(path, "count", lambda d: d["n"])


def test_deeply_nested_line_names_file_and_line(tmp_path):
    path = tmp_path / "page.jsonl"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ValueError, match=r"page.jsonl:1: nested too deeply"):
        read_json_lines(path, "count", lambda d: d)


def test_huge_integers_are_named_not_overflow(tmp_path):
    path = tmp_path / "page.jsonl"
    path.write_text(json.dumps({**_record().to_dict(), "median_s": 10**400}) + "\n")
    with pytest.raises(ValueError, match=r"page.jsonl:1: median_s=.* too large for a float"):
        read_records(path)
    e = expect("x", (2.0, 1.9, 2.1), above=1.0, device="cpu", show=False).to_dict()
    path.write_text(json.dumps({**e, "bound": 10**400}) + "\n")
    with pytest.raises(ValueError, match=r"page.jsonl:1: .*bound=.* too large for a float"):
        read_expectations(path)
    with pytest.raises(ValueError, match=r"measured value=.* too large"):
        expect("x", 10**400, above=1.0, device="cpu", show=False)
    with pytest.raises(ValueError, match=r"eps=.* too large"):
        box_iou(torch.zeros(1, 4), torch.zeros(1, 4), eps=10**400)
    with pytest.raises(ValueError, match=r"t=.* too large"):
        uniformity_loss(torch.randn(4, 2), t=10**400)


# -- 8: records with a NaN or negative IQR, no repeats, no calls ---------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("iqr_s", float("nan"), "iqr_s=nan is negative or not a number"),
        ("iqr_s", -1e-4, "iqr_s=-0.0001 is negative or not a number"),
        ("repeats", 0, "repeats=0"),
        ("repeats", -3, "repeats=-3"),
        ("number", 0, "number=0"),
    ],
)
def test_read_records_refuses_impossible_counts_and_spreads(tmp_path, field, value, message):
    path = tmp_path / "page.jsonl"
    data = {**_record().to_dict(), field: value}
    if field == "repeats":
        data["per_call_s"] = []
    path.write_text(json.dumps(data) + "\n")
    with pytest.raises(ValueError, match=message):
        read_records(path)


# -- 9: a coarse clock -----------------------------------------------------------------------


def test_compare_on_a_coarse_clock_saves_records_it_can_read(tmp_path, monkeypatch):
    real = time.perf_counter

    class CoarseClock:
        @staticmethod
        def perf_counter():
            return math.floor(real() / 0.05) * 0.05  # a 50 ms tick

    monkeypatch.setattr(bench, "time", CoarseClock)
    path = tmp_path / "records.jsonl"
    monkeypatch.setenv("EFFPT_RECORDS_FILE", str(path))
    records = bench.compare(
        "nothing",
        {"a": lambda: None, "b": lambda: None},
        device="cpu",
        repeats=4,
        number=10,
        show=False,
    )
    assert all(s > 0 for r in records for s in r.per_call_s)
    assert read_records(path) == records


# -- 10, 11: how a ratio prints --------------------------------------------------------------


def test_zero_ratio_from_one_sample_prints():
    assert str(Ratio(0.0, 0.0, 0.0, single=True)) == "0× (0–0)"


def test_ratio_never_prints_outside_its_interval():
    text = str(Ratio(0.96, 0.4, 0.97))  # printed "1.0× (0.4–0.97)" before
    value, low, high = (
        float(x) for x in text.replace("× (", " ").replace("–", " ").rstrip(")").split()
    )
    assert low <= value <= high, text


# -- 12, 13: claim outcomes ------------------------------------------------------------------


def test_check_without_a_slow_record_names_it():
    with pytest.raises(TypeError, match=r"slow must be an effpt\.records\.Record, got NoneType"):
        claim("guide: torch.sum over a row loop").check(None, _record("fast", FAST))
    with pytest.raises(TypeError, match=r"slow must be an effpt\.records\.Record, got NoneType"):
        claim("guide: torch.sum over a row loop").check(None, None)


@pytest.mark.parametrize(
    ("verdict", "fast", "kept"),
    [
        ("yes", None, False),
        ("not measured", "fast", False),
        ("not comparable", "fast", False),
        ("no", "fast", True),  # records with their repeats: judge() must give the verdict
    ],
)
def test_read_outcomes_refuses_what_check_could_not_write(tmp_path, verdict, fast, kept):
    slow, fast_record = _record(kept=kept), _record("fast", FAST, kept=kept)  # 125x: "yes"
    line = {
        "key": "guide: torch.sum over a row loop",
        "verdict": verdict,
        "slow": slow.to_dict(),
        "fast": None if fast is None else fast_record.to_dict(),
    }
    path = tmp_path / "claims.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(ValueError, match=r"claims.jsonl:1: .*is not what its records give"):
        read_outcomes(path)
    with pytest.raises(ValueError, match="is not what its records give"):
        Outcome(line["key"], verdict, slow, None if fast is None else fast_record)


# -- 14, 15: expectations --------------------------------------------------------------------


def test_expectation_whose_verdict_contradicts_its_numbers_is_refused(tmp_path):
    e = expect("x", (2.0, 1.9, 2.1), above=1.0, device="cpu", show=False)
    path = tmp_path / "page.jsonl"
    path.write_text(json.dumps({**e.to_dict(), "verdict": "does not hold here"}) + "\n")
    with pytest.raises(ValueError, match=r"page.jsonl:1: .*contradicts its interval"):
        read_expectations(path)
    with pytest.raises(ValueError, match="contradicts"):
        Expectation("x", 2.0, 1.9, 2.1, "above", 1.0, "×", "does not hold here", CPU)


def test_expectation_of_a_timing_without_samples_names_it():
    with pytest.raises(ValueError, match="'empty': the Timing measured has no repeats"):
        expect("empty", Timing((), 1), above=1.0, device="cpu", show=False)


# -- 16: a FIFO or a device as a shard -------------------------------------------------------


def test_fifo_and_dev_null_shards_are_named_for_what_they_are(tmp_path):
    fifo = tmp_path / "shard.tar"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"shard '.*shard.tar' is a FIFO"):
        ShardStream([fifo], classes=["a"])
    with pytest.raises(ValueError, match="shard '/dev/null' is a character device"):
        ShardStream(["/dev/null"], classes=["a"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ShardStream([tmp_path / "missing.tar"], classes=["a"])


# -- 17: launch's args given as an iterator, on a retry --------------------------------------


def test_launch_keeps_iterator_args_for_the_retry(monkeypatch):
    calls = []

    def once(_fn, args, *_rest):
        calls.append(args)
        if len(calls) == 1:
            raise ddp._PortTakenError("port taken")
        return [args]

    monkeypatch.setattr(ddp, "_launch_once", once)
    assert ddp.launch(max, args=iter((1, 2)), world_size=1) == [(1, 2)]
    assert calls == [(1, 2), (1, 2)]


# -- 18: a leaf given two names --------------------------------------------------------------


def test_leaf_with_two_names_shows_both():
    a = torch.ones(2, requires_grad=True)
    graph = viz.backward_graph(a * 2, names={"a": a, "weights": a})
    [leaf] = [node for node in graph.nodes if node.kind == "leaf"]
    assert leaf.name == "a, weights"


def test_ratio_record_round_trip_keeps_repeats(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    monkeypatch.setenv("EFFPT_RECORDS_FILE", str(path))
    from effpt.records import save_records

    save_records([_record(kept=True)])
    assert read_records(path)[0].per_call_s == _record(kept=True).per_call_s
    path.write_text(json.dumps({**_record(kept=True).to_dict(), "per_call_s": [1.0]}) + "\n")
    with pytest.raises(ValueError, match="holds 1 values for repeats=5"):
        read_records(path)


@pytest.mark.parametrize(
    ("calls", "match"),
    [
        ([10, 10], "holds 2 values for repeats=5"),
        ([10, 10, 0, 10, 10], "holds 0, not a count of at least 1"),
        ([10, 10, 2.5, 10, 10], "holds 2.5, not a count"),
        ("10", "field 'calls' is str"),
    ],
)
def test_a_record_with_bad_calls_fails_naming_the_field(tmp_path, calls, match):
    """Issue 35: the calls each repeat ran are counts, one per repeat."""
    path = tmp_path / "page.jsonl"
    path.write_text(json.dumps({**_record(kept=True).to_dict(), "calls": calls}) + "\n")
    with pytest.raises(ValueError, match=rf"page\.jsonl:1: .*{match}"):
        read_records(path)


def test_a_record_says_cut_short_with_a_bool(tmp_path):
    path = tmp_path / "page.jsonl"
    path.write_text(json.dumps({**_record(kept=True).to_dict(), "cut_short": "yes"}) + "\n")
    with pytest.raises(ValueError, match=r"page\.jsonl:1: field 'cut_short' is str, not bool"):
        read_records(path)
