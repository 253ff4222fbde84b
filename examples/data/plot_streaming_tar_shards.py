"""
Stream tar shards so that every item arrives exactly once
=========================================================

.. effpt-before-you-start::
   :learn: - Stream tar shards with an ``IterableDataset``, and see a naive stream deliver
             every item once per worker.
           - Split shards and items between workers with ``get_worker_info``, so that every
             item arrives exactly once for any number of shards and workers.
           - Time an epoch against ``num_workers``, with and without
             ``persistent_workers=True``, and against one file per image.
           - Catch a shard cut short, which ``tarfile`` reads as a complete one, and shuffle
             a stream anew every epoch.
   :read-first: :doc:`plot_datasets_and_dataloader` for datasets, the DataLoader and its
                workers; :doc:`/explanations/workers` for why streams duplicate under
                workers; :doc:`/explanations/timing` for how the epochs are timed.
   :needs: A CPU is enough; the page runs on the CPU even where there is a GPU. It
           starts worker processes, at most two per loader (``fork`` where the script
           runs without a file, as in a notebook, and the system has it; the platform's
           default start method otherwise), and writes 256 small PNG files and four tar
           shards to a temporary folder that it deletes at the end.

Thousands of small files are slow to open on network storage; a few large archives read
front to back are not. An :class:`~torch.utils.data.IterableDataset` can stream such
shards, but every DataLoader worker runs its own copy of the stream, and a naive stream
delivers each item once per worker. This page builds the stream with :mod:`tarfile`,
shows the duplicates, splits the work with :func:`torch.utils.data.get_worker_info` so
that every item arrives exactly once for any number of shards and workers, measures
throughput against ``num_workers``, and shows what a damaged shard does to it.
"""

# %%
# Why streams duplicate under workers is explained in :doc:`/explanations/workers`. Like
# every script that starts workers, this page keeps its work under
# ``if __name__ == "__main__":`` and its classes outside it (the same page says why).
import torch

from effpt.device import describe

if __name__ == "__main__":
    device = torch.device("cpu")  # the page runs on the CPU, whatever device the machine has
    print(describe(device))
    torch.manual_seed(0)
    # Under forkserver, every worker is forked from one server process: have that server
    # import torch once, so that each worker starts with torch imported instead of
    # importing it again (a second or two each). Under fork and spawn it changes nothing.
    if "forkserver" in torch.multiprocessing.get_all_start_methods():  # not on Windows
        torch.multiprocessing.set_forkserver_preload(["torch"])

# %%
# Images, and the same images in shards
# -------------------------------------
# We write 256 small PNG files, then pack them into four tar shards of unequal sizes, as
# real datasets end up. A shard mixes all classes: a stream reads it in order, so a shard
# of a single class would feed the model one class at a time.
import tempfile
from pathlib import Path

from effpt.data import write_image_folder, write_tar_shards

if __name__ == "__main__":
    workdir = tempfile.TemporaryDirectory()
    paths = write_image_folder(Path(workdir.name) / "shapes", 256, size=64, seed=0)
    sizes = [96, 24, 80, 56]
    shards = write_tar_shards(paths, Path(workdir.name) / "shards", sizes)
    for shard, n in zip(shards, sizes, strict=True):
        print(f"{shard.name}: {n:3d} images, {shard.stat().st_size / 1024:6.0f} KiB")

# %%
# Reading one shard front to back
# -------------------------------
# :func:`tarfile.open` with mode ``"r|"`` reads the archive as a stream: each member's
# header, then its bytes, never seeking back, which is what a network file or an HTTP
# response allows. Each member is ``<class>/<name>.png``; ``decode`` turns its bytes into
# a tensor with Pillow, as the previous page did for a file. The ``stride`` and
# ``offset`` arguments let several readers share one shard (below).
import io
import tarfile

import numpy as np
from PIL import Image

from effpt.data import SHAPES as CLASSES


def decode(data: bytes) -> torch.Tensor:
    with Image.open(io.BytesIO(data)) as image:
        pixels = np.array(image.convert("RGB"))  # (height, width, 3)
    return torch.from_numpy(pixels).permute(2, 0, 1)  # (3, height, width)


def read_shard(path: str, stride: int = 1, offset: int = 0):
    """Yield (image, label, key) for the members at positions offset, offset + stride, ..."""
    with tarfile.open(path, mode="r|") as tar:
        position = 0
        for member in tar:
            if not member.isfile():
                continue
            if position % stride == offset:
                folder, name = member.name.split("/")
                image = decode(tar.extractfile(member).read())
                yield image, CLASSES.index(folder), f"{folder}/{name.removesuffix('.png')}"
            position += 1


if __name__ == "__main__":
    image, label, key = next(read_shard(str(shards[0])))
    print(f"first member of {shards[0].name}: {key}, {tuple(image.shape)}, label {label}")

# %%
# The naive stream delivers everything twice
# ------------------------------------------
# The simplest stream reads every shard in turn. With ``num_workers=2`` each worker holds
# its own copy of the dataset and runs the whole loop. Count the keys that come out.
# The workers' start method comes from :func:`effpt.data.start_method`, the choice
# :doc:`plot_datasets_and_dataloader` makes on the page and explains.
from collections import Counter

from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from effpt.data import start_method


class NaiveTarShards(IterableDataset):
    def __init__(self, shards) -> None:
        self.shards = [str(s) for s in shards]

    def __iter__(self):
        for shard in self.shards:
            yield from read_shard(shard)


START = start_method()  # "fork" without a file to import (a notebook); else None, the default


def make_loader(dataset, num_workers: int, **kwargs) -> DataLoader:
    context = START if num_workers > 0 else None  # only worker processes have a start method
    return DataLoader(dataset, num_workers=num_workers, multiprocessing_context=context, **kwargs)


def delivered(dataset, num_workers: int) -> Counter:
    loader = make_loader(dataset, num_workers, batch_size=32)
    return Counter(key for _, _, keys in loader for key in keys)


if __name__ == "__main__":
    workers = 2
    counts = delivered(NaiveTarShards(shards), workers)
    print(f"{workers} workers: {sum(counts.values())} items delivered, {len(counts)} distinct")
    print("times each item arrived:", sorted(set(counts.values())))

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert len(counts) == 256 and set(counts.values()) == {workers}
# sphinx_gallery_end_ignore

# %%
# Each worker takes its own part
# ------------------------------
# Inside a worker, :func:`~torch.utils.data.get_worker_info` tells the worker its id and
# how many workers there are; in the main process (``num_workers=0``) it returns None.
# With at least as many shards as workers, deal the shards round-robin. With more
# workers than shards, the workers that share a shard take every ``stride``-th item of
# it, so no worker sits idle and none reads an item that another delivers. (The
# `Effective PyTorch guide <https://github.com/vahidk/EffectivePyTorch>`__ gives each
# worker exactly one shard and raises for any other number of workers, ``num_workers=0``
# included; its code also reads ``worker_info.worker_id``, which does not exist: the
# attribute is ``id``. This split works for any pair.) Each triple is ``(shard, stride,
# offset)``:


def my_part(num_shards: int, worker: int, workers: int) -> list[tuple[int, int, int]]:
    if workers <= num_shards:
        return [(shard, 1, 0) for shard in range(worker, num_shards, workers)]
    shard = worker % num_shards
    stride = len(range(shard, workers, num_shards))  # the workers that share this shard
    return [(shard, stride, worker // num_shards)]


class TarShards(NaiveTarShards):
    def __iter__(self):
        info = get_worker_info()  # None in the main process
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        for shard, stride, offset in my_part(len(self.shards), worker, workers):
            yield from read_shard(self.shards[shard], stride, offset)


if __name__ == "__main__":
    for n in (2, 6):
        print(f"4 shards, {n} workers:", [my_part(4, w, n) for w in range(n)])

# %%
# Now the check: every combination of 1, 2 and 4 shards (unequal sizes) with none or
# ``workers`` (here 2) worker processes. Every item must arrive exactly once. One loader
# reads the three streams one after another and tags each key with its stream, so that
# its workers start once, not three times. (effpt's tests check the same split,
# :func:`effpt.data.shard_plan`, for 1–8 shards and 1–4 workers, and through real worker
# processes under each start method.)


class Streams(IterableDataset):
    def __init__(self, streams) -> None:
        self.streams = streams

    def __iter__(self):
        for tag, stream in enumerate(self.streams):
            for _, _, key in stream:  # each stream splits itself in each worker
                yield tag, key


if __name__ == "__main__":
    shard_counts = (1, 2, 4)
    streams = Streams([TarShards(shards[:n_shards]) for n_shards in shard_counts])
    print("shards  workers  delivered  distinct  exactly once")
    for n in (0, workers):
        per_stream = [Counter() for _ in shard_counts]
        for tags, keys in make_loader(streams, n, batch_size=32):
            for tag, key in zip(tags.tolist(), keys, strict=True):
                per_stream[tag][key] += 1
        for n_shards, counts in zip(shard_counts, per_stream, strict=True):
            expected = {f"{p.parent.name}/{p.stem}" for p in paths[: sum(sizes[:n_shards])]}
            once = set(counts) == expected and set(counts.values()) == {1}
            print(f"{n_shards:6d}  {n:7d}  {sum(counts.values()):9d}  {len(counts):8d}  {once}")
            assert once, (n_shards, n)

# %%
# Items per second against ``num_workers``
# ----------------------------------------
# One epoch over the same 256 images, in batches of 32: the tar stream with 1 and 2
# workers kept with ``persistent_workers=True``, which starts them once instead of every
# epoch, with 1 worker started afresh every epoch, and with none; and, for reference,
# one file per item with no workers (``Files``: the previous page's dataset, with the
# same ``decode`` as the shards, so that only the storage differs). Each of four timed
# rounds runs one epoch of every variant. Every variant but the fresh one runs an
# epoch before the rounds, so that the persistent workers have started; the fresh
# loader starts its worker in every round, which is what it measures.
#
# Under ``spawn`` each worker imports torch, and the fresh loader alone would start four.
# So the one-worker loader's first epoch, its start included, is timed first; where it
# takes over ``START_BUDGET_S``, the two-worker and fresh loaders are left out (six
# starts fewer), and the cell prints why.
import time

from torch.utils.data import Dataset

from effpt.bench import compare, speedup


class Files(Dataset):
    def __init__(self, paths) -> None:
        self.paths = [str(p) for p in paths]

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int):
        path = Path(self.paths[i])
        return decode(path.read_bytes()), CLASSES.index(path.parent.name)


def one_epoch(loader: DataLoader):
    return lambda: sum(len(labels) for _, labels, *_ in loader)


START_BUDGET_S = 0.6

if __name__ == "__main__":
    variants = {
        "files, num_workers=0": one_epoch(make_loader(Files(paths), 0, batch_size=32)),
        "shards, num_workers=0": one_epoch(make_loader(TarShards(shards), 0, batch_size=32)),
    }
    kept = make_loader(TarShards(shards), 1, batch_size=32, persistent_workers=True)
    variants["shards, num_workers=1, persistent"] = one_epoch(kept)
    began = time.perf_counter()
    variants["shards, num_workers=1, persistent"]()  # its warm-up epoch starts the worker
    first_epoch_s = time.perf_counter() - began
    kept_counts = [1]
    fresh_workers = 1  # started afresh every epoch: each round starts it anew
    if first_epoch_s > START_BUDGET_S:
        print(f"the first epoch with one worker took {first_epoch_s:.2f} s, its start "
              f"included: over {START_BUDGET_S} s, so the two-worker and fresh loaders "
              "are left out")  # fmt: skip
        fresh_workers = 0
    else:
        kept_counts.append(2)
        kept = make_loader(TarShards(shards), 2, batch_size=32, persistent_workers=True)
        variants["shards, num_workers=2, persistent"] = one_epoch(kept)
    del kept
    for name, epoch in variants.items():
        if name != "shards, num_workers=1, persistent":  # warmed up above
            epoch()  # the warm-up epoch: persistent workers start here, once
    fresh_counts = [0]  # the loaders without persistent workers, by num_workers
    if fresh_workers:
        fresh_counts.append(fresh_workers)
        variants[f"shards, num_workers={fresh_workers}"] = one_epoch(
            make_loader(TarShards(shards), fresh_workers, batch_size=32)
        )
    # Loading is CPU work: the timings are stamped with the CPU, whatever device trains.
    timed = compare(
        "one epoch of 256 images", variants, device="cpu", repeats=4, warmup=0, number=1
    )
    records = {r.variant: r for r in timed}
    del variants  # the last reference to the loaders: persistent workers shut down

# %%
# The figure plots the table as images per second, with bars from the first to the
# third quartile of the repeats (overlapping bars: no difference shown). Read it with
# three costs in mind:
# decoding (which workers share out), starting worker processes (paid every epoch unless
# ``persistent_workers=True``), and sending each batch from a worker to the main
# process (paid per batch, so a larger ``batch_size`` spreads it over more images).
# ``prefetch_factor`` (default 2) is how many batches each worker keeps ready ahead of
# time: it absorbs uneven item times but cannot raise the steady rate of busy workers.
if __name__ == "__main__":
    import matplotlib.pyplot as plt  # under the guard: a spawned worker need not import it

    rate = {name: 256 / r.median_s for name, r in records.items()}

    def plot_rates(names: list[str], xs: list[float], **style) -> None:
        low = [rate[n] - 256 / records[n].q3_s for n in names]  # slower quartile
        high = [256 / records[n].q1_s - rate[n] for n in names]  # faster quartile
        ax.errorbar(xs, [rate[n] for n in names], yerr=[low, high], capsize=3, **style)

    fig, ax = plt.subplots(figsize=(7.5, 3.6), layout="constrained")
    counts_axis = list(range(workers + 1))
    plot_rates(["files, num_workers=0"], [-0.05], fmt="s", color="0.4", label="one file per image")
    for label, prefix, xs, shift in (
        ("tar shards", "shards, num_workers={}", fresh_counts, 0.0),
        (
            "tar shards,\npersistent workers",
            "shards, num_workers={}, persistent",
            kept_counts,
            0.05,
        ),
    ):
        names = [prefix.format(n) for n in xs]
        plot_rates(names, [x + shift for x in xs], marker="o", label=label)
    ax.set(xlabel="num_workers", ylabel="images per second", xticks=counts_axis, ylim=(0, None))
    ax.set_title("One epoch, 256 PNG images (64 × 64), batch 32: median and quartiles")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)  # beside the data
    plt.show()

# %%
# Predict first: on your machine, do persistent workers load an epoch faster than
# fresh ones? On this machine, the measured rates and ratios, with the interval the
# noise allows and the verdict it supports, and, for scale, the time it takes only to
# open and read the 256 files, without decoding them:
from effpt.bench import format_seconds, time_callable
from effpt.expect import expect

if __name__ == "__main__":
    best, runner_up = sorted(rate, key=rate.get, reverse=True)[:2]
    print(f"highest median rate: {best}, {rate[best]:,.0f} images/s")
    ratio = speedup(records[runner_up], records[best])
    print(f"  over the runner-up ({runner_up}): {ratio}, {ratio.verdict}")
    ratio = speedup(records["files, num_workers=0"], records["shards, num_workers=0"])
    print(f"tar stream over files, no workers: {ratio}, {ratio.verdict}")
    opened = time_callable(lambda: [p.read_bytes() for p in paths], device="cpu")
    print(f"opening and reading the 256 files alone: {format_seconds(opened.median)}")
    if fresh_workers:
        fresh, kept = (
            records[f"shards, num_workers={fresh_workers}"],
            records[f"shards, num_workers={fresh_workers}, persistent"],
        )
        expect(
            f"persistent workers load an epoch faster than fresh ones ({fresh_workers} worker)",
            speedup(fresh, kept),
            above=1.0,
            device=device,
        )
    else:
        print(
            "persistent against fresh workers: not measured (the fresh loader was left out above)"
        )

# %%
# The tar format saves the opening of one file per image, and the line above prints what
# opening and reading the 256 files costs here. Where that is small against an epoch's
# median in the table (files on a local disk, in the page cache), the tar format has
# little to save, and parsing the archive can cost more than it saves; it earns its
# keep where opening a file is expensive, as on network file systems and object stores.
# Persistent workers save the start-up of the workers every epoch, which counts most
# when an epoch is short compared with that start-up.
#
# A damaged shard
# ---------------
# A shard cut short (an interrupted download, a full disk) should not end an epoch
# early without a word. Cut shard 0 where the header of its 11th member begins, at a
# 512-byte block boundary, and read it with ``TarShards``:
if __name__ == "__main__":
    with tarfile.open(shards[0]) as tar:
        members = tar.getmembers()
    cut = Path(workdir.name) / "cut.tar"
    cut.write_bytes(shards[0].read_bytes()[: members[10].offset])
    survivors = list(TarShards([cut]))
    print(f"TarShards read {len(survivors)} of {sizes[0]} items from cut.tar, and no error")

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert len(survivors) == 10
# sphinx_gallery_end_ignore

# %%
# :mod:`tarfile` takes a missing or invalid header after the first for the end of the
# archive, so a cut at a block boundary, or a member header overwritten in the middle,
# reads as a shorter, complete shard. :class:`effpt.data.ShardStream` is the hardened
# version of ``TarShards``: the same split (:func:`effpt.data.shard_plan`), plus a check
# that the archive ends with a real end-of-archive marker (two zero blocks), errors that
# name the shard and the last member read, skipped items counted where the training
# loop can read them, and a shuffle that changes every epoch.
from effpt.data import CorruptItemError, ShardStream

if __name__ == "__main__":
    try:
        list(ShardStream([cut]))
    except CorruptItemError as error:
        message = str(error).replace(workdir.name, "<tmp>")
        print(message)

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert f"after member '{members[9].name}'" in message
# sphinx_gallery_end_ignore

# %%
# With ``skip_bad=True`` it skips what it cannot read instead. The workers do the
# skipping, in other processes (the loader below starts one); each one records what it
# skipped where :meth:`~effpt.data.ShardStream.skipped` finds it, so the loop that
# consumes the loader can count the losses after the epoch (each worker also warns in
# its own output).
if __name__ == "__main__":
    stream = ShardStream([cut, *shards[1:]], skip_bad=True)
    one_worker = make_loader(stream, 1, batch_size=32)  # one worker process shows it
    n_items = sum(len(keys) for _, _, keys in one_worker)
    skipped = stream.skipped()
    print(f"{n_items} items delivered; skipped() lists {len(skipped)}:")
    for skip in skipped:
        print(
            f"  epoch {skip.epoch}, worker {skip.worker}:",
            skip.message.replace(workdir.name, "<tmp>"),
        )

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert n_items == 10 + sum(sizes[1:]) and len(skipped) == 1
# sphinx_gallery_end_ignore

# %%
# Shuffled streams: a new order every epoch
# -----------------------------------------
# ``shuffle=True`` permutes the shard order (the same permutation in every worker, so the
# split still holds) and mixes items through a buffer in each worker. The order depends
# on the seed, the epoch and the number of workers: call
# :meth:`~effpt.data.ShardStream.set_epoch` before each epoch, as with
# :class:`~torch.utils.data.distributed.DistributedSampler`. The epoch lives in shared
# memory, so it reaches workers that persist across epochs too.
if __name__ == "__main__":
    stream = ShardStream(shards, shuffle=True, seed=0)
    loader = make_loader(stream, workers, batch_size=32, persistent_workers=workers > 0)
    orders = []
    for epoch_number in range(2):
        stream.set_epoch(epoch_number)
        orders.append([key for _, _, keys in loader for key in keys])
        print(
            f"epoch {epoch_number}: {len(set(orders[-1]))} distinct items, first {orders[-1][:3]}"
        )
    del loader
    workdir.cleanup()

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert all(len(order) == len(set(order)) == 256 for order in orders)
    assert orders[0][:3] != orders[1][:3]
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
# - :mod:`tarfile` reads a shard cut at a block boundary as a complete, shorter one:
#   check for the end-of-archive marker, and make skipped items countable by the loop
#   (:class:`effpt.data.ShardStream` does both).
