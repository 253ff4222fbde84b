"""effpt.profiling.rows: one kind of profiler row, on the rows a CUDA profile has."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEventAvg
from torch.profiler import profile, record_function

from effpt.profiling import ROW_KINDS, profiler_rows


def row(key, device_type, *, label=False, self_device_us=0, count=1, device_memory=0):
    """A key_averages() row as torch builds it, with the fields a page reads."""
    r = FunctionEventAvg()
    r.key, r.count, r.device_type, r.is_user_annotation = key, count, device_type, label
    r.self_device_time_total, r.device_memory_usage = self_device_us, device_memory
    return r


def cuda_profile():
    """What key_averages() gives for one labelled forward on a CUDA GPU, in torch's order.

    The label "forward" has two rows: its span on the CPU thread (where the device's
    memory is attributed) and its span on the device (gpu_user_annotation), listed
    after it. The kernel sgemm is its own row, and its operator carries its time too.
    """
    return [
        row("forward", DeviceType.CPU, label=True, count=3, device_memory=4096),
        row("aten::mm", DeviceType.CPU, self_device_us=100, count=3),
        row("cudaLaunchKernel", DeviceType.CPU, count=3),
        row("sgemm_128x64", DeviceType.CUDA, self_device_us=100, count=3),
        row("forward", DeviceType.CUDA, label=True, self_device_us=250, count=3),
    ]


def test_each_kind_gets_its_own_rows():
    events = cuda_profile()
    assert list(profiler_rows(events, "operators")) == ["aten::mm", "cudaLaunchKernel"]
    assert list(profiler_rows(events, "labels")) == ["forward"]
    assert list(profiler_rows(events, "host")) == ["forward", "aten::mm", "cudaLaunchKernel"]
    assert list(profiler_rows(events, "kernels")) == ["sgemm_128x64"]
    assert list(profiler_rows(events, "device labels")) == ["forward"]


def test_the_device_time_of_host_rows_counts_each_kernel_once():
    # issue 31, finding 8: summing every row counted the kernel under its operator and
    # again as its own row, and added the label's whole span on the device.
    events = cuda_profile()
    assert sum(e.self_device_time_total for e in events) == 450  # the old, biased total
    assert sum(e.self_device_time_total for e in profiler_rows(events, "host").values()) == 100
    assert sum(e.self_device_time_total for e in profiler_rows(events, "kernels").values()) == 100


def test_a_labels_memory_is_read_from_its_host_row_not_the_last_row_of_its_name():
    # issue 31, finding 2: {e.key: e for e in key_averages()} kept the device row of
    # "forward", which carries no memory, so the page saw no allocations.
    events = cuda_profile()
    last_wins = {e.key: e.device_memory_usage for e in events}
    assert last_wins["forward"] == 0
    assert profiler_rows(events, "labels")["forward"].device_memory_usage == 4096


def test_two_rows_of_one_kind_with_one_name_are_refused():
    events = [row("aten::mm", DeviceType.CPU), row("aten::mm", DeviceType.CPU)]
    with pytest.raises(ValueError, match=r"two 'operators' rows are named 'aten::mm'"):
        profiler_rows(events, "operators")


@pytest.mark.parametrize("kind", ["ops", "", None, "Labels"])
def test_an_unknown_kind_names_the_kinds(kind):
    with pytest.raises(ValueError, match=r"kind must be one of 'operators'.*got"):
        profiler_rows([], kind)


def test_on_a_real_cpu_profile_the_kinds_split_the_rows():
    with profile() as prof, record_function("phase"):
        torch.ones(4, 4).sum()
    events = prof.key_averages()
    by_kind = {kind: profiler_rows(events, kind) for kind in ROW_KINDS}
    assert list(by_kind["labels"]) == ["phase"]
    assert "aten::sum" in by_kind["operators"]
    assert by_kind["kernels"] == by_kind["device labels"] == {}
    assert len(by_kind["host"]) == len(events)
