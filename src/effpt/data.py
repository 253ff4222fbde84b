"""Datasets that DataLoader workers can import, and writers for the files they read.

Under the ``spawn`` and ``forkserver`` start methods every DataLoader worker unpickles
its own copy of the dataset, so the dataset's class must live in an importable module:
a class defined in a gallery page, a notebook or a script's ``__main__`` cannot be
found by the worker. This module holds the ones the data pages use.

* :func:`write_image_folder` draws small labelled PNG images (one folder per class) and
  :func:`write_tar_shards` packs the same files into tar shards.
* :class:`ImageFolder` is a map-style dataset with one file per item; :class:`ShardStream`
  reads tar shards sequentially and delivers every item exactly once for any number of
  shards and workers (the rule is :func:`shard_plan`); :class:`NaiveShardStream` is the
  version that does not, kept to show the bug.
* :class:`RandomCrops` and :func:`seed_worker` show where random augmentations get their
  randomness inside workers.

A file that cannot be read raises :class:`CorruptItemError` naming the file (and the tar
member). Pillow decodes the images; it is imported only when an image is read or written.
"""

from __future__ import annotations

import io
import random
import tarfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from effpt._validate import check_int

__all__ = [
    "SHAPES",
    "CorruptItemError",
    "ImageFolder",
    "NaiveShardStream",
    "RandomCrops",
    "ShardStream",
    "SkippedItemsWarning",
    "decode_image",
    "seed_worker",
    "shard_plan",
    "write_image_folder",
    "write_tar_shards",
]

#: The classes :func:`write_image_folder` draws, in label order (sorted, as folders sort).
SHAPES = ("circle", "cross", "square", "triangle")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")
Transform = Callable[[torch.Tensor], torch.Tensor]


class CorruptItemError(ValueError):
    """An item could not be read; the message names the file and, in a shard, the member."""


class SkippedItemsWarning(UserWarning):
    """A :class:`ShardStream` with ``skip_bad=True`` skipped items; the message counts them."""


def _draw_shape(shape: str, size: int, rng: np.random.Generator):  # returns a PIL image
    from PIL import Image, ImageDraw  # noqa: PLC0415  (Pillow is optional for `import effpt`)

    image = Image.fromarray(rng.integers(0, 70, size=(size, size, 3), dtype=np.uint8))
    draw = ImageDraw.Draw(image)
    r = rng.uniform(0.2, 0.4) * size
    cx, cy = rng.uniform(r, size - r, size=2)
    color = tuple(int(c) for c in rng.integers(110, 256, size=3))
    if shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=color)
    elif shape == "square":
        draw.rectangle((cx - r, cy - r, cx + r, cy + r), fill=color)
    elif shape == "triangle":
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=color)
    else:
        w = max(1.0, r / 3)
        draw.rectangle((cx - r, cy - w, cx + r, cy + w), fill=color)
        draw.rectangle((cx - w, cy - r, cx + w, cy + r), fill=color)
    return image


def write_image_folder(
    root: str | Path, n_images: int, *, size: int = 32, seed: int = 0
) -> list[Path]:
    """Write ``n_images`` PNG images of random shapes as ``root/<shape>/<index>.png``.

    Each image shows one of :data:`SHAPES` (its label, drawn at random) in a random
    colour, size and place on a noisy background. Returns the paths in index order.

    Examples
    --------
    >>> import tempfile
    >>> paths = write_image_folder(tempfile.mkdtemp(), 5, size=16)
    >>> len(paths), paths[0].parent.name in SHAPES, paths[0].name
    (5, True, '00000.png')
    >>> write_image_folder(tempfile.mkdtemp(), 0)
    Traceback (most recent call last):
    ...
    ValueError: n_images must be >= 1, got 0
    """
    check_int("n_images", n_images, 1)
    check_int("size", size, 8)
    rng = np.random.default_rng(seed)
    paths = []
    for index in range(n_images):
        shape = SHAPES[int(rng.integers(len(SHAPES)))]
        path = Path(root) / shape / f"{index:05d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        _draw_shape(shape, size, rng).save(path)
        paths.append(path)
    return paths


def write_tar_shards(
    paths: Sequence[str | Path], out_dir: str | Path, shards: int | Sequence[int]
) -> list[Path]:
    """Pack image files into tar shards named ``shard-000.tar``, ``shard-001.tar``, ...

    Each file becomes the member ``<class folder>/<file name>``, in the order given, in
    the POSIX ustar format without owner or time stamps (the same files give the same
    bytes).
    ``shards`` is the number of shards (sizes as equal as possible) or the list of
    their sizes, which must add up to ``len(paths)``.

    Examples
    --------
    >>> import tempfile
    >>> images = write_image_folder(tempfile.mkdtemp(), 5, size=16)
    >>> [p.name for p in write_tar_shards(images, tempfile.mkdtemp(), [3, 2])]
    ['shard-000.tar', 'shard-001.tar']
    >>> write_tar_shards(images, tempfile.mkdtemp(), [3, 3])
    Traceback (most recent call last):
    ...
    ValueError: shard sizes [3, 3] add up to 6, but 5 paths were given
    """
    paths = [Path(p) for p in paths]
    if isinstance(shards, int) and not isinstance(shards, bool):
        check_int("shards", shards, 1)
        sizes = [len(part) for part in np.array_split(np.arange(len(paths)), shards)]
    else:
        sizes = [check_int("shard size", s, 1) for s in shards]
        if sum(sizes) != len(paths):
            msg = f"shard sizes {sizes} add up to {sum(sizes)}, but {len(paths)} paths were given"
            raise ValueError(msg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written, start = [], 0
    for k, n in enumerate(sizes):
        shard = out / f"shard-{k:03d}.tar"
        with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as tar:
            for path in paths[start : start + n]:
                tar.add(path, arcname=f"{path.parent.name}/{path.name}", filter=_anonymous)
        written.append(shard)
        start += n
    return written


def _anonymous(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """Drop owner and time from a member, so equal files make byte-identical shards."""
    member.uid = member.gid = member.mtime = 0
    member.uname = member.gname = ""
    return member


def decode_image(data: bytes, where: str = "<bytes>") -> torch.Tensor:
    """Decode image bytes into a ``uint8`` tensor of shape (3, height, width).

    ``where`` names the source in the error raised for bytes that are not an image.

    Examples
    --------
    >>> decode_image(b"not a png", where="notes.txt")
    Traceback (most recent call last):
    ...
    effpt.data.CorruptItemError: notes.txt: not a readable image (cannot identify image file ...)
    """
    from PIL import Image  # noqa: PLC0415  (Pillow is optional for `import effpt`)

    try:
        with Image.open(io.BytesIO(data)) as image:
            pixels = np.array(image.convert("RGB"))  # (height, width, 3), a writable copy
    except (OSError, ValueError, SyntaxError) as exc:  # what Pillow raises for bad bytes
        msg = f"{where}: not a readable image ({exc})"
        raise CorruptItemError(msg) from exc
    return torch.from_numpy(pixels).permute(2, 0, 1).contiguous()  # (3, height, width)


class ImageFolder(Dataset):
    """Map-style dataset over ``root/<class>/<image>``: one file per item.

    Items are ``(image, label)``: a ``uint8`` tensor (3, height, width) and the index
    of its folder in ``classes`` (the folder names, sorted). ``transform``, if given,
    maps the image tensor; it must be importable too (a module-level function).

    Examples
    --------
    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> _ = write_image_folder(root, 6, size=16)
    >>> dataset = ImageFolder(root)
    >>> image, label = dataset[0]
    >>> len(dataset), image.shape, image.dtype, 0 <= label < len(dataset.classes)
    (6, torch.Size([3, 16, 16]), torch.uint8, True)
    >>> ImageFolder(root + "/missing")
    Traceback (most recent call last):
    ...
    FileNotFoundError: image folder '.../missing' does not exist
    """

    def __init__(self, root: str | Path, transform: Transform | None = None) -> None:
        root = Path(root)
        if not root.is_dir():
            msg = f"image folder '{root}' does not exist"
            raise FileNotFoundError(msg)
        self.classes = sorted(p.name for p in root.iterdir() if p.is_dir())
        self.samples = [
            (str(path), label)
            for label, name in enumerate(self.classes)
            for path in sorted((root / name).iterdir())
            if path.suffix.lower() in IMAGE_SUFFIXES
        ]
        if not self.samples:
            msg = f"image folder '{root}' holds no images laid out as <root>/<class>/<image>"
            raise ValueError(msg)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        image = decode_image(Path(path).read_bytes(), where=path)
        return (image if self.transform is None else self.transform(image)), label


def shard_plan(num_shards: int, worker_id: int, num_workers: int) -> list[tuple[int, int, int]]:
    """What worker ``worker_id`` of ``num_workers`` reads: ``(shard, stride, offset)`` triples.

    The worker reads the items of ``shard`` at positions ``offset``, ``offset + stride``, ...
    With at least as many shards as workers, shards are dealt round-robin (stride 1).
    With more workers than shards, the workers that share a shard take every
    ``stride``-th item of it. Either way each item goes to exactly one worker.

    Examples
    --------
    >>> shard_plan(5, worker_id=1, num_workers=2)
    [(1, 1, 0), (3, 1, 0)]
    >>> [shard_plan(2, w, 5) for w in range(5)]  # shard 0: workers 0, 2, 4; shard 1: 1, 3
    [[(0, 3, 0)], [(1, 2, 0)], [(0, 3, 1)], [(1, 2, 1)], [(0, 3, 2)]]
    """
    check_int("num_shards", num_shards, 1)
    check_int("num_workers", num_workers, 1)
    check_int("worker_id", worker_id, 0)
    if worker_id >= num_workers:
        msg = f"worker_id must be < num_workers={num_workers}, got {worker_id}"
        raise ValueError(msg)
    if num_workers <= num_shards:
        return [(shard, 1, 0) for shard in range(worker_id, num_shards, num_workers)]
    shard = worker_id % num_shards
    stride = len(range(shard, num_workers, num_shards))  # workers that share this shard
    return [(shard, stride, worker_id // num_shards)]


class ShardStream(IterableDataset):
    """Iterable dataset over tar shards that delivers every item exactly once.

    Items are ``(image, label, key)``: a ``uint8`` tensor (3, height, width), the index of
    the member's folder in ``classes``, and the key ``"<class>/<file stem>"``. Each
    DataLoader worker reads its part of the shards, by :func:`shard_plan`.

    ``shuffle`` permutes the shard order (the same permutation in every worker) and mixes
    items through a buffer of ``buffer_size``; the order depends only on ``seed`` and the
    number of workers. A damaged shard or member raises :class:`CorruptItemError`; with
    ``skip_bad=True`` it is skipped instead (a truncated shard loses its tail), and each
    pass ends with a :class:`SkippedItemsWarning` that counts what was skipped.

    Examples
    --------
    >>> import tempfile
    >>> images = write_image_folder(tempfile.mkdtemp(), 5, size=16)
    >>> stream = ShardStream(write_tar_shards(images, tempfile.mkdtemp(), [3, 2]))
    >>> [key for _, _, key in stream] == [f"{p.parent.name}/{p.stem}" for p in images]
    True
    >>> ShardStream([])
    Traceback (most recent call last):
    ...
    ValueError: shards must list at least one tar file, got an empty list
    """

    def __init__(
        self,
        shards: Sequence[str | Path],
        *,
        classes: Sequence[str] = SHAPES,
        transform: Transform | None = None,
        shuffle: bool = False,
        seed: int = 0,
        buffer_size: int = 64,
        skip_bad: bool = False,
    ) -> None:
        if isinstance(shards, (str, Path)):
            msg = f"shards must be a list of tar files, got the single path {str(shards)!r}"
            raise TypeError(msg)
        self.shards = [str(s) for s in shards]
        if not self.shards:
            msg = "shards must list at least one tar file, got an empty list"
            raise ValueError(msg)
        for shard in self.shards:
            if not Path(shard).is_file():
                msg = f"shard '{shard}' does not exist"
                raise FileNotFoundError(msg)
        self.classes = tuple(classes)
        self.transform = transform
        self.shuffle, self.seed = shuffle, seed
        self.buffer_size = check_int("buffer_size", buffer_size, 1)
        self.skip_bad = skip_bad

    def __iter__(self) -> Iterator[tuple[torch.Tensor, int, str]]:
        info = get_worker_info()  # None in the main process (num_workers=0)
        worker_id, num_workers = (0, 1) if info is None else (info.id, info.num_workers)
        return self.iter_worker(worker_id, num_workers)

    def iter_worker(
        self, worker_id: int, num_workers: int
    ) -> Iterator[tuple[torch.Tensor, int, str]]:
        """The items that worker ``worker_id`` of ``num_workers`` delivers, in order."""
        order = list(range(len(self.shards)))
        if self.shuffle:
            random.Random(self.seed).shuffle(order)  # same shard order in every worker
        bad: list[str] = []
        items = (
            item
            for shard, stride, offset in shard_plan(len(order), worker_id, num_workers)
            for item in self._read(self.shards[order[shard]], stride, offset, bad)
        )
        if self.shuffle:
            items = _buffer_shuffle(items, self.buffer_size, random.Random(self.seed + worker_id))
        yield from items
        if bad:
            msg = (
                f"worker {worker_id} of {num_workers} skipped {len(bad)} bad item(s); "
                f"first: {bad[0]}"
            )
            warnings.warn(msg, SkippedItemsWarning, stacklevel=2)

    def _read(
        self, shard: str, stride: int, offset: int, bad: list[str]
    ) -> Iterator[tuple[torch.Tensor, int, str]]:
        position, member_name = 0, None
        try:
            with tarfile.open(shard, mode="r|") as tar:  # sequential: no seeking
                for member in tar:
                    if not member.isfile():
                        continue
                    member_name, mine = member.name, position % stride == offset
                    position += 1
                    if not mine:
                        continue
                    data = tar.extractfile(member).read()
                    try:
                        yield self._item(shard, member_name, data)
                    except CorruptItemError as exc:
                        if not self.skip_bad:
                            raise
                        bad.append(str(exc))
        except (tarfile.TarError, EOFError, OSError) as exc:
            where = "at its start" if member_name is None else f"at member '{member_name}'"
            msg = f"shard '{shard}' is truncated or damaged {where} ({exc})"
            if not self.skip_bad:
                raise CorruptItemError(msg) from exc
            bad.append(msg)

    def _item(self, shard: str, name: str, data: bytes) -> tuple[torch.Tensor, int, str]:
        member = PurePosixPath(name)
        label_name = member.parent.name
        if label_name not in self.classes:
            msg = f"shard '{shard}', member '{name}': folder {label_name!r} is not a class {self.classes}"
            raise CorruptItemError(msg)
        image = decode_image(data, where=f"shard '{shard}', member '{name}'")
        if self.transform is not None:
            image = self.transform(image)
        return image, self.classes.index(label_name), f"{label_name}/{member.stem}"


def _buffer_shuffle(items: Iterator, size: int, rng: random.Random) -> Iterator:
    """Yield ``items`` in an order mixed through a buffer of ``size`` (memory stays bounded)."""
    buffer = []
    for item in items:
        buffer.append(item)
        if len(buffer) >= size:
            yield buffer.pop(rng.randrange(len(buffer)))
    rng.shuffle(buffer)
    yield from buffer


class NaiveShardStream(ShardStream):
    """A :class:`ShardStream` in which every worker reads every shard: each item arrives
    once per worker. It is the bug, kept to show it; do not use it."""

    def iter_worker(
        self,
        worker_id: int,  # noqa: ARG002  (ignored: that is the bug)
        num_workers: int,  # noqa: ARG002
    ) -> Iterator[tuple[torch.Tensor, int, str]]:
        """Every shard, whatever the worker: the items that each worker delivers."""
        for shard in self.shards:
            yield from self._read(shard, 1, 0, [])


class RandomCrops(Dataset):
    """Random ``size`` × ``size`` crops of the images of a map-style ``base`` dataset.

    Items are ``(crop, label, offset)`` with ``offset`` the tensor ``[top, left]``. The
    offsets come from ``rng``, a NumPy Generator this dataset owns (every worker gets
    a copy of it, state included), or, when ``rng`` is None, from torch's generator,
    which the DataLoader seeds differently in every worker.

    Examples
    --------
    >>> base = [(torch.zeros(3, 8, 8, dtype=torch.uint8), 1)]
    >>> crop, label, offset = RandomCrops(base, 5, rng=np.random.default_rng(0))[0]
    >>> crop.shape, label, bool(((0 <= offset) & (offset <= 3)).all())
    (torch.Size([3, 5, 5]), 1, True)
    """

    def __init__(self, base: Dataset, size: int, *, rng: np.random.Generator | None = None) -> None:
        self.base, self.size, self.rng = base, check_int("size", size, 1), rng

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int, torch.Tensor]:
        image, label = self.base[index]
        high = [image.shape[-2] - self.size + 1, image.shape[-1] - self.size + 1]
        if self.rng is None:
            top, left = (int(torch.randint(h, ())) for h in high)
        else:
            top, left = (int(self.rng.integers(h)) for h in high)
        crop = image[..., top : top + self.size, left : left + self.size]
        return crop, label, torch.tensor([top, left])


def seed_worker(worker_id: int) -> None:  # noqa: ARG001  (DataLoader's worker_init_fn signature)
    """A ``worker_init_fn`` that gives every worker its own NumPy and Python random streams.

    In a worker, :func:`torch.initial_seed` is the loader's base seed plus the worker id:
    different in every worker, and reproducible when the DataLoader has a seeded
    ``generator``. This seeds :mod:`random` and NumPy's global generator from it, and
    replaces a NumPy Generator the worker's dataset holds as ``rng``.

    Examples
    --------
    >>> seed_worker(0)  # outside a worker it seeds the global generators only
    >>> first = np.random.rand()
    >>> seed_worker(0)
    >>> np.random.rand() == first
    True
    """
    seed = torch.initial_seed()
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002  (the legacy global generator, on purpose)
    info = get_worker_info()
    if info is not None and isinstance(getattr(info.dataset, "rng", None), np.random.Generator):
        info.dataset.rng = np.random.default_rng(seed)
