"""
Stream tar shards so that every item arrives exactly once
=========================================================

Thousands of small files are slow to open on network storage; a few large archives read
front to back are not. An :class:`torch.utils.data.IterableDataset` can stream such
shards, but every DataLoader worker runs its own copy of the stream, and a naive stream
delivers each item once per worker. This page shows the duplicates, splits the work with
:func:`torch.utils.data.get_worker_info` so that every item arrives exactly once for any
number of shards and workers, and measures throughput against ``num_workers``.

Why streams duplicate under workers is explained in :doc:`/explanations/workers`.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_streaming_tar_shards.py``.
"""

# %%
# Images, and the same images in shards
# -------------------------------------
# We write 256 small PNG files, then pack them into four tar shards of unequal sizes, as
# real datasets end up. A shard mixes all classes: a stream reads it in order, so a shard
# of a single class would feed the model one class at a time.
import tempfile
from pathlib import Path

import torch

from effpt.data import write_image_folder, write_tar_shards

torch.manual_seed(0)
workdir = tempfile.TemporaryDirectory()
paths = write_image_folder(Path(workdir.name) / "shapes", 256, size=64, seed=0)
sizes = [96, 24, 80, 56]
shards = write_tar_shards(paths, Path(workdir.name) / "shards", sizes)
for shard, n in zip(shards, sizes, strict=True):
    print(f"{shard.name}: {n:3d} images, {shard.stat().st_size / 1024:6.0f} KiB")

# %%
# The naive stream delivers everything twice
# ------------------------------------------
# :class:`effpt.data.NaiveShardStream` reads every shard from the start, in whichever
# process runs it:
#
# .. literalinclude:: /../src/effpt/data.py
#    :pyobject: NaiveShardStream.iter_worker
#
# With ``num_workers=2`` each worker holds its own copy of the dataset and runs the whole
# loop. Count the keys that come out:
import os
from collections import Counter

from torch.utils.data import DataLoader

from effpt.data import NaiveShardStream

cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
workers = min(2, cores)


def delivered(dataset, num_workers: int) -> Counter:
    loader = DataLoader(dataset, batch_size=32, num_workers=num_workers)
    return Counter(key for _, _, keys in loader for key in keys)


counts = delivered(NaiveShardStream(shards), workers)
print(f"{workers} workers: {sum(counts.values())} items delivered, {len(counts)} distinct")
print("times each item arrived:", sorted(set(counts.values())))

# sphinx_gallery_start_ignore
assert len(counts) == 256 and set(counts.values()) == {workers}
# sphinx_gallery_end_ignore

# %%
# Each worker takes its own part
# ------------------------------
# Inside a worker, :func:`~torch.utils.data.get_worker_info` tells the worker its id and
# how many workers there are; in the main process (``num_workers=0``) it returns None.
# :class:`effpt.data.ShardStream` uses it to pick its part:
#
# .. literalinclude:: /../src/effpt/data.py
#    :pyobject: ShardStream.__iter__
#
# The split is :func:`effpt.data.shard_plan`. With at least as many shards as workers,
# shards are dealt round-robin. With more workers than shards, the workers that share a
# shard take every ``stride``-th item of it, so no worker sits idle and none reads an
# item that another delivers. (The original Effective PyTorch guide required exactly one
# shard per worker and refused ``num_workers=0``; this split works for any pair.) Each
# triple below is ``(shard, stride, offset)``:
from effpt.data import ShardStream, shard_plan

for n in (2, 6):
    print(f"4 shards, {n} workers:", [shard_plan(4, w, n) for w in range(n)])

# %%
# Now the check: every combination of 1, 2 and 4 shards (unequal sizes) with 0 to
# ``workers`` worker processes, including more workers than shards. Every item must arrive
# exactly once. (The package's tests run the larger grid, 1–8 shards and 0–4 workers,
# and the ``spawn`` and ``forkserver`` start methods.)
print("shards  workers  delivered  distinct  exactly once")
for n_shards in (1, 2, 4):
    expected = {f"{p.parent.name}/{p.stem}" for p in paths[: sum(sizes[:n_shards])]}
    for n in range(workers + 1):
        counts = delivered(ShardStream(shards[:n_shards]), n)
        once = set(counts) == expected and set(counts.values()) == {1}
        print(f"{n_shards:6d}  {n:7d}  {sum(counts.values()):9d}  {len(counts):8d}  {once}")
        assert once, (n_shards, n)

# %%
# Items per second against ``num_workers``
# ----------------------------------------
# One epoch over the same 256 images, in batches of 32, three ways: one file per item
# (:class:`effpt.data.ImageFolder`), the tar stream, and the tar stream with
# ``persistent_workers=True``, which starts its workers once instead of every epoch.
from effpt.bench import compare
from effpt.data import ImageFolder
from effpt.device import describe, pick_device

device = pick_device()
folder = ImageFolder(Path(workdir.name) / "shapes")


def epoch(loader):
    return lambda: sum(len(batch[1]) for batch in loader)


variants = {}
for n in range(workers + 1):
    variants[f"files, {n} workers"] = epoch(DataLoader(folder, batch_size=32, num_workers=n))
    stream = ShardStream(shards)
    variants[f"shards, {n} workers"] = epoch(DataLoader(stream, batch_size=32, num_workers=n))
    if n > 0:
        kept = DataLoader(stream, batch_size=32, num_workers=n, persistent_workers=True)
        variants[f"shards, {n} persistent"] = epoch(kept)
        del kept
# Loading is CPU work: the timings are stamped with the CPU, whatever device trains.
records = compare("one epoch of 256 images", variants, device="cpu", repeats=3, number=1)
rate = {r.variant: 256 / r.median_s for r in records}
print(describe("cpu"))
del variants  # the last reference to the loaders: persistent workers shut down

# %%
# The figure plots the table as images per second. Read it with three costs in mind:
# decoding (which workers share out), starting worker processes (paid every epoch unless
# ``persistent_workers=True``), and sending each batch from a worker to the main
# process (paid per batch, so a larger ``batch_size`` spreads it over more images).
# ``prefetch_factor`` (default 2) is how many batches each worker keeps ready ahead of
# time: it absorbs uneven item times but cannot raise the steady rate of busy workers.
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
counts_axis = list(range(workers + 1))
for label, prefix, start in (
    ("one file per image", "files, {} workers", 0),
    ("tar shards", "shards, {} workers", 0),
    ("tar shards, persistent workers", "shards, {} persistent", 1),
):
    xs = counts_axis[start:]
    ax.plot(xs, [rate[prefix.format(n)] for n in xs], marker="o", label=label)
ax.set(xlabel="num_workers", ylabel="images per second", xticks=counts_axis, ylim=(0, None))
ax.set_title(f"One epoch, 256 PNG images (64 × 64), batch 32\n{describe('cpu')}", fontsize=10)
ax.legend()
plt.show()

# %%
# On this build machine, the measured rates were:
best = max(rate, key=rate.get)
print(f"fastest: {best}, {rate[best]:,.0f} images/s")
print(
    f"tar stream / files, no workers: {rate['shards, 0 workers'] / rate['files, 0 workers']:.2f}×"
)
if workers:
    gain = rate[f"shards, {workers} persistent"] / rate[f"shards, {workers} workers"]
    print(f"persistent / fresh workers, {workers} workers: {gain:.2f}×")

# %%
# On a local disk whose files sit in the page cache, opening one file per image costs
# little, so compare the two datasets at equal workers with care: the tar format earns
# its keep when opening a file is expensive, as on network file systems and object
# stores. Persistent workers help most when an epoch is short compared with the
# start-up of the workers; the last ratio above is what they gave on this machine.
#
# Pinned memory
# -------------
# ``pin_memory=True`` makes the loader put each batch in page-locked host memory, from
# which a copy to a CUDA device can run asynchronously (``non_blocking=True``) and
# faster. It only matters when batches go to a GPU.
if device.type == "cuda":

    def to_gpu(pin: bool):
        loader = DataLoader(
            ShardStream(shards),
            batch_size=64,
            num_workers=workers,
            persistent_workers=workers > 0,
            pin_memory=pin,
        )
        return lambda: [x.to(device, non_blocking=True) for x, _, _ in loader]

    compare(
        "epoch + copy to GPU",
        {"pin_memory=False": to_gpu(False), "pin_memory=True": to_gpu(True)},
        device=device,
        repeats=3,
        number=1,
    )
else:
    print(f"pin_memory: not measured, the device is {device.type}: with no GPU to copy to,")
    print("pinning would only add a copy into page-locked memory.")

# %%
# A damaged shard fails loudly
# ----------------------------
# A shard cut short (an interrupted download, a full disk) must not end an epoch early
# without a word. The stream raises :class:`effpt.data.CorruptItemError` naming the shard
# and the member it was reading. With ``skip_bad=True`` it skips what it cannot read
# instead and ends with a :class:`effpt.data.SkippedItemsWarning` that counts it.
import tarfile
import warnings

from effpt.data import CorruptItemError

with tarfile.open(shards[0]) as tar:
    member = tar.getmembers()[10]
cut = Path(workdir.name) / "cut.tar"  # shard 0, cut halfway through its 11th image
cut.write_bytes(shards[0].read_bytes()[: member.offset_data + member.size // 2])
try:
    list(ShardStream([cut]))
except CorruptItemError as error:
    print(str(error).replace(workdir.name, "<tmp>"))

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    survivors = list(ShardStream([cut, shards[1]], skip_bad=True))
print(f"skip_bad=True: {len(survivors)} items (10 + {sizes[1]})")
print(str(caught[0].message).replace(workdir.name, "<tmp>"))
workdir.cleanup()

# sphinx_gallery_start_ignore
assert len(survivors) == 10 + sizes[1]
assert "skipped 1 bad item" in str(caught[0].message)
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Every DataLoader worker runs its own copy of an ``IterableDataset``: without a split,
#   each item arrives once per worker.
# - Split by :func:`~torch.utils.data.get_worker_info`: deal shards round-robin, and let
#   workers that share a shard take every ``stride``-th item. Then any number of shards
#   and workers, including ``num_workers=0``, delivers every item exactly once.
# - Measure before adding workers: they pay off when decoding dominates, and
#   ``persistent_workers=True`` stops short epochs paying for the start-up again.
# - ``pin_memory=True`` only helps copies to a GPU; bad shards should raise, or be
#   skipped and counted, never dropped silently.
