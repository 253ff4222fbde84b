"""
Keep workers' memory from growing
=================================

.. effpt-before-you-start::
   :learn: - Measure a worker process's resident and proportional memory (Rss and Pss)
             from ``/proc/<pid>/smaps_rollup``.
           - See a forked worker's memory grow as it reads a Python list of objects
             (copy-on-read), and stay flat when the same data sits in a NumPy array or a
             tensor.
           - See how a batch travels from a worker to the main process: shared memory,
             ``/dev/shm`` and its size, and the ``file_system`` sharing strategy.
   :read-first: :doc:`plot_datasets_and_dataloader` for the DataLoader;
                :doc:`/explanations/workers` for the start methods.
   :needs: A CPU is enough. The page starts two worker processes at a time, three times
           (one at a time under ``spawn`` and ``forkserver``), then one more,
           and builds a list of 300,000 short strings (tens of MB). The memory is
           read from ``/proc``, which Linux has; on macOS and Windows the page says so
           and skips those measurements. The growth itself needs workers started with
           ``fork`` (``fork`` where the script runs without a file, as in a notebook, and
           the system has it; the platform's default otherwise).

A common complaint about DataLoader workers is that each one's memory keeps growing
through an epoch until the machine swaps, even though the dataset never changes
(`pytorch/pytorch#13246 <https://github.com/pytorch/pytorch/issues/13246>`__). The cause
is Python's reference counts: reading an object writes to it. This page reproduces the
growth, measures it per worker, shows the layout that avoids it, and then follows a
batch from a worker back to the main process.
"""

# %%
# The page's work is under ``if __name__ == "__main__":`` and its classes outside it,
# so that workers started by ``spawn`` or ``forkserver`` can import them. The workers'
# start method comes from :func:`effpt.data.start_method`, the choice
# :doc:`plot_datasets_and_dataloader` makes on the page and explains.
import multiprocessing
import sys
from pathlib import Path

import torch

from effpt.data import start_method
from effpt.device import describe, pick_device

START = start_method()  # "fork" without a file to import (a notebook); else None, the default

if __name__ == "__main__":
    device = pick_device()
    print(describe(device))
    torch.manual_seed(0)
    method = START or multiprocessing.get_start_method()
    has_smaps = Path("/proc/self/smaps_rollup").exists()
    print(f"platform {sys.platform}, start method {method}, smaps_rollup: {has_smaps}")

# %%
# Reading a process's memory
# --------------------------
# ``Rss`` counts the pages a process has in memory, shared or not. ``Pss`` divides
# each shared page among the processes that share it, so the Pss of all processes adds
# up to the memory really in use. A worker forked from the main process starts by
# sharing all of its pages; a page it writes to is copied and becomes its own
# (*copy-on-write*), and its Pss grows by the part it used to share. Linux sums these
# for a process in ``/proc/<pid>/smaps_rollup`` (since Linux 4.14).


def memory_mb(pid: int | str = "self") -> dict[str, float]:
    """Rss, Pss and Private (clean + dirty) of a process in MB, from smaps_rollup."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value, *_ = line.split()
        fields[name.rstrip(":")] = int(value) / 1024  # kB -> MB
    private = fields["Private_Clean"] + fields["Private_Dirty"]
    return {"Rss": fields["Rss"], "Pss": fields["Pss"], "Private": private}


if __name__ == "__main__":
    if has_smaps:
        print({k: f"{v:.0f} MB" for k, v in memory_mb().items()}, "(this process)")
    else:
        print(f"no /proc/self/smaps_rollup on {sys.platform}: memory is not measured here")

# %%
# A dataset that reports its worker's memory
# ------------------------------------------
# The dataset below answers a whole batch of indices in one call (a
# :class:`~torch.utils.data.BatchSampler` passed as ``sampler``, ``batch_size=None``).
# Before its first batch and after each one, it reads its own process's memory and
# returns it with the batch. The data is one of three: a Python list of 300,000 strings
# of 100 characters, the same bytes as a NumPy array of fixed-width strings, or a
# ``uint8`` tensor of shape ``(300000, 100)``.
import os

import numpy as np
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler


class Texts(Dataset):
    def __init__(self, texts) -> None:  # a list of str, a NumPy array or a tensor
        self.texts = texts
        self.before = None  # this process's memory before its first batch

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, indices: list[int]) -> dict:
        measure = Path("/proc/self/smaps_rollup").exists()
        if self.before is None and measure:
            self.before = memory_mb()
        total = sum(len(self.texts[i]) for i in indices)  # reads every item
        after = memory_mb() if measure else None
        return {"pid": os.getpid(), "read": len(indices), "chars": total,
                "before": self.before, "after": after}  # fmt: skip


N, WIDTH = 300_000, 100

if __name__ == "__main__":
    rng = np.random.default_rng(0)
    letters = rng.integers(97, 123, size=(N, WIDTH), dtype=np.uint8)  # (items, characters)
    as_list = [row.tobytes().decode() for row in letters]  # 300,000 str objects
    as_array = letters.view(f"S{WIDTH}")[:, 0]  # (items,) fixed-width byte strings
    as_tensor = torch.from_numpy(letters.copy())  # (items, characters)
    list_mb = sum(sys.getsizeof(s) for s in as_list) / 2**20 + sys.getsizeof(as_list) / 2**20
    print(f"list: {list_mb:.0f} MB in {N:,} objects; array: {as_array.nbytes / 2**20:.0f} MB "
          f"in one buffer; tensor: {as_tensor.nbytes / 2**20:.0f} MB")  # fmt: skip

# %%
# Two workers read one shuffled epoch in 16 batches, eight each. Each batch touches
# items spread over the whole list, so after a few batches a worker has touched most of
# its pages. The run is the same for the three layouts. Under ``spawn`` and
# ``forkserver`` one worker reads all 16: a worker started that way unpickles its own
# copy of the list or the array (and maps the tensor's storage, which torch's pickling
# moves to shared memory), so a second one would repeat what the first shows.


def one_epoch(texts, workers: int = 2) -> list[dict]:
    dataset = Texts(texts)
    batches = BatchSampler(
        RandomSampler(dataset, generator=torch.Generator().manual_seed(0)),
        len(dataset) // 16,
        False,
    )
    loader = DataLoader(dataset, sampler=batches, batch_size=None, num_workers=workers,
                        multiprocessing_context=START)  # fmt: skip
    return list(loader)


def growth(reports: list[dict], key: str) -> dict[int, list[float]]:
    """Per worker: the memory `key` after each batch, minus before its first, in MB."""
    per_worker: dict[int, list[float]] = {}
    for r in reports:
        per_worker.setdefault(r["pid"], []).append(r["after"][key] - r["before"][key])
    return per_worker


if __name__ == "__main__":
    layouts = {"Python list": as_list, "NumPy array": as_array, "tensor": as_tensor}
    workers = 2 if method == "fork" else 1  # a second unpickled copy would show nothing new
    runs = {name: one_epoch(texts, workers) for name, texts in layouts.items()}
    for name, reports in runs.items():
        read = sum(r["read"] for r in reports)
        n = len({r["pid"] for r in reports})
        print(f"{name}: {read:,} items read by {n} worker{'s' if n > 1 else ''}")

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert all(sum(r["read"] for r in reports) == N for reports in runs.values())
    assert all(sum(r["chars"] for r in reports) == N * WIDTH for reports in runs.values())
# sphinx_gallery_end_ignore

# %%
# Predict first: by how many MB does each worker's Pss grow while it reads its half of
# the list, and while it reads the array?
from effpt.expect import expect

if __name__ == "__main__":
    forked = method == "fork"
    if not has_smaps:
        print(f"skipped: {sys.platform} has no /proc/<pid>/smaps_rollup to read memory from")
    else:
        for name, reports in runs.items():
            start = [round(r["before"]["Private"]) for r in reports[:workers]]  # one per worker
            print(f"{name:12s} Private at the first batch: {start} MB")
            for key in ("Rss", "Pss", "Private"):
                ends = [round(v[-1]) for v in growth(reports, key).values()]
                print(f"{name:12s} {key:8s} growth per worker: {ends} MB")
    if has_smaps and forked:
        list_growth = [v[-1] for v in growth(runs["Python list"], "Pss").values()]
        expect(
            f"reading the {list_mb:.0f} MB list grows a forked worker's Pss by over 10 MB",
            (float(np.median(list_growth)), min(list_growth), max(list_growth)),
            above=10,
            unit="MB",
            device="cpu",
        )
        for name in ("NumPy array", "tensor"):
            ratio = [r["after"]["Pss"] / r["before"]["Pss"] for r in runs[name]]
            expect(
                f"reading the {name} leaves a forked worker's Pss within 5 % of its start",
                (float(np.median(ratio)), min(ratio), max(ratio)),
                below=1.05,
                device="cpu",
            )
    elif has_smaps:
        print(f"no copy-on-read expectation under {method}: a worker started by {method} "
              "unpickles its own copy of a list or an array, private from the start, "
              "and maps a tensor's storage from shared memory")  # fmt: skip

# %%
# The list's objects each carry a reference count. Reading ``texts[i]`` adds one to the
# string's count and later subtracts it: two writes to the page the string lives on.
# Under ``fork``, the first write to a page makes the kernel copy it for that worker,
# so a worker that reads every item ends up with its own copy of almost the whole list,
# and every worker does so. Rss counts pages present either way, which is why the
# ``Rss`` lines can stay level while ``Pss`` and ``Private`` climb.
#
# The array and the tensor are each one object with one count; their items sit in one buffer that reading
# never writes to, so their pages stay shared. Python's garbage collector can write to
# containers (lists, dicts, tuples) too; ``gc.freeze()`` before the workers start
# keeps it off the objects that exist then.

# %%
# Each worker's Pss growth after each of its batches, for the three layouts:
if __name__ == "__main__":
    import matplotlib.pyplot as plt  # under the guard: a spawned worker need not import it

    fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
    if has_smaps:
        for (name, reports), marker in zip(runs.items(), "os^", strict=True):
            for k, values in enumerate(growth(reports, "Pss").values()):
                items = [(j + 1) * (N // 16) for j in range(len(values))]
                label = name if k == 0 else None
                ax.plot(
                    items,
                    values,
                    marker=marker,
                    ls=":",
                    label=label,
                    color=f"C{list(runs).index(name)}",
                )
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, f"no smaps_rollup on {sys.platform}", ha="center", transform=ax.transAxes)
    ax.set(xlabel="items this worker has read", ylabel="Pss growth per worker (MB)")
    ax.set_title(f"{'Two workers' if workers == 2 else 'One worker'}, start method {method}")
    plt.show()

# %%
# How a batch travels back
# ------------------------
# A worker does not pickle a batch's tensors into the pipe: it moves their storage to
# shared memory and sends a handle, and the main process maps the same memory. A batch
# that arrives from a worker therefore reports ``is_shared()``. The
# :mod:`torch.multiprocessing` *sharing strategy* says how the handle travels: as a
# file descriptor (``file_descriptor``, the default on Linux) or as the name of a file
# in ``/dev/shm`` (``file_system``).
import torch.multiprocessing as tmp

if __name__ == "__main__":
    rows = torch.arange(64.0).reshape(16, 4)  # (items, features)
    from_worker = next(
        iter(DataLoader(rows, batch_size=8, num_workers=1, multiprocessing_context=START))
    )
    from_main = next(iter(DataLoader(rows, batch_size=8)))
    print(
        f"shared: from a worker {from_worker.is_shared()}, without workers {from_main.is_shared()}"
    )
    print(
        f"sharing strategy {tmp.get_sharing_strategy()!r} of {sorted(tmp.get_all_sharing_strategies())}"
    )

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert from_worker.is_shared() and not from_main.is_shared()
# sphinx_gallery_end_ignore

# %%
# Where shared memory lives, and how much there is
# ------------------------------------------------
# On Linux the shared memory is a RAM-backed file system mounted at ``/dev/shm``; its
# size is a limit of its own. :func:`os.statvfs` reads it. Each worker keeps up to
# ``prefetch_factor`` batches in flight (two by default), so the loader needs about
# ``num_workers × prefetch_factor`` batches of room at once. The cell compares that with
# the room there is, for a batch of 64 images of 3 × 224 × 224 in float32.
if __name__ == "__main__":
    batch_mb = 64 * 3 * 224 * 224 * 4 / 2**20
    if Path("/dev/shm").is_dir():
        shm = os.statvfs("/dev/shm")
        size_mb, free_mb = shm.f_blocks * shm.f_frsize / 2**20, shm.f_bavail * shm.f_frsize / 2**20
        print(f"/dev/shm: {size_mb:,.0f} MB, {free_mb:,.0f} MB free")
        for n in (2, 8, 16):  # not `workers`, which the cells above read
            need = n * 2 * batch_mb
            print(f"{n:2d} workers × 2 batches of {batch_mb:.0f} MB: {need:,.0f} MB "
                  f"({'fits' if need < free_mb else 'does not fit'})")  # fmt: skip
        print(f"Docker's default /dev/shm of 64 MB holds {int(64 // batch_mb)} such batch")
    else:
        print(f"no /dev/shm on {sys.platform}: shared memory is the system's own")

# %%
# When ``/dev/shm`` is full, a worker has nowhere to put its batch. Recent torch
# releases reserve a shared-memory file's space on creation, so the worker raises
# ``RuntimeError: unable to allocate shared memory(shm) for file <...>``, which the
# main process raises again. Where the space is not reserved ahead,
# the write to a missing page kills the worker with a bus error (``SIGBUS``), which the
# DataLoader says "might be caused by insufficient shared memory (shm)". A Docker
# container gets 64 MB of ``/dev/shm`` unless started with a larger ``--shm-size`` (or
# ``--ipc=host``); the last line above counts the batches that holds. The page does not
# provoke it: the cure is more room, fewer workers, a smaller ``prefetch_factor`` or
# smaller batches.
#
# ``file_system`` is for the other limit: under ``file_descriptor`` each tensor in
# flight holds an open file descriptor, and a process that keeps many of them (many
# workers, batches of many small tensors) can run out ("Too many open files"). It is
# set with :func:`torch.multiprocessing.set_sharing_strategy`, in the main process and,
# because a process started by ``spawn`` or ``forkserver`` begins with the default, in
# ``worker_init_fn`` as well. Its files in ``/dev/shm`` can outlive a process that
# crashes, so use it when you hit that limit.

# %%
# Summary
# -------
# - Under ``fork``, reading a Python object writes its reference count, and a worker
#   that reads a list of objects ends up with its own copy of the pages: measure Pss,
#   not Rss, to see it.
# - Keep a large dataset in a few big objects (a NumPy array, a tensor, one ``bytes``
#   buffer with offsets) rather than in millions of small ones; the pages stay shared.
# - Batches come back through shared memory. Size ``/dev/shm`` for ``num_workers ×
#   prefetch_factor`` batches; a worker that is "unable to allocate shared memory", or
#   that dies of a bus error, is the sign it is too small.
#
# Related: :doc:`plot_is_the_loader_the_bottleneck` measures what the workers buy;
# :doc:`/explanations/workers` explains the start methods.
