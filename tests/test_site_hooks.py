"""The site's gallery hooks (docs/_ext/effpt_site/hooks.py): resets, warnings, memory, stamps.

The reading order sphinx-gallery sorts by is layout.py's: tests/test_site_layout.py.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import torch

from effpt import bench
from effpt_site import hooks as gallery
from effpt_site import outputs


@pytest.fixture
def conf(tmp_path):
    return {"src_dir": str(tmp_path), "gallery_dirs": ["auto_examples"]}


def test_reset_restores_global_torch_state(conf):
    threads = torch.get_num_threads()
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.autograd.set_detect_anomaly(True)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    torch.set_printoptions(precision=1)
    try:
        gallery.reset_state(conf, "plot_x.py", when="before")
        assert torch.get_default_dtype() is torch.float32
        assert torch.is_grad_enabled()
        assert not torch.is_anomaly_enabled()
        assert not torch.are_deterministic_algorithms_enabled()
        assert torch.get_num_threads() == gallery._BUILD_THREADS
        assert "1.2346" in repr(torch.tensor([1.23456789]))
    finally:
        gallery.reset_state(conf, "plot_x.py", when="after")
        torch.set_num_threads(threads)


def test_reset_makes_every_seed_deterministic(conf):
    draws = []
    for _ in range(2):
        gallery.reset_state(conf, None)
        draws.append((torch.rand(1).item(), np.random.rand()))  # noqa: NPY002
        gallery.reset_state(conf, None, when="after")
    assert draws[0] == draws[1]


def test_deprecations_are_errors_inside_and_restored_after(conf):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gallery.reset_state(conf, "plot_x.py")
        for module in ("torch.nn.modules", "__main__", "numpy", "effpt.data"):
            with pytest.raises(FutureWarning):
                warnings.warn_explicit("going away", FutureWarning, "f.py", 1, module=module)
        # Python's own deprecations (e.g. fork() in a threaded process) stay warnings.
        with warnings.catch_warnings(record=True) as caught:
            warnings.warn_explicit(
                "fork() may deadlock",
                DeprecationWarning,
                "p.py",
                1,
                module="multiprocessing.popen_fork",
            )
        assert len(caught) == 1
        gallery.reset_state(conf, "plot_x.py", when="after")
        warnings.warn_explicit("ignored again", FutureWarning, "f.py", 1, module="torch")


def test_records_file_is_named_then_cleared(conf):
    gallery.reset_state(conf, "plot_timing.py")
    path = os.environ[bench.RECORDS_ENV]
    assert path.endswith(os.path.join("auto_examples", "_records", "plot_timing.jsonl"))
    bench.compare("t", {"a": lambda: None}, device="cpu", repeats=1, show=False)
    gallery.reset_state(conf, "plot_timing.py", when="after")
    assert bench.RECORDS_ENV not in os.environ
    with open(path, encoding="utf-8") as f:
        assert '"variant": "a"' in f.read()


def test_claims_file_is_named_emptied_and_cleared(conf):
    from effpt.claims import CLAIMS_ENV, claim, read_outcomes

    gallery.reset_state(conf, "plot_batch_gather.py")
    path = os.environ[CLAIMS_ENV]
    assert path.endswith(os.path.join("auto_examples", "_claims", "plot_batch_gather.jsonl"))
    slow, fast = bench.compare(
        "t", {"loop": lambda: None, "flat": lambda: None}, device="cpu", show=False
    )
    claim("guide: vectorised batch gather").check(slow, fast, show=False)
    gallery.reset_state(conf, "plot_batch_gather.py", when="after")
    assert CLAIMS_ENV not in os.environ
    assert [o.key for o in read_outcomes(path)] == ["guide: vectorised batch gather"]
    gallery.reset_state(conf, "plot_batch_gather.py")  # a fresh run starts from nothing
    assert read_outcomes(path) == []
    gallery.reset_state(conf, "plot_batch_gather.py", when="after")


def test_the_stamp_says_when_and_where_and_the_gpu_peak_only_on_cuda(conf):
    gallery.reset_state(conf, "plot_x.py")
    if torch.cuda.is_available():
        kept = torch.ones(2**20, device="cuda")  # 4 MiB during the page
    gallery.reset_state(conf, "plot_x.py", when="after")
    stamp = outputs.read_stamp(conf, "plot_x")
    assert stamp["executed_at"].endswith(" UTC")
    assert stamp["machine"]
    if torch.cuda.is_available():
        assert stamp["gpu_peak_mib"] >= 4
        del kept
    else:
        assert "gpu_peak_mib" not in stamp  # no memory figure on a CPU (see memory_is_measured)
        assert not gallery.memory_is_measured()


def test_a_pages_stamp_stores_the_machines_fields(conf, monkeypatch):
    import json

    from effpt.device import this_machine
    from effpt.machine import Machine

    gallery.reset_state(conf, "examples/fam/plot_a.py")
    gallery.reset_state(conf, "examples/fam/plot_a.py", when="after")
    stamp = outputs.stamp_file(conf, "plot_a")
    data = json.loads(stamp.read_text(encoding="utf-8"))
    assert data["machine"] == this_machine().to_dict()
    # On a GPU build, a page that allocated CUDA memory is stamped with the GPU's fields.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 1024)
    monkeypatch.setattr(gallery, "_gpu_start", {"held": 0, "stats": {ALLOCATED: 5}})
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda: {ALLOCATED: 6})
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _d: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    gallery._stamp_device_used(conf, "plot_a")
    machine = Machine.in_file(json.loads(stamp.read_text(encoding="utf-8")), stamp)
    assert (machine.kind, machine.name, machine.cuda) == ("cuda", "NVIDIA H100 80GB HBM3", "12.8")


ALLOCATED = "allocation.all.allocated"


def test_a_cpu_page_on_a_gpu_build_is_stamped_cpu_despite_memory_held_before_it(conf, monkeypatch):
    # issue 31, finding 5: cuBLAS's workspace, allocated by an earlier page, stays held,
    # so the peak of a page that never touched CUDA is positive; the count of
    # allocations does not move.
    import json

    from effpt.machine import Machine

    gallery.reset_state(conf, "examples/fam/plot_a.py")
    gallery.reset_state(conf, "examples/fam/plot_a.py", when="after")
    held = {ALLOCATED: 40, "allocated_bytes.all.current": 2**22}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 2**22)
    monkeypatch.setattr(gallery, "_gpu_start", {"held": 2**22, "stats": held})
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda: dict(held))
    gallery._stamp_device_used(conf, "plot_a")
    stamp = outputs.stamp_file(conf, "plot_a")
    data = json.loads(stamp.read_text(encoding="utf-8"))
    assert Machine.in_file(data, stamp).kind == "cpu"
    assert "gpu_peak_mib" not in data  # a CPU page has no GPU memory figure


class FakeAllocator:
    """torch.cuda's memory statistics on a GPU machine, as far as the stamp reads them."""

    def __init__(self) -> None:
        self.current, self.peak, self.allocations = 0, 0, 0

    def allocate(self, nbytes: int) -> None:
        self.current += nbytes
        self.peak, self.allocations = max(self.peak, self.current), self.allocations + 1

    def free(self, nbytes: int) -> None:
        self.current -= nbytes

    def reset_peak(self, _device=None) -> None:
        self.peak = self.current

    def patch(self, monkeypatch) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
        monkeypatch.setattr(torch.cuda, "memory_allocated", lambda _device=None: self.current)
        monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda _device=None: self.peak)
        monkeypatch.setattr(torch.cuda, "memory_stats", lambda: {ALLOCATED: self.allocations})
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", self.reset_peak)
        monkeypatch.setattr(gallery, "_RESET_PEAK", self.reset_peak, raising=False)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda _d: "NVIDIA H100 80GB HBM3")
        monkeypatch.setattr(torch.version, "cuda", "12.8")


def test_a_page_that_resets_the_peak_mid_page_keeps_its_earlier_peak(conf, monkeypatch):
    # issue 31, finding 9: a page that measures one region's peak resets the statistics;
    # the page's peak in the stamp lost everything before the last reset.
    import json

    import torch._dynamo

    # on a "GPU", its reset would import Inductor's CUDA graphs, whose imports warn
    monkeypatch.setattr(torch._dynamo, "reset", lambda: None)
    fake = FakeAllocator()
    fake.patch(monkeypatch)
    fake.allocate(2**20)  # held before the page: not the page's
    gallery.reset_state(conf, "examples/fam/plot_a.py")
    fake.allocate(100 * 2**20)  # the page's big moment
    fake.free(100 * 2**20)
    torch.cuda.reset_peak_memory_stats()  # the page measures a small region next
    fake.allocate(10 * 2**20)
    gallery.reset_state(conf, "examples/fam/plot_a.py", when="after")
    data = json.loads(outputs.stamp_file(conf, "plot_a").read_text(encoding="utf-8"))
    assert data["gpu_peak_mib"] == 100
    assert torch.cuda.reset_peak_memory_stats == fake.reset_peak  # torch's own, after the page
