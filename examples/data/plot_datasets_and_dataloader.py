"""
Load images in batches with Dataset and DataLoader
==================================================

A training loop wants batches; your data is a pile of items, often one file each.
:class:`torch.utils.data.Dataset` says how to read one item and
:class:`torch.utils.data.DataLoader` does the rest: it picks indices, reads the items,
stacks them into batches, and can do all of it in worker processes. This page builds a
dataset from scratch, then loads a folder of real PNG files with and without workers.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_datasets_and_dataloader.py``.
"""

# %%
# A dataset is ``__len__`` plus ``__getitem__``
# ---------------------------------------------
# A map-style dataset answers two questions: how many items there are, and what item
# ``i`` is. Here item ``i`` is a pair: two features and a label. ``__getitem__`` must
# return item ``i`` itself: a dataset that returns a random item instead breaks
# shuffling, epochs and every guarantee below. The DataLoader supplies the rest.
import torch
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class Points(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        features = torch.tensor([float(i), float(i) ** 0.5])  # (2,)
        return features, i % 3


points = Points(10)
print(f"{len(points)} items; item 3 = {points[3]}")

# %%
# What the DataLoader does with it
# --------------------------------
# With ``batch_size=4`` the loader asks its sampler for four indices, reads those four
# items, and *collates* them: the four feature tensors of shape ``(2,)`` are stacked into
# one ``(4, 2)`` tensor, and the four integer labels become a tensor of shape ``(4,)``.
# The pair structure of an item survives; each part gains a leading batch dimension.
loader = DataLoader(points, batch_size=4)
features, labels = next(iter(loader))
print("indices of the first two batches:", list(loader.batch_sampler)[:2])
print("features", tuple(features.shape), features.dtype, "| labels", tuple(labels.shape))
print(features)

# sphinx_gallery_start_ignore
assert features.shape == (4, 2) and labels.shape == (4,)
# sphinx_gallery_end_ignore

# %%
# ``shuffle=True`` draws a new permutation of the indices every epoch, so each item is
# still read exactly once per epoch, in a different order. Passing a seeded
# :class:`torch.Generator` makes the order reproducible (the randomness page goes further).
shuffled = DataLoader(
    points, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0)
)
epoch_order = [i for batch in shuffled.batch_sampler for i in batch]
print("one shuffled epoch visits:", epoch_order)

# sphinx_gallery_start_ignore
assert sorted(epoch_order) == list(range(10))
# sphinx_gallery_end_ignore

# %%
# The last batch, and why batch norm minds it
# -------------------------------------------
# Ten items in batches of four leave a last batch of two. With nine items the last batch
# holds a single item, and :class:`torch.nn.BatchNorm1d` in training mode cannot compute a
# variance from one value per channel: it raises. ``drop_last=True`` skips the short batch.
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
assert sizes == [4, 4, 2] and kept == [4, 4]
# sphinx_gallery_end_ignore

# %%
# A folder of real images
# -----------------------
# :func:`effpt.data.write_image_folder` draws small labelled PNG files, one folder per
# class, the layout most image collections use: ``<root>/<class>/<name>.png``.
# :class:`effpt.data.ImageFolder` reads that layout; each item is decoded with Pillow into a
# ``uint8`` tensor of shape ``(3, height, width)`` and labelled by its folder:
#
# .. literalinclude:: /../src/effpt/data.py
#    :pyobject: ImageFolder.__getitem__
#
# The class lives in a module, not on this page, because worker processes must import it.
import tempfile
from pathlib import Path

from effpt.data import ImageFolder, write_image_folder

workdir = tempfile.TemporaryDirectory()
root = Path(workdir.name) / "shapes"
paths = write_image_folder(root, 256, size=64, seed=0)
dataset = ImageFolder(root)
image, label = dataset[0]
print(f"{len(dataset)} files, classes {dataset.classes}")
print(f"item 0: {tuple(image.shape)} {image.dtype}, label {label} ({dataset.classes[label]})")

# %%
# Twelve of them, with the labels the dataset gives them:
import matplotlib.pyplot as plt

fig, axes = plt.subplots(2, 6, figsize=(9, 3.4), layout="constrained")
for ax, index in zip(axes.flat, range(0, len(dataset), len(dataset) // 12), strict=False):
    image, label = dataset[index]
    ax.imshow(image.permute(1, 2, 0).numpy())  # (height, width, 3) for matplotlib
    ax.set_title(dataset.classes[label], fontsize=10)
    ax.set_axis_off()
fig.suptitle("ImageFolder items: 64 × 64 PNG files, label = folder name")
plt.show()

# %%
# Batches of images, and where to convert them
# --------------------------------------------
# A batch of 32 items is a ``(32, 3, 64, 64)`` tensor of bytes. Keep it ``uint8`` until it
# reaches the device: the copy is four times smaller than float32, and the conversion to
# floats in ``[0, 1]`` is one cheap elementwise pass there.
from effpt.device import describe, pick_device

device = pick_device()
images, labels = next(iter(DataLoader(dataset, batch_size=32, shuffle=True)))
inputs = images.to(device, non_blocking=True).float().div_(255)  # (batch, 3, height, width)
print(f"{tuple(images.shape)} {images.dtype} -> {inputs.dtype} on {device}")
print(f"bytes copied: {images.nbytes:,} as uint8 instead of {inputs.nbytes:,} as float32")

# sphinx_gallery_start_ignore
assert images.shape == (32, 3, 64, 64) and inputs.nbytes == 4 * images.nbytes
# sphinx_gallery_end_ignore

# %%
# Loading in worker processes
# ---------------------------
# With ``num_workers=2`` two processes read and collate batches while the main process
# consumes them. Each worker gets its own copy of the dataset; under the ``spawn`` and
# ``forkserver`` start methods that copy travels by pickle, which is why ``Points``, defined
# on this page, would fail there and ``ImageFolder`` works. One epoch each way, timed with
# :func:`effpt.bench.compare`:
import os

from effpt.bench import compare

cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
workers = min(2, cores)
loaders = {
    f"num_workers={n}": DataLoader(dataset, batch_size=32, num_workers=n) for n in (0, workers)
}
records = compare(
    f"one epoch, {len(dataset)} PNG files",
    {name: (lambda ld=ld: sum(len(y) for _, y in ld)) for name, ld in loaders.items()},
    device="cpu",  # loading is CPU work, whatever device trains
    repeats=3,
    number=1,
)
for r in records:
    per_image_ms = r.median_s / len(dataset) * 1e3
    print(
        f"{r.variant}: {len(dataset) / r.median_s:,.0f} images/s, {per_image_ms:.2f} ms per image"
    )
print(describe("cpu"))

# sphinx_gallery_start_ignore
assert all(sum(len(y) for _, y in ld) == len(dataset) for ld in loaders.values())
# sphinx_gallery_end_ignore

# %%
# Workers pay off when reading and decoding a batch takes longer than sending it between
# processes, and when an epoch is long enough to repay starting the workers (a fresh
# start every epoch, by default). Compare the milliseconds per image above with that
# overhead: for small images it can dominate. The next page measures throughput against
# the number of workers, and the options that cut the overhead.
workdir.cleanup()

# %%
# Summary
# -------
# - A map-style dataset needs ``__len__`` and ``__getitem__``; the DataLoader adds
#   sampling, shuffling, batching and collation (stacking each part of the items).
# - ``drop_last=True`` avoids a short last batch, which batch norm cannot train on when it
#   holds a single item.
# - Keep images ``uint8`` in the loader and convert to float on the device.
# - Datasets used with ``num_workers > 0`` belong in an importable module, so that
#   every start method can hand them to the workers.
