"""Where random augmentations and shuffles get their randomness inside DataLoader workers."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info

from effpt._validate import check_int


def worker_rng(seed: int, epoch: int, worker: int | None = None) -> np.random.Generator:
    """A NumPy Generator for ``(seed, epoch)``, or for one ``worker`` within it.

    The streams come from :class:`numpy.random.SeedSequence` with the seed as entropy and
    ``(epoch,)`` or ``(epoch, worker)`` as spawn key, so different triples give
    independent streams. Adding the worker id to the seed, a common shortcut, gives
    seed 0 / worker 1 the same stream as seed 1 / worker 0. (:func:`seed_worker` takes
    that shortcut on purpose: the DataLoader's base seed is a fresh random 64-bit number,
    so two loaders' seeds never sit one apart in practice.)

    Examples
    --------
    >>> a = worker_rng(0, epoch=0, worker=1).integers(1000, size=3)
    >>> b = worker_rng(1, epoch=0, worker=0).integers(1000, size=3)
    >>> bool((a == b).all())
    False
    >>> bool((worker_rng(5, 2).random(2) == worker_rng(5, 2).random(2)).all())
    True
    """
    check_int("seed", seed, 0)
    check_int("epoch", epoch, 0)
    key = (epoch,) if worker is None else (epoch, check_int("worker", worker, 0))
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


class RandomCrops(Dataset):
    """Random ``size`` × ``size`` crops of the images of a map-style ``base`` dataset.

    Items are ``(crop, label, offset)`` with ``offset`` the tensor ``[top, left]``. The
    offsets come from ``rng``, a NumPy Generator this dataset owns (every worker gets
    a copy of it, state included), or, when ``rng`` is None, from torch's generator,
    which the DataLoader seeds differently in every worker. An image smaller than the
    crop raises a ValueError that names the item and both sizes.

    Examples
    --------
    >>> base = [(torch.zeros(3, 8, 8, dtype=torch.uint8), 1)]
    >>> crop, label, offset = RandomCrops(base, 5, rng=np.random.default_rng(0))[0]
    >>> crop.shape, label, bool(((0 <= offset) & (offset <= 3)).all())
    (torch.Size([3, 5, 5]), 1, True)
    >>> RandomCrops(base, 9)[0]
    Traceback (most recent call last):
    ...
    ValueError: crop size 9 does not fit item 0's image of 8 × 8 pixels (height × width)
    """

    def __init__(self, base: Dataset, size: int, *, rng: np.random.Generator | None = None) -> None:
        if rng is not None and not isinstance(rng, np.random.Generator):
            msg = f"rng must be a numpy.random.Generator or None, got {type(rng).__name__}"
            raise TypeError(msg)
        self.base, self.size, self.rng = base, check_int("size", size, 1), rng

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int, torch.Tensor]:
        image, label = self.base[index]
        height, width = image.shape[-2:]
        if self.size > min(height, width):
            msg = (
                f"crop size {self.size} does not fit item {index}'s image of "
                f"{height} × {width} pixels (height × width)"
            )
            raise ValueError(msg)
        high = [height - self.size + 1, width - self.size + 1]
        if self.rng is None:
            top, left = (int(torch.randint(h, ())) for h in high)
        else:
            top, left = (int(self.rng.integers(h)) for h in high)
        crop = image[..., top : top + self.size, left : left + self.size]
        return crop, label, torch.tensor([top, left])


def seed_worker(worker_id: int) -> None:  # noqa: ARG001  (DataLoader's worker_init_fn signature)
    """A ``worker_init_fn`` that reseeds the NumPy Generator a worker's dataset holds as ``rng``.

    The DataLoader seeds torch, :mod:`random` and NumPy's global generator differently in
    every worker (NumPy's since torch 1.9), but a :class:`numpy.random.Generator` object
    held on the dataset reaches each worker as a copy, state included. This replaces it
    with one seeded from :func:`torch.initial_seed`: the loader's base seed plus the
    worker id, different in every worker, and reproducible when the DataLoader has a
    seeded ``generator``. Workers that restart every epoch get a new seed each epoch; with
    ``persistent_workers=True`` this runs once, and the stream simply continues. Outside
    a worker it does nothing.

    Examples
    --------
    >>> seed_worker(0) is None  # in the main process there is no worker copy to reseed
    True
    """
    info = get_worker_info()
    if info is not None and isinstance(getattr(info.dataset, "rng", None), np.random.Generator):
        info.dataset.rng = np.random.default_rng(torch.initial_seed())
