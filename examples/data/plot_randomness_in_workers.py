"""
Give every DataLoader worker its own random augmentations
=========================================================

Random crops, flips and noise only help training if they differ from item to item. Every
DataLoader worker starts from a copy of the dataset, and a random generator copied with
its state draws the same numbers in every copy. This page shows the duplicated draws, two
ways to fix them, and how a seeded generator on the DataLoader makes a run repeatable.

How workers get their copies is explained in :doc:`/explanations/workers`.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_randomness_in_workers.py``.
"""

# %%
# A random crop that owns its generator
# -------------------------------------
# :class:`effpt.data.RandomCrops` cuts a random 24 × 24 window out of each 32 × 32 image and
# returns the offsets it drew next to the crop, so that we can see them. Like NumPy
# recommends, it draws from a :class:`numpy.random.Generator` object, held on the dataset:
#
# .. literalinclude:: /../src/effpt/data.py
#    :pyobject: RandomCrops.__getitem__
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from effpt.data import ImageFolder, RandomCrops, write_image_folder

torch.manual_seed(0)
workdir = tempfile.TemporaryDirectory()
write_image_folder(Path(workdir.name) / "shapes", 64, size=32, seed=0)
images = ImageFolder(Path(workdir.name) / "shapes")
crops = RandomCrops(images, 24, rng=np.random.default_rng(0))
crop, label, offset = crops[0]
print(
    f"{len(crops)} items; item 0: crop {tuple(crop.shape)}, offset [top, left] = {offset.tolist()}"
)

# %%
# Two workers, one stream of numbers
# ----------------------------------
# With ``num_workers=2`` a map-style loader deals batches to the workers in turn: batches
# 0, 2, 4, 6 come from worker 0 and batches 1, 3, 5, 7 from worker 1. Each worker holds a
# copy of ``crops``, generator state included (copied by ``fork``, pickled by ``spawn``
# and ``forkserver``: the bug does not depend on the start method). Compare the draws:


def offsets_by_worker(loader: DataLoader) -> tuple[torch.Tensor, torch.Tensor]:
    batches = [offsets for _, _, offsets in loader]  # each (8, 2); batch k from worker k % 2
    return torch.cat(batches[0::2]), torch.cat(batches[1::2])  # (32, 2) each


def same_draws(a: torch.Tensor, b: torch.Tensor) -> int:
    return int((a == b).all(dim=1).sum())


loader = DataLoader(crops, batch_size=8, num_workers=2)
first, second = offsets_by_worker(loader)
print("worker 0 drew:", first[:4].tolist(), "...")
print("worker 1 drew:", second[:4].tolist(), "...")
print(f"identical draws: {same_draws(first, second)} of {len(first)}")
again, _ = offsets_by_worker(loader)
print("the next epoch repeats this one:", torch.equal(again, first))

# sphinx_gallery_start_ignore
assert same_draws(first, second) == len(first) == 32
assert torch.equal(again, first)
# sphinx_gallery_end_ignore

# %%
# Every draw repeats across the workers, and every epoch repeats the last: the workers
# are started afresh each epoch from the same copy, so the generator never moves on. Half
# the "random" crops are duplicates and none change between epochs.
#
# The classic form of this bug calls ``np.random`` functions in ``__getitem__``. Since
# PyTorch 1.9 the DataLoader seeds NumPy's global generator differently in every worker,
# so that form is fixed; a generator *object* held by the dataset, as above, is not.
#
# Fix 1: reseed in ``worker_init_fn``
# -----------------------------------
# Inside a worker, :func:`torch.initial_seed` returns the loader's base seed plus the
# worker's id: different in every worker, and drawn anew every epoch.
# :func:`effpt.data.seed_worker` seeds Python's and NumPy's global generators from it and
# replaces the generator on the worker's copy of the dataset:
#
# .. literalinclude:: /../src/effpt/data.py
#    :pyobject: seed_worker
from effpt.data import seed_worker

loader = DataLoader(crops, batch_size=8, num_workers=2, worker_init_fn=seed_worker)
fixed_first, fixed_second = offsets_by_worker(loader)
print(f"identical draws: {same_draws(fixed_first, fixed_second)} of {len(fixed_first)}")
fixed_again, _ = offsets_by_worker(loader)
print("the next epoch repeats this one:", torch.equal(fixed_again, fixed_first))

# sphinx_gallery_start_ignore
assert same_draws(fixed_first, fixed_second) <= 4
assert not torch.equal(fixed_again, fixed_first)
# sphinx_gallery_end_ignore

# %%
# A crop has 9 × 9 possible offsets, so two independent draws coincide once in 81
# times: a few matches out of 32 are chance, not a copy.
#
# Fix 2: draw from torch's generator
# ----------------------------------
# The DataLoader already seeds torch's global generator in each worker with that same
# ``initial_seed``. A dataset that draws with torch (``rng=None`` here uses
# :func:`torch.randint`) needs no ``worker_init_fn`` at all.
torch_crops = RandomCrops(images, 24, rng=None)
loader = DataLoader(torch_crops, batch_size=8, num_workers=2)
torch_first, torch_second = offsets_by_worker(loader)
print(f"identical draws: {same_draws(torch_first, torch_second)} of {len(torch_first)}")

# sphinx_gallery_start_ignore
assert same_draws(torch_first, torch_second) <= 4
# sphinx_gallery_end_ignore

# %%
# The draws of both workers, before and after the fix. On the left, every cross of worker
# 1 sits on a circle of worker 0.
import matplotlib.pyplot as plt

fig, axes = plt.subplots(1, 2, figsize=(8, 4), layout="constrained", sharey=True)
for ax, (a, b), title in (
    (axes[0], (first, second), "generator copied into each worker"),
    (axes[1], (fixed_first, fixed_second), "reseeded with seed_worker"),
):
    ax.scatter(a[:, 1], a[:, 0], s=90, facecolors="none", edgecolors="C0", label="worker 0")
    ax.scatter(b[:, 1], b[:, 0], s=40, marker="x", color="C3", label="worker 1")
    ax.set(xlabel="left offset (pixels)", title=title, xticks=range(9), yticks=range(9))
axes[0].set_ylabel("top offset (pixels)")
axes[0].legend(loc="upper right", framealpha=0.9)
fig.suptitle("Crop offsets drawn in one epoch, 32 per worker")
plt.show()

# %%
# Repeatable runs: a seeded generator on the DataLoader
# -----------------------------------------------------
# Different is not the same as repeatable. Each epoch the loader draws its base seed, and
# with ``shuffle=True`` the order, from ``generator``; without one it uses torch's global
# generator, whose state depends on everything the program did before. Give the loader
# its own seeded :class:`torch.Generator` and two runs deliver the same items with the same
# crops. (The seeds also depend on the worker count: keep ``num_workers`` the same too.)


def one_run(generator: torch.Generator | None) -> torch.Tensor:
    loader = DataLoader(
        crops,
        batch_size=8,
        shuffle=True,
        num_workers=2,
        worker_init_fn=seed_worker,
        generator=generator,
    )
    return torch.cat(
        [torch.cat([labels[:, None], offsets], dim=1) for _, labels, offsets in loader]
    )


unseeded = one_run(None), one_run(None)
seeded = one_run(torch.Generator().manual_seed(7)), one_run(torch.Generator().manual_seed(7))
print("without a generator, two runs agree:", torch.equal(*unseeded))
print("with generator seeded 7, two runs agree:", torch.equal(*seeded))
workdir.cleanup()

# sphinx_gallery_start_ignore
assert not torch.equal(*unseeded)
assert torch.equal(*seeded)
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Each worker works on a copy of the dataset: a random generator stored on it is copied
#   with its state, and every worker draws the same numbers, epoch after epoch.
# - Reseed per worker from :func:`torch.initial_seed` in a ``worker_init_fn``, or draw
#   from torch's generator, which the DataLoader seeds per worker for you.
# - For a repeatable run, pass a seeded ``generator`` to the DataLoader and keep
#   ``num_workers`` fixed.
