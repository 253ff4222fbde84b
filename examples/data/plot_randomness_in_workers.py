"""
Give every DataLoader worker its own random augmentations
=========================================================

.. effpt-before-you-start::
   :learn: - See a random generator held on the dataset draw the same numbers in every
             worker, epoch after epoch.
           - Check that the DataLoader seeds NumPy's global generator differently in each
             worker.
           - Reseed the dataset's generator in ``worker_init_fn``, or draw from torch's
             generator instead.
           - Make two runs deliver the same items and crops with a seeded ``generator`` on
             the DataLoader.
   :read-first: :doc:`plot_datasets_and_dataloader` for datasets, the DataLoader and its
                workers; :doc:`/explanations/workers` for how each worker gets its copy of
                the dataset.
   :needs: A CPU is enough; the page runs on the CPU even where there is a GPU. It
           starts worker processes, at most two per loader, for several loaders (``fork`` where
           the script runs without a file, as in a notebook, and the system has it; the
           platform's default start method otherwise), and writes 64 small PNG files to
           a temporary folder that it deletes at the end.

Random crops, flips and noise only help training if they differ from item to item. Every
DataLoader worker starts from a copy of the dataset, and a random generator copied with
its state draws the same numbers in every copy. This page shows the duplicated draws, two
ways to fix them, and how a seeded generator on the DataLoader makes a run repeatable.
"""

# %%
# Like every script that starts workers, this page keeps its work under
# ``if __name__ == "__main__":`` and what the workers need outside it
# (:doc:`/explanations/workers` says why, and how workers get their copies).
import torch

from effpt.device import describe

if __name__ == "__main__":
    print(describe("cpu"))  # the page runs on the CPU, whatever device the machine has
    torch.manual_seed(0)
    # Under forkserver, every worker is forked from one server process: have that server
    # import torch once, so that each worker starts with torch imported instead of
    # importing it again (a second or two each). Under fork and spawn it changes nothing.
    if "forkserver" in torch.multiprocessing.get_all_start_methods():  # not on Windows
        torch.multiprocessing.set_forkserver_preload(["torch"])

# %%
# A random crop that owns its generator
# -------------------------------------
# ``RandomCrops`` cuts a random 24 × 24 window out of each 32 × 32 image and returns the
# offsets it drew next to the crop, so that we can see them. As NumPy recommends, it
# draws from a :class:`numpy.random.Generator` object, held on the dataset. The images
# come from :class:`effpt.data.ImageFolder` (the previous pages show how such a dataset
# is built).
import tempfile
from pathlib import Path

import numpy as np
from torch.utils.data import DataLoader, Dataset

from effpt.data import ImageFolder, write_image_folder


class RandomCrops(Dataset):
    def __init__(self, images: Dataset, size: int, rng: np.random.Generator | None) -> None:
        self.images, self.size, self.rng = images, size, rng

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int):
        image, label = self.images[i]  # (3, height, width)
        high = [image.shape[-2] - self.size + 1, image.shape[-1] - self.size + 1]
        if self.rng is None:  # torch's generator (fix 2, below)
            top, left = (int(torch.randint(h, ())) for h in high)
        else:
            top, left = (int(self.rng.integers(h)) for h in high)
        crop = image[:, top : top + self.size, left : left + self.size]  # (3, size, size)
        return crop, label, torch.tensor([top, left])


if __name__ == "__main__":
    workdir = tempfile.TemporaryDirectory()
    write_image_folder(Path(workdir.name) / "shapes", 64, size=32, seed=0)
    images = ImageFolder(Path(workdir.name) / "shapes")
    crops = RandomCrops(images, 24, rng=np.random.default_rng(0))
    crop, label, offset = crops[0]
    print(f"{len(crops)} items; item 0: crop {tuple(crop.shape)}, offset {offset.tolist()}")

# %%
# Two workers, one stream of numbers
# ----------------------------------
# With ``num_workers=2`` a map-style loader deals batches to the workers in turn: batches
# 0, 2, 4, 6 come from worker 0 and batches 1, 3, 5, 7 from worker 1. Each worker holds a
# copy of ``crops``, generator state included (copied by *fork*, pickled by *spawn* and
# *forkserver*: the bug does not depend on the start method). We compare the draws index
# by index: the ``k``-th offset worker 0 drew against the ``k``-th offset worker 1 drew.
# The workers' start method comes from :func:`effpt.data.start_method`, the choice
# :doc:`plot_datasets_and_dataloader` makes on the page and explains.
from effpt.data import start_method

START = start_method()  # "fork" without a file to import (a notebook); else None, the default


def offsets_by_worker(dataset: Dataset, **loader_args) -> tuple[torch.Tensor, torch.Tensor]:
    loader = DataLoader(
        dataset, batch_size=8, num_workers=2, multiprocessing_context=START, **loader_args
    )
    batches = [offsets for _, _, offsets in loader]  # each (8, 2); batch k from worker k % 2
    return torch.cat(batches[0::2]), torch.cat(batches[1::2])  # (32, 2) each


def same_draws(a: torch.Tensor, b: torch.Tensor) -> int:
    return int((a == b).all(dim=1).sum())  # the k-th draws agree in both coordinates


if __name__ == "__main__":
    first, second = offsets_by_worker(crops)
    print("worker 0 drew:", first[:4].tolist(), "...")
    print("worker 1 drew:", second[:4].tolist(), "...")
    print(f"same draw at the same index: {same_draws(first, second)} of {len(first)}")
    again, _ = offsets_by_worker(crops)
    print("the next epoch repeats this one:", torch.equal(again, first))

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert same_draws(first, second) == len(first) == 32
    assert torch.equal(again, first)
# sphinx_gallery_end_ignore

# %%
# Every draw repeats across the workers, and every epoch repeats the last: the workers
# are started afresh each epoch from the same copy, so the generator never moves on. Half
# the "random" crops are duplicates and none change between epochs.
#
# NumPy's *global* generator is not affected
# ------------------------------------------
# The classic form of this bug calls ``np.random`` functions in ``__getitem__``. Since
# PyTorch 1.9 the DataLoader seeds NumPy's global generator differently in every worker
# (as it seeds torch's and Python's), so that form is fixed. The check:


class GlobalNumpyDraws(Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int):
        top, left = np.random.randint(9, size=2)  # noqa: NPY002  (the legacy global generator)
        return torch.zeros(()), 0, torch.tensor([top, left])


if __name__ == "__main__":
    global_first, global_second = offsets_by_worker(GlobalNumpyDraws())
    print(f"same draw at the same index: {same_draws(global_first, global_second)} of 32")

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert same_draws(global_first, global_second) <= 4
# sphinx_gallery_end_ignore

# %%
# A crop has 9 × 9 possible offsets, so two independent draws agree once in 81 times
# on average: a few matches out of 32 are chance, not a copy.
#
# Fix 1: reseed the dataset's generator in ``worker_init_fn``
# -----------------------------------------------------------
# The DataLoader calls ``worker_init_fn`` in each worker once it has started, with the
# worker's copy of the dataset in :func:`~torch.utils.data.get_worker_info`. There,
# :func:`torch.initial_seed` returns the loader's base seed plus the worker's id:
# different in every worker, and drawn anew each epoch for workers started each epoch
# (the default). Replace the copied generator with one seeded from it:
from torch.utils.data import get_worker_info


def seed_worker(worker_id: int) -> None:
    dataset = get_worker_info().dataset  # this worker's copy
    dataset.rng = np.random.default_rng(torch.initial_seed())


if __name__ == "__main__":
    fixed_first, fixed_second = offsets_by_worker(crops, worker_init_fn=seed_worker)
    print(f"same draw at the same index: {same_draws(fixed_first, fixed_second)} of 32")
    fixed_again, _ = offsets_by_worker(crops, worker_init_fn=seed_worker)
    print("the next epoch repeats this one:", torch.equal(fixed_again, fixed_first))

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert same_draws(fixed_first, fixed_second) <= 4
    assert not torch.equal(fixed_again, fixed_first)
# sphinx_gallery_end_ignore

# %%
# :func:`effpt.data.seed_worker` does the same for any dataset whose ``rng`` attribute
# is a NumPy Generator, and does nothing outside a worker.
#
# Fix 2: draw from torch's generator
# ----------------------------------
# The DataLoader already seeds torch's global generator in each worker with that same
# ``initial_seed``. A dataset that draws with torch (``rng=None`` here uses
# :func:`torch.randint`) needs no ``worker_init_fn`` at all.
if __name__ == "__main__":
    torch_crops = RandomCrops(images, 24, rng=None)
    torch_first, torch_second = offsets_by_worker(torch_crops)
    print(f"same draw at the same index: {same_draws(torch_first, torch_second)} of 32")

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert same_draws(torch_first, torch_second) <= 4
# sphinx_gallery_end_ignore

# %%
# The figure plots what the counts above count: each dot is one index ``k``, at the
# offset worker 0 drew for its ``k``-th item (across) and the one worker 1 drew for its
# ``k``-th item (up), each offset numbered ``9 × top + left``. A dot on the diagonal is
# the same draw. With the copied generator every dot sits on it; after the fix the dots
# scatter, and only chance puts one there.
if __name__ == "__main__":
    import matplotlib.pyplot as plt  # under the guard: a spawned worker need not import it

    def code(offsets: torch.Tensor) -> torch.Tensor:  # (n, 2) -> (n,): 9 × top + left
        return 9 * offsets[:, 0] + offsets[:, 1]

    fig, axes = plt.subplots(1, 3, figsize=(9, 3.8), layout="constrained", sharey=True)
    for ax, (a, b), title in (
        (axes[0], (first, second), "generator copied\ninto each worker"),
        (axes[1], (fixed_first, fixed_second), "reseeded in\nworker_init_fn"),
        (axes[2], (torch_first, torch_second), "drawn from\ntorch's generator"),
    ):
        ax.plot([0, 80], [0, 80], color="0.8", lw=1, zorder=0)  # the same draw
        ax.scatter(code(a), code(b), s=25, color="C0")
        same = same_draws(a, b)
        ax.set_title(f"{title}\n{same} of 32 the same", fontsize=10)
        ax.set(xlim=(-4, 84), ylim=(-4, 84))
        ax.set(xlabel="worker 0, k-th draw", xticks=[0, 40, 80], yticks=[0, 40, 80])
    axes[0].set_ylabel("worker 1, k-th draw")
    fig.suptitle("Crop offsets (9 × top + left) drawn for the same index k by two workers")
    plt.show()

# %%
# Repeatable runs: a seeded generator on the DataLoader
# -----------------------------------------------------
# Different is not the same as repeatable. Each epoch the loader draws its base seed, and
# with ``shuffle=True`` the order, from ``generator``; without one it uses torch's global
# generator, whose state depends on everything the program drew before: the two epochs
# of fix 1 above, one after the other in the same program, differed (the line below
# prints that result again). Give the loader its own seeded
# :class:`torch.Generator` and two runs deliver the same items with the same crops,
# whatever ran before them. (The seeds also depend on the worker count: keep
# ``num_workers`` the same too.)


def one_run(generator: torch.Generator | None) -> torch.Tensor:
    loader = DataLoader(
        crops,
        batch_size=8,
        shuffle=True,
        num_workers=1,  # one worker shows it as well as two, and starts one process, not two
        multiprocessing_context=START,
        worker_init_fn=seed_worker,
        generator=generator,
    )
    return torch.cat(
        [torch.cat([labels[:, None], offsets], dim=1) for _, labels, offsets in loader]
    )  # (64, 3): label, top, left


if __name__ == "__main__":
    unseeded = fixed_first, fixed_again  # fix 1's two epochs: no generator, seed_worker
    seeded = one_run(torch.Generator().manual_seed(7)), one_run(torch.Generator().manual_seed(7))
    print("without a generator, fix 1's two epochs agree:", torch.equal(*unseeded))
    print("with generator seeded 7, two runs agree:", torch.equal(*seeded))
    workdir.cleanup()

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert not torch.equal(*unseeded)
    assert torch.equal(*seeded)
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Each worker works on a copy of the dataset: a random generator stored on it is copied
#   with its state, and every worker draws the same numbers, epoch after epoch.
# - NumPy's global generator, Python's and torch's are seeded per worker by the
#   DataLoader; a generator object held on the dataset is not.
# - Reseed that object per worker from :func:`torch.initial_seed` in a
#   ``worker_init_fn``, or draw from torch's generator.
# - For a repeatable run, pass a seeded ``generator`` to the DataLoader and keep
#   ``num_workers`` fixed.
