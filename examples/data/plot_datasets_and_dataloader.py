"""
Load images in batches with Dataset and DataLoader
==================================================

.. effpt-before-you-start::
   :learn: - Write a map-style dataset with ``__len__`` and ``__getitem__``, and see how the
             DataLoader samples, shuffles and collates its items.
           - Skip a last batch of one, on which batch norm cannot train, with
             ``drop_last=True``.
           - Load a folder of PNG files in batches, and keep them ``uint8`` until they reach
             the device.
           - Load an epoch with and without worker processes, with the script's work under
             ``if __name__ == "__main__":``.
   :read-first: :doc:`/explanations/workers` for the ``__main__`` guard and the start
                methods; :doc:`/explanations/timing` for how the epochs are timed.
   :needs: A CPU is enough. The page starts two worker processes (``fork`` where the
           script runs without a file, as in a notebook, and the system has it; the
           platform's default start method otherwise) and writes 256 small PNG files to a
           temporary folder that it deletes at the end. A batch is converted on a CUDA or
           Apple MPS GPU when there is one (``EFFPT_DEVICE=cpu`` keeps it on the CPU); the
           copies from pinned memory are timed on a CUDA GPU only.

A training loop wants batches; your data is a pile of items, often one file each.
:class:`torch.utils.data.Dataset` says how to read one item and
:class:`torch.utils.data.DataLoader` does the rest: it picks indices, reads the items,
stacks them into batches, and can do all of it in worker processes. This page builds a
dataset from scratch, then loads a folder of real PNG files with and without workers.
"""

# %%
# Like every script that starts workers, this page keeps its work under
# ``if __name__ == "__main__":`` and its classes outside it (:doc:`/explanations/workers`
# says why, and how a worker gets its copy of the dataset under each start method).
import torch

from effpt.device import describe, pick_device

if __name__ == "__main__":
    device = pick_device()
    print(describe(device))
    torch.manual_seed(0)

# %%
# A dataset is ``__len__`` plus ``__getitem__``
# ---------------------------------------------
# A map-style dataset answers two questions: how many items there are, and what item
# ``i`` is. Here item ``i`` is a pair: two features and a label. ``__getitem__`` must
# return item ``i`` itself: a dataset that returns a random item instead (as the image
# dataset of the `Effective PyTorch guide <https://github.com/vahidk/EffectivePyTorch>`__
# does) breaks shuffling, epochs and every guarantee below. The DataLoader supplies the
# rest.
from torch.utils.data import DataLoader, Dataset


class Points(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        features = torch.tensor([float(i), float(i) ** 0.5])  # (2,)
        return features, i % 3


if __name__ == "__main__":
    points = Points(10)
    print(f"{len(points)} items; item 3 = {points[3]}")

# %%
# What the DataLoader does with it
# --------------------------------
# With ``batch_size=4`` the loader asks its sampler for four indices, reads those four
# items, and *collates* them: the four feature tensors of shape ``(2,)`` are stacked into
# one ``(4, 2)`` tensor, and the four integer labels become a tensor of shape ``(4,)``.
# The pair structure of an item survives; each part gains a leading batch dimension.
if __name__ == "__main__":
    loader = DataLoader(points, batch_size=4)
    features, labels = next(iter(loader))
    print("indices of the first two batches:", list(loader.batch_sampler)[:2])
    print("features", tuple(features.shape), features.dtype, "| labels", tuple(labels.shape))
    print(features)

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert features.shape == (4, 2) and labels.shape == (4,)
# sphinx_gallery_end_ignore

# %%
# ``shuffle=True`` draws a new permutation of the indices every epoch: each item is
# still read exactly once per epoch, in a different order. A seeded
# :class:`torch.Generator` makes the sequence of orders reproducible (the randomness
# page goes further). Two epochs, read through the loader (feature 0 of item ``i`` is
# ``i``):
if __name__ == "__main__":
    shuffled = DataLoader(
        points, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0)
    )
    epochs = [[int(i) for features, _ in shuffled for i in features[:, 0]] for _ in range(2)]
    for k, order in enumerate(epochs):
        print(f"epoch {k} visits: {order}")

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert all(sorted(order) == list(range(10)) for order in epochs)
    assert epochs[0] != epochs[1]
# sphinx_gallery_end_ignore

# %%
# The last batch, and why batch norm minds it
# -------------------------------------------
# Ten items in batches of four leave a last batch of two. With nine items the last batch
# holds a single item, and :class:`torch.nn.BatchNorm1d` in training mode cannot compute a
# variance from one value per channel: it raises. ``drop_last=True`` skips the short batch.
if __name__ == "__main__":
    sizes = [len(y) for _, y in DataLoader(points, batch_size=4)]
    print("batch sizes, 10 items:", sizes)

    norm = torch.nn.BatchNorm1d(2)
    try:
        for x, _ in DataLoader(Points(9), batch_size=4):
            norm(x)
    except ValueError as error:
        print("9 items, last batch of 1 ->", error)

    kept = [len(y) for _, y in DataLoader(Points(9), batch_size=4, drop_last=True)]
    print("with drop_last=True:", kept)

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert sizes == [4, 4, 2] and kept == [4, 4]
# sphinx_gallery_end_ignore

# %%
# A folder of real images
# -----------------------
# Most image collections use one folder per class: ``<root>/<class>/<name>.png``.
# :func:`effpt.data.write_image_folder` draws such a folder of small labelled PNG files.
# The dataset below reads that layout: item ``i`` is the ``i``-th file, decoded with
# Pillow into a ``uint8`` tensor of shape ``(3, height, width)`` and labelled by its
# folder. (:class:`effpt.data.ImageFolder` is a hardened version: its errors name the
# file, it refuses 16-bit images that 8-bit RGB would clip, and it skips folders that
# happen to be named like images.)
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from effpt.data import write_image_folder


class ImageFiles(Dataset):
    def __init__(self, root: Path) -> None:
        self.classes = sorted(p.name for p in root.iterdir() if p.is_dir())
        self.files = sorted(root.glob("*/*.png"))

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        path = self.files[i]
        with Image.open(path) as image:
            pixels = np.array(image.convert("RGB"))  # (height, width, 3), a copy
        image = torch.from_numpy(pixels).permute(2, 0, 1)  # (3, height, width)
        return image, self.classes.index(path.parent.name)


if __name__ == "__main__":
    workdir = tempfile.TemporaryDirectory()
    root = Path(workdir.name) / "shapes"
    paths = write_image_folder(root, 256, size=64, seed=0)
    dataset = ImageFiles(root)
    image, label = dataset[0]
    print(f"{len(dataset)} files, classes {dataset.classes}")
    print(f"item 0: {tuple(image.shape)} {image.dtype}, label {label} ({dataset.classes[label]})")

# %%
# Twelve of them, with the labels the dataset gives them:
import matplotlib.pyplot as plt

if __name__ == "__main__":
    fig, axes = plt.subplots(2, 6, figsize=(9, 3.4), layout="constrained")
    for ax, index in zip(axes.flat, range(0, len(dataset), len(dataset) // 12), strict=False):
        image, label = dataset[index]
        ax.imshow(image.permute(1, 2, 0).numpy())  # (height, width, 3) for matplotlib
        ax.set_title(dataset.classes[label], fontsize=10)
        ax.set_axis_off()
    fig.suptitle("Dataset items: 64 × 64 PNG files, label = folder name")
    plt.show()

# %%
# Batches of images, and where to convert them
# --------------------------------------------
# A batch of 32 items is a ``(32, 3, 64, 64)`` tensor of bytes. Keep it ``uint8`` until it
# reaches the device: a copy to a GPU then moves a quarter of the bytes of float32 (on a
# CPU, ``.to(device)`` copies nothing), and the conversion to floats in ``[0, 1]`` is one
# elementwise pass on the device.
if __name__ == "__main__":
    images, labels = next(iter(DataLoader(dataset, batch_size=32, shuffle=True)))
    inputs = images.to(device).float().div_(255)  # (batch, 3, height, width)
    print(f"{tuple(images.shape)} {images.dtype} -> {inputs.dtype} on {device}")
    print(f"bytes per batch: {images.nbytes:,} as uint8, {inputs.nbytes:,} as float32")

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert images.shape == (32, 3, 64, 64) and inputs.nbytes == 4 * images.nbytes
# sphinx_gallery_end_ignore

# %%
# Pinned memory, for copies to a GPU
# ----------------------------------
# A copy from ordinary (pageable) host memory to a CUDA GPU goes through a page-locked
# staging buffer, and the host waits while the data is staged. From page-locked
# (*pinned*) memory the GPU reads directly, and ``.to(device, non_blocking=True)``
# returns at once, so the host can prepare the next batch while the copy runs.
# ``DataLoader(..., pin_memory=True)`` puts each batch in pinned memory for you (with
# workers, in a background thread of the main process). The cell times the copy itself,
# for one batch of 256 RGB images of 224 × 224 as ``uint8``, from each kind of memory.
# It measures on a CUDA device only; elsewhere it says so and measures nothing.
import math

from effpt.bench import compare, speedup
from effpt.expect import expect

if __name__ == "__main__":
    shape = (256, 3, 224, 224)  # (batch, 3, height, width)
    print(f"one batch: {math.prod(shape) / 1e6:.1f} MB")
    if device.type == "cuda":
        pageable = torch.randint(0, 256, shape, dtype=torch.uint8)
        pinned = pageable.pin_memory()
        copies = compare(
            "copy one batch to the GPU",
            {
                "pageable": lambda: pageable.to(device),
                "pinned, non_blocking": lambda: pinned.to(device, non_blocking=True),
            },
            device=device,  # synchronizes after each timed block: the copy is counted
        )
        for r in copies:
            print(f"{r.variant}: {pageable.nbytes / r.median_s / 1e9:.1f} GB/s")
        expect(
            "a copy from pinned memory beats one from pageable memory",
            speedup(copies[0], copies[1]),
            above=1.0,
            device=device,
        )
        batch, _ = next(iter(DataLoader(dataset, batch_size=32, pin_memory=True)))
        print("a batch from DataLoader(pin_memory=True) is pinned:", batch.is_pinned())
    else:
        print(f"pinned-memory copies: not measured, this run is on {device.type}, not CUDA")

# %%
# Loading in worker processes
# ---------------------------
# With ``num_workers=2`` two processes read and collate batches while the main process
# consumes them. Each worker gets its own copy of the dataset. Predict first: do two
# workers load an epoch faster than none on your machine? One epoch each way, timed
# with :func:`effpt.bench.compare` (:doc:`/explanations/timing` says how it measures).
# The workers persist between epochs (``persistent_workers=True``): the untimed first
# epoch starts them, so the timed epochs count loading, not starting.
from multiprocessing import get_all_start_methods

# A worker started by spawn or forkserver imports this script's file to find ImageFiles;
# code run without a file (a notebook, this site's build) has none, and only a forked
# worker, a copy of this process, has the class. So: fork there, where the OS has fork;
# None elsewhere, the platform's default (effpt.data.start_method() makes the same
# choice for the other data pages)
START = "fork" if "__file__" not in globals() and "fork" in get_all_start_methods() else None


def make_loader(dataset: Dataset, num_workers: int, **kwargs) -> DataLoader:
    context = START if num_workers > 0 else None  # only worker processes have a start method
    return DataLoader(dataset, num_workers=num_workers, multiprocessing_context=context, **kwargs)


if __name__ == "__main__":
    loaders = {
        f"num_workers={n}": make_loader(dataset, n, batch_size=32, persistent_workers=n > 0)
        for n in (0, 2)
    }
    records = compare(
        f"one epoch, {len(dataset)} PNG files",
        {name: (lambda ld=ld: sum(len(y) for _, y in ld)) for name, ld in loaders.items()},
        device="cpu",  # loading is CPU work, whatever device trains
    )
    for r in records:
        print(f"{r.variant}: {len(dataset) / r.median_s:,.0f} images/s")
    expect(
        "two workers load an epoch faster than none",
        speedup(records[0], records[1]),
        above=1.0,
        device="cpu",
    )

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert all(sum(len(y) for _, y in ld) == len(dataset) for ld in loaders.values())
# sphinx_gallery_end_ignore

# %%
# Workers pay off when reading and decoding a batch takes longer than sending it
# between processes, and when an epoch is long enough to repay starting the workers (a
# fresh start every epoch, by default). With two workers and two idle cores the ideal
# is twice the rate of one process.
#
# The verdict above is what this machine measured: where it does not hold, the
# decoding the two workers shared out saved less time than they cost: shipping their
# batches back, and, where fewer than two cores are idle (a one-core machine, or one
# busy with other work), competing with the main process and each other for the cores
# there are (this run's load is printed below). :doc:`plot_streaming_tar_shards`
# measures the rate against the number of workers, and what starting them afresh every
# epoch costs.
from effpt.machine import load_line

if __name__ == "__main__":
    print(load_line())
    del loaders  # the last references: the persistent workers shut down
    workdir.cleanup()

# %%
# Summary
# -------
# - A map-style dataset needs ``__len__`` and ``__getitem__``; the DataLoader adds
#   sampling, shuffling, batching and collation (stacking each part of the items).
# - ``drop_last=True`` avoids a short last batch, which batch norm cannot train on when it
#   holds a single item.
# - Keep images ``uint8`` in the loader and convert to float on the device. On a CUDA GPU,
#   ``pin_memory=True`` and ``non_blocking=True`` copies let the host work on while a
#   batch is copied.
# - Put the work of a script that starts workers under ``if __name__ == "__main__":``
#   and its dataset classes outside it, so that every start method can find them.
