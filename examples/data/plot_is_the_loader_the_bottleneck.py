"""
Find out whether the data loader is the bottleneck
==================================================

.. effpt-before-you-start::
   :learn: - Time a training step fed by the DataLoader against the same step fed from
             memory, and read the difference as the time spent waiting for data.
           - Sweep ``num_workers``, ``prefetch_factor`` and ``persistent_workers`` on a
             dataset whose items must be decoded, and see where workers start to pay.
           - Keep each worker to one thread with ``worker_init_fn``, and see what
             oversubscribed cores cost.
           - Read a whole batch in one ``__getitem__`` call with a ``BatchSampler``, instead
             of one item at a time.
   :read-first: :doc:`plot_datasets_and_dataloader` for the DataLoader itself;
                :doc:`/explanations/workers` for the ``__main__`` guard and the start
                methods; :doc:`/explanations/timing` for how the epochs are timed.
   :needs: A CPU is enough. The page starts worker processes (``fork`` where the script
           runs without a file, as in a notebook, and the system has it; the platform's
           default start method otherwise), at most two per loader; the loaders that keep
           theirs (``persistent_workers=True``) hold them until the page is done with them,
           so the workers of several loaders exist at once, idle but for those of the
           loader being read. It encodes 64 small PNG images in memory. On a CUDA GPU it
           also times ``pin_memory=True`` with ``non_blocking=True`` copies.

When a training run is slower than it should be, the first question is whether the model
or the data is holding it up. This page answers it by measurement: the same training step,
fed once from batches already in memory and once through the
:class:`~torch.utils.data.DataLoader`, then the loader's knobs turned one at a time on
a dataset that decodes PNG images. Whether workers help depends on the work per item and
on the cores the machine has free; the page measures both on the machine it runs on.
"""

# %%
# The work sits under ``if __name__ == "__main__":`` and the classes outside it, so that
# workers started by ``spawn`` or ``forkserver`` can import them. The number of cores
# this process may use decides how many workers can run at once.
import os

import torch

from effpt.device import describe, pick_device


def usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):  # Linux: the cores this process may run on
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


if __name__ == "__main__":
    device = pick_device()
    print(describe(device))
    cores = usable_cores()
    print(f"cores this process may use: {cores}; torch threads: {torch.get_num_threads()}")
    torch.manual_seed(0)
    # Under forkserver, every worker is forked from one server process: have that server
    # import torch once, so that each worker starts with torch imported instead of
    # importing it again (a second or two each). Under fork and spawn it changes nothing.
    if "forkserver" in torch.multiprocessing.get_all_start_methods():  # not on Windows
        torch.multiprocessing.set_forkserver_preload(["torch"])

# %%
# A dataset that must decode every item
# -------------------------------------
# Each item is a PNG file held as bytes. ``__getitem__`` decodes it with Pillow and
# resizes it (to 96 × 96 unless told otherwise) with :func:`torch.nn.functional.interpolate`: per-item work in
# the CPU, as a real image pipeline has. ``decoded=False`` skips the decoding and returns
# a stored tensor: a dataset with almost no work per item, for comparison.
import io

import numpy as np
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import Dataset


class PngBytes(Dataset):
    def __init__(
        self, blobs: list[bytes], labels: list[int], decoded: bool = True, size: int = 96
    ) -> None:
        self.blobs, self.labels, self.decoded, self.size = blobs, labels, decoded, size
        self.ready = None if decoded else [self.decode(b) for b in blobs]

    def __len__(self) -> int:
        return len(self.blobs)

    def decode(self, blob: bytes) -> torch.Tensor:
        with Image.open(io.BytesIO(blob)) as image:
            pixels = torch.from_numpy(np.array(image.convert("RGB")))  # (64, 64, 3)
        x = pixels.permute(2, 0, 1).unsqueeze(0).float().div_(255)  # (1, 3, 64, 64)
        return F.interpolate(x, size=self.size, mode="bilinear", antialias=True)[
            0
        ]  # (3, size, size)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        image = self.decode(self.blobs[i]) if self.decoded else self.ready[i]
        return image, self.labels[i]


def png_bytes(n: int, size: int, seed: int) -> tuple[list[bytes], list[int]]:
    rng = np.random.default_rng(seed)
    blobs, labels = [], []
    for _ in range(n):
        pixels = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)  # noise: a slow decode
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="PNG")
        blobs.append(buffer.getvalue())
        labels.append(int(rng.integers(4)))
    return blobs, labels


if __name__ == "__main__":
    blobs, labels = png_bytes(64, size=64, seed=0)
    heavy, light = PngBytes(blobs, labels), PngBytes(blobs, labels, decoded=False)
    print(f"{len(heavy)} PNG files, {sum(map(len, blobs)) / 1e6:.1f} MB encoded")
    print("item 0:", tuple(heavy[0][0].shape), heavy[0][0].dtype)

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert torch.equal(heavy[5][0], light[5][0]) and heavy[0][0].shape == (3, 96, 96)
# sphinx_gallery_end_ignore

# %%
# The step, fed from memory and fed by the loader
# -----------------------------------------------
# An epoch is a loop of training steps on a small convolutional network. Fed from
# memory, the batches were decoded beforehand and the loop measures the step alone. Fed
# by a loader with ``num_workers=0``, the same loop also waits for every batch to be
# read and decoded. The difference is the time the step spends waiting for data.
# Where the page starts workers, their start method comes from
# :func:`effpt.data.start_method`, the choice :doc:`plot_datasets_and_dataloader` makes
# on the page and explains.
from torch.utils.data import DataLoader

from effpt.data import start_method

START = start_method()  # "fork" without a file to import (a notebook); else None, the default
BATCH = 16


def make_loader(dataset: Dataset, num_workers: int, **kwargs) -> DataLoader:
    if num_workers > 0:  # only worker processes have a start method
        kwargs.setdefault("multiprocessing_context", START)
    kwargs.setdefault("batch_size", BATCH)
    return DataLoader(dataset, num_workers=num_workers, **kwargs)


def make_step(device: torch.device):
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(128, 4),
    ).to(device)  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(images: torch.Tensor, labels: torch.Tensor) -> None:
        images, labels = images.to(device), labels.to(device)
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def epoch(batches, step) -> int:
    seen = 0
    for images, labels in batches:
        step(images, labels)
        seen += len(labels)
    return seen


if __name__ == "__main__":
    step = make_step(device)
    in_memory = list(make_loader(heavy, 0))  # decoded once, before timing
    print(f"{len(in_memory)} batches of {BATCH} per epoch")

# %%
# Predict first: on your machine, what share of an epoch read through the loader goes
# into waiting for data?
import time

from effpt.bench import compare, speedup
from effpt.expect import expect

if __name__ == "__main__":
    first = compare(
        f"one epoch of {len(heavy)} images, batch {BATCH}",
        {
            "fed from memory": lambda: epoch(in_memory, step),
            "DataLoader, num_workers=0": lambda: epoch(make_loader(heavy, 0), step),
        },
        device=device,
        repeats=4,
        number=1,
    )
    memory_s, loader_s = first[0].median_s, first[1].median_s
    print(
        f"waiting for data: {1 - memory_s / loader_s:.0%} of an epoch fed by the loader "
        "(from the medians; the verdict below says whether the spread allows reading it)"
    )
    expect(
        "the step fed from memory runs faster than the step fed by the loader",
        speedup(first[1], first[0]),
        above=1.0,
        device=device,
    )

# %%
# Workers: where they start to pay
# --------------------------------
# Now the loader gets worker processes, each reading whole batches while the main
# process trains. The loaders keep their workers (``persistent_workers=True``), and one
# untimed epoch starts them, so the epochs below count the work, not the start. Both
# datasets run the sweep: decoding items, and handing back stored tensors. A worker
# sends each batch through shared memory, which costs about the same for both; it pays
# only where the work it takes off the main process is larger.
#
# Starting workers can cost more than the rest of this page: under ``spawn`` each one
# imports torch. So the two-worker loader starts first, timed. Where its two workers
# take over ``START_BUDGET_S`` to start, seven more starts would add five seconds or
# more, so the sweep leaves out one worker and ``prefetch_factor=4``, the threads
# timing further down is skipped, and the cell says so.
#
# Predict first: with the cores printed at the top, will two workers feed more images
# per second than none, and will they for the dataset with no decoding?
START_BUDGET_S = 1.5

if __name__ == "__main__":
    two_workers = make_loader(heavy, 2, persistent_workers=True)
    t0 = time.perf_counter()  # the first epoch of a two-worker loader starts its workers
    first_epoch = iter(two_workers)
    next(first_epoch)
    start_s = time.perf_counter() - t0  # read in "What a fresh start costs", below
    for _ in first_epoch:  # finish the epoch: the next one reuses the workers
        pass
    every_variant = start_s <= START_BUDGET_S
    if not every_variant:
        print(f"two workers took {start_s:.2f} s to start, over {START_BUDGET_S} s: this run "
              "leaves out one worker, prefetch_factor=4 and the threads timing")  # fmt: skip
    counts = {"decode": (0, 1, 2) if every_variant else (0, 2), "stored": (0, 2)}
    loaders = {}
    for name, dataset in (("decode", heavy), ("stored", light)):
        for n in counts[name]:
            loaders[f"{name}, num_workers={n}"] = (
                two_workers
                if (name, n) == ("decode", 2)
                else make_loader(dataset, n, persistent_workers=n > 0)
            )
    if every_variant:
        loaders["decode, num_workers=2, prefetch_factor=4"] = make_loader(
            heavy, 2, persistent_workers=True, prefetch_factor=4
        )
    records = compare(
        "one epoch through the loader",
        {name: (lambda ld=ld: epoch(ld, step)) for name, ld in loaders.items()}
        | {"fed from memory": lambda: epoch(in_memory, step)},
        device=device,
        repeats=4,
        number=1,
    )
    by_name = {r.variant: r for r in records}

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert all(epoch(ld, lambda *_: None) == len(heavy) for ld in loaders.values())
# sphinx_gallery_end_ignore

# %%
# The verdicts below are this machine's, with its cores named in the statement: on more
# cores, or on an idle machine, the crossover moves. The table's speed-ups are over its
# first row; each verdict compares a dataset with its own ``num_workers=0``.
if __name__ == "__main__":
    for name, n in (("decode", 1), ("decode", 2), ("stored", 2)):
        if n not in counts[name]:
            continue  # left out above, for the start's cost
        workers = "one worker feeds" if n == 1 else "two workers feed"
        expect(
            f"{workers} an epoch faster than none ({name} items, {cores} cores)",
            speedup(by_name[f"{name}, num_workers=0"], by_name[f"{name}, num_workers={n}"]),
            above=1.0,
            device="cpu",  # loading is CPU work, whatever device trains
        )
    if every_variant:
        expect(
            f"prefetch_factor=4 feeds two workers' epoch faster than the default 2 ({cores} cores)",
            speedup(
                by_name["decode, num_workers=2"],
                by_name["decode, num_workers=2, prefetch_factor=4"],
            ),
            above=1.0,
            device="cpu",
        )

# %%
# Other work on the machine can move the worker verdicts either way: the workers
# compete with it for the cores, yet the OS shares a busy CPU among the processes that
# want it, so the main process and its workers can win a larger share of it than the
# main process alone. One run does not show which effect wins; read the verdicts with
# this run's load:
if __name__ == "__main__":
    from effpt.machine import load_line

    print(load_line())

# %%
# Images per second against workers, for both datasets, with the rate of the step fed
# from memory (timed in the same rounds) as the ceiling: no loader makes the step
# faster than that, so a point above the line is noise. The bars span the quartiles.
if __name__ == "__main__":
    import matplotlib.pyplot as plt  # under the guard: a spawned worker need not import it

    fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
    for name, marker, shift in (("decode", "o", -0.04), ("stored", "s", 0.04)):
        rs = [by_name[f"{name}, num_workers={n}"] for n in counts[name]]
        rate = [len(heavy) / r.median_s for r in rs]
        low = [rt - len(heavy) / r.q3_s for rt, r in zip(rate, rs, strict=True)]
        high = [len(heavy) / r.q1_s - rt for rt, r in zip(rate, rs, strict=True)]
        label = "decoding each item" if name == "decode" else "stored tensors"
        ax.errorbar(
            [n + shift for n in counts[name]],
            rate,
            yerr=[low, high],
            fmt=marker,
            capsize=3,
            label=label,
        )
    ax.axhline(len(heavy) / by_name["fed from memory"].median_s, color="0.5", ls="--",
               label="step fed from memory")  # fmt: skip
    ax.set(xlabel="num_workers", ylabel="images per second", xticks=(0, 1, 2), yscale="log")
    ax.set_title(f"{cores} cores, start method {START or torch.multiprocessing.get_start_method()}")
    ax.legend(fontsize=8)
    plt.show()

# %%
# What a fresh start costs
# ------------------------
# Without ``persistent_workers=True`` a loader starts its workers at every epoch. Under
# ``fork`` a worker is a copy of the main process; under ``spawn`` it starts a new
# interpreter that imports torch and unpickles the dataset, which takes longer; under
# ``forkserver`` it is forked from a server process that imported torch once (the
# first cell's ``set_forkserver_preload``), and unpickles the dataset. The sweep above
# timed the first batch of its loader with two workers, start included, once, under the
# start method this run uses (a start costs the same whether the workers then persist
# or not); the cell compares it with one step of the epoch without workers, which
# reads, decodes and trains on one batch.
if __name__ == "__main__":
    method = START or torch.multiprocessing.get_start_method()
    batch_s = by_name["decode, num_workers=0"].median_s / len(in_memory)
    print(f"start method {method}: first batch from two fresh workers after {start_s:.2f} s")
    print(f"one step without workers (a batch read, decoded and trained on) takes "
          f"{batch_s * 1e3:.0f} ms: the first batch from fresh workers, start included, "
          f"takes {start_s / batch_s:.1f} times as long")  # fmt: skip

# %%
# Pinned memory and ``non_blocking`` copies
# -----------------------------------------
# ``pin_memory=True`` makes the loader put each batch in page-locked host memory, from
# which a CUDA GPU copies directly, and ``.to(device, non_blocking=True)`` then returns
# before the copy ends. Pinning exists for copies to an accelerator; on a CPU-only run
# the loader has nothing to pin for, and the cell prints what it says about that.
import warnings

if __name__ == "__main__":
    if device.type == "cuda":
        pinned = make_loader(heavy, 2, persistent_workers=True, pin_memory=True)

        def pinned_step(images: torch.Tensor, labels: torch.Tensor) -> None:
            step(images.to(device, non_blocking=True), labels.to(device, non_blocking=True))

        gpu = compare(
            "one epoch, two workers, copies to the GPU",
            {
                "pageable": lambda: epoch(loaders["decode, num_workers=2"], step),
                "pin_memory, non_blocking": lambda: epoch(pinned, pinned_step),
            },
            device=device,
            repeats=4,
            number=1,
        )
        expect(
            "pinned batches and non_blocking copies feed the GPU step faster",
            speedup(gpu[0], gpu[1]),
            above=1.0,
            device=device,
        )
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            images, _ = next(iter(make_loader(heavy, 0, pin_memory=True)))
        said = "; ".join(str(w.message) for w in caught) or "(no warning)"
        print(f"on {device.type}: pin_memory=True -> the loader says: {said}")
        print("the batch is pinned:", torch.cuda.is_available() and images.is_pinned())

# %%
# Threads inside workers
# ----------------------
# Each worker is a process with its own pool of threads for torch's operations. The
# DataLoader sets a worker's pool to one thread before it reads anything; a
# ``worker_init_fn`` runs after that and can change it. Two workers with as many threads
# each as there are cores ask for more threads than there are cores, and the threads
# then wait their turns (*oversubscription*). Setting
# ``torch.set_num_threads(1)`` in ``worker_init_fn`` states the one-thread rule in your
# own code, which is also where to set the pools of libraries that keep their own
# (OpenCV, a BLAS): the DataLoader sets only torch's.
from functools import partial


def set_threads(n: int, worker_id: int) -> None:  # worker_init_fn passes the worker id
    torch.set_num_threads(n)


class ThreadsSeen(Dataset):
    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int) -> int:
        return torch.get_num_threads()


if __name__ == "__main__":
    seen = {
        n: list(make_loader(ThreadsSeen(), 1, batch_size=None, worker_init_fn=partial(set_threads, n)))
        for n in (1, cores)
    }  # fmt: skip
    print(
        f"threads in a worker after set_num_threads(1): {seen[1]}; after set_num_threads({cores}): {seen[cores]}"
    )

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert seen[1] == [1] and seen[cores] == [cores]
# sphinx_gallery_end_ignore

# %%
# A torch operation uses its threads only when it is large enough to split, so this
# comparison resizes eight images to 160 × 160. Under ``fork`` it does not run: a forked
# worker inherits the parent's OpenMP thread pool in a state it cannot use, and a
# worker that raises its thread count and then runs a parallel operation can wait
# forever (a run of this page while it was written did, on a Linux build of torch
# 2.13). That is a second reason for the one-thread rule. Under ``spawn`` and
# ``forkserver`` each worker starts a fresh process, and the cell measures, unless the
# two workers above took over ``START_BUDGET_S`` to start.
#
# Predict first: on this many cores, how much do two workers with ``cores`` threads
# each lose against two with one thread each?
if __name__ == "__main__":
    method = START or torch.multiprocessing.get_start_method()
    if method == "fork":
        print(f"threads per worker: not timed under {method} (a worker with more threads can hang)")
    elif not every_variant:
        print(f"threads per worker: not timed (two workers took {start_s:.2f} s to start; "
              f"this cell would start four)")  # fmt: skip
    else:
        large = PngBytes(blobs[:8], labels[:8], size=160)
        crowded = make_loader(
            large, 2, persistent_workers=True, worker_init_fn=partial(set_threads, cores)
        )
        single = make_loader(
            large, 2, persistent_workers=True, worker_init_fn=partial(set_threads, 1)
        )
        threads = compare(
            f"one epoch of {len(large)} images, two workers, {cores} cores",
            {
                f"{cores} threads per worker": lambda: epoch(crowded, step),
                "1 thread per worker": lambda: epoch(single, step),
            },
            device=device,
            repeats=4,
            number=1,
        )
        expect(
            f"one thread per worker beats {cores} per worker ({cores} cores)",
            speedup(threads[0], threads[1]),
            above=1.0,
            device="cpu",
        )
        del crowded, single
    del loaders, two_workers, first_epoch  # the last references: their workers shut down

# %%
# A whole batch in one call
# -------------------------
# One item at a time, the loader calls ``__getitem__`` once per item and then stacks the
# items (collation). When the data already sits in one tensor, a dataset can answer a
# whole list of indices with one indexing operation. A
# :class:`~torch.utils.data.BatchSampler` passed as ``sampler`` hands it those lists,
# and ``batch_size=None`` tells the loader not to batch again.
from torch.utils.data import BatchSampler, SequentialSampler


class Rows(Dataset):
    def __init__(self, features: torch.Tensor, labels: torch.Tensor) -> None:
        self.features, self.labels = features, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):  # an int, or a list of ints from a BatchSampler
        return self.features[i], self.labels[i]


if __name__ == "__main__":
    rows = Rows(torch.randn(8192, 32), torch.randint(0, 4, (8192,)))  # (items, features)
    one_by_one = DataLoader(rows, batch_size=256)
    whole = DataLoader(
        rows, sampler=BatchSampler(SequentialSampler(rows), 256, False), batch_size=None
    )
    a, b = next(iter(one_by_one)), next(iter(whole))
    print("same first batch:", torch.equal(a[0], b[0]), tuple(b[0].shape))

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert all(torch.equal(x[0], y[0]) for x, y in zip(one_by_one, whole, strict=True))
# sphinx_gallery_end_ignore

# %%
# Predict first: how many times faster is one indexing call per batch than 256 calls and
# a stack?
if __name__ == "__main__":
    sampling = compare(
        f"one epoch of {len(rows)} rows, batch 256, no workers",
        {
            "one item at a time": lambda: sum(len(y) for _, y in one_by_one),
            "a batch per call": lambda: sum(len(y) for _, y in whole),
        },
        device="cpu",
        repeats=4,
        number=1,
    )
    expect(
        "reading a batch per call beats reading an item per call",
        speedup(sampling[0], sampling[1]),
        above=1.0,
        device="cpu",
    )

# %%
# Summary
# -------
# - Time the step fed from memory against the step fed by the loader: the difference is
#   what the loader costs, and the ceiling any loader setting can reach.
#
# - Workers pay when the work per item is larger than the cost of sending a batch back
#   and they get CPU time to do it (idle cores, or a share of a busy machine's);
#   otherwise they cost time. Measure on your machine, with
#   ``persistent_workers=True`` so the start is paid once.
#
# - Keep each worker to one thread (``torch.set_num_threads(1)`` in ``worker_init_fn``,
#   and the same for other libraries' pools): more threads than cores wait their turns.
#
# - Where the data sits in memory already, a ``BatchSampler`` as ``sampler`` with
#   ``batch_size=None`` reads a batch with one indexing call.
#
# - ``pin_memory=True`` and ``non_blocking=True`` matter for copies to a CUDA GPU only.
#
# Related: :doc:`plot_streaming_tar_shards` measures workers on tar shards;
# :doc:`plot_worker_memory_that_grows` shows why each worker's memory can grow;
# :doc:`/auto_examples/performance/plot_cpu_knobs` says more about threads on a CPU.
