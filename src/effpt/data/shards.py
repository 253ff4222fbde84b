"""Stream tar shards through DataLoader workers: every item once per epoch, damage reported.

:class:`ShardStream` is the hardened version of the ``IterableDataset`` that the page
"Stream tar shards so that every item arrives exactly once" builds. On top of the split
by :func:`torch.utils.data.get_worker_info` it adds an end-of-archive check
(:func:`~effpt.data.iter_members`), errors that name the shard and member, skipped
items counted where the loop that consumes the loader can read them
(:meth:`ShardStream.skipped`), and a per-epoch shuffle (:meth:`ShardStream.set_epoch`)
from seeds that cannot collide (:func:`~effpt.data.worker_rng`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import NamedTuple

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from effpt._validate import check_int
from effpt.data.errors import CorruptItemError, SkippedItemsWarning, apply_transform
from effpt.data.images import SHAPES, Transform, decode_image
from effpt.data.randomness import worker_rng
from effpt.data.tars import iter_members


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


class SkippedItem(NamedTuple):
    """One thing a :class:`ShardStream` with ``skip_bad=True`` skipped.

    ``member`` is the member skipped, or None when the rest of ``shard`` was lost (a
    shard cut short or damaged: ``message`` names the last member read before it).
    ``position`` is the member's place among the shard's files (0 for the first), so
    that members sharing a name are told apart; None with ``member``.
    """

    epoch: int
    worker: int
    shard: str
    member: str | None
    message: str
    position: int | None = None


class ShardStream(IterableDataset):
    """Iterable dataset over tar shards that delivers every item exactly once per epoch.

    Items are ``(image, label, key)``: a ``uint8`` tensor (3, height, width), the index of
    the member's folder in ``classes``, and the key ``"<class>/<file stem>"``. Each
    DataLoader worker reads its part of the shards, by :func:`shard_plan`.

    **Shuffling.** ``shuffle=True`` permutes the shard order (the same permutation in
    every worker) and mixes items through a buffer of ``buffer_size`` per worker. The
    order depends on ``seed``, the epoch and the number of workers; call
    :meth:`set_epoch` before each epoch for a new order (as with
    :class:`~torch.utils.data.distributed.DistributedSampler`), also with
    ``persistent_workers=True``.

    **Damage.** A member that is not an image (or in no class folder, or over Pillow's
    size limit) and a shard that is cut short or damaged raise
    :class:`~effpt.data.CorruptItemError` naming the shard and member. With
    ``skip_bad=True`` they are skipped instead (a damaged shard loses the rest of it) and
    recorded: :meth:`skipped` lists them in the main process, whichever worker skipped
    them, and each worker that skipped something ends its part of the epoch with a
    :class:`~effpt.data.SkippedItemsWarning` (shown in the worker's output). An
    exception from ``transform`` is raised as a
    :class:`~effpt.data.TransformError` and never skipped.

    Examples
    --------
    >>> import tempfile
    >>> from effpt.data import write_image_folder, write_tar_shards
    >>> images = write_image_folder(tempfile.mkdtemp(), 5, size=16)
    >>> stream = ShardStream(write_tar_shards(images, tempfile.mkdtemp(), [3, 2]))
    >>> [key for _, _, key in stream] == [f"{p.parent.name}/{p.stem}" for p in images]
    True
    >>> stream.skipped()
    []
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
        seen: dict[tuple[int, int], int] = {}  # (device, inode): the same file, however named
        for k, shard in enumerate(self.shards):
            if Path(shard).is_dir():
                msg = f"shard '{shard}' is a directory, not a tar file"
                raise IsADirectoryError(msg)
            if not Path(shard).exists():
                msg = f"shard '{shard}' does not exist"
                raise FileNotFoundError(msg)
            if not Path(shard).is_file():  # a FIFO, a device such as /dev/null, a socket
                kind = _file_kind(Path(shard).stat().st_mode)
                msg = f"shard '{shard}' is {kind}, not a regular tar file"
                raise ValueError(msg)
            stat = Path(shard).stat()
            first = self.shards[seen.setdefault((stat.st_dev, stat.st_ino), k)]
            if seen[stat.st_dev, stat.st_ino] != k:
                also = "" if first == shard else f" (as '{first}' and as '{shard}')"
                msg = f"shard '{shard}' is listed twice{also}: its items would arrive twice"
                raise ValueError(msg)
        self.classes = tuple(classes)
        if not self.classes or len(set(self.classes)) != len(self.classes):
            msg = f"classes must be distinct folder names, got {self.classes}"
            raise ValueError(msg)
        if transform is not None and not callable(transform):
            msg = f"transform must be callable or None, got {type(transform).__name__}"
            raise TypeError(msg)
        self.transform = transform
        self.shuffle, self.skip_bad = bool(shuffle), bool(skip_bad)
        self.seed = check_int("seed", seed, 0)
        self.buffer_size = check_int("buffer_size", buffer_size, 1)
        # Shared memory, so that set_epoch reaches workers that persist across epochs
        # (a plain int would stay as it was when they started).
        self._epoch = torch.zeros((), dtype=torch.int64).share_memory_()
        # Workers append what they skip to files here; the main process reads them.
        self._log_dir = tempfile.mkdtemp(prefix="effpt-skipped-")
        weakref.finalize(self, _remove_in, os.getpid(), self._log_dir)

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch that the next pass (in this process and in every worker) shuffles for."""
        self._epoch.fill_(check_int("epoch", epoch, 0))

    @property
    def epoch(self) -> int:
        """The epoch set by :meth:`set_epoch` (0 until it is called)."""
        return int(self._epoch)

    def skipped(self, epoch: int | None = None) -> list[SkippedItem]:
        """What workers and the main process skipped so far, or in ``epoch``, in order.

        Each bad member and each damaged shard is listed once per epoch (members that
        share a name count apart, by position; a damaged shard shared by several
        workers, or an epoch read twice, does not add entries).
        """
        records = []
        for path in sorted(Path(self._log_dir).glob("*.jsonl")):
            for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
                if line.endswith("\n"):  # a line still being written is left for later
                    records.append(SkippedItem(**json.loads(line)))
        seen, unique = set(), []
        for record in sorted(records, key=lambda r: (r.epoch, r.worker)):  # stable
            key = (record.epoch, record.shard, record.member, record.position)
            if key not in seen:
                seen.add(key)
                unique.append(record)
        return [r for r in unique if epoch is None or r.epoch == epoch]

    def __iter__(self) -> Iterator[tuple[torch.Tensor, int, str]]:
        info = get_worker_info()  # None in the main process (num_workers=0)
        worker_id, num_workers = (0, 1) if info is None else (info.id, info.num_workers)
        return self.iter_worker(worker_id, num_workers)

    def iter_worker(
        self, worker_id: int, num_workers: int
    ) -> Iterator[tuple[torch.Tensor, int, str]]:
        """The items that worker ``worker_id`` of ``num_workers`` delivers, in order."""
        epoch = self.epoch
        order = np.arange(len(self.shards))
        if self.shuffle:  # the same shard order in every worker of this epoch
            order = worker_rng(self.seed, epoch).permutation(order)
        skipped = 0
        items = (
            item
            for shard, stride, offset in shard_plan(len(order), worker_id, num_workers)
            for item in self._read(self.shards[order[shard]], stride, offset, epoch, worker_id)
        )
        if self.shuffle:
            items = _buffer_shuffle(
                items, self.buffer_size, worker_rng(self.seed, epoch, worker_id)
            )
        first: SkippedItem | None = None
        for item in items:
            if isinstance(item, SkippedItem):
                first, skipped = first or item, skipped + 1
                continue
            yield item
        if skipped:
            msg = (
                f"worker {worker_id} of {num_workers} skipped {skipped} bad item(s) in epoch "
                f"{epoch}; first: {first.message}. ShardStream.skipped() lists them."
            )
            warnings.warn(msg, SkippedItemsWarning, stacklevel=1)

    def _read(
        self, shard: str, stride: int, offset: int, epoch: int, worker: int
    ) -> Iterator[tuple[torch.Tensor, int, str] | SkippedItem]:
        members = iter_members(shard, stride, offset)
        for position in range(offset, 2**63, stride):  # the positions iter_members yields
            try:
                name, data = next(members)
            except StopIteration:
                return
            except CorruptItemError as exc:  # the rest of the shard is lost
                yield self._skip(exc, epoch, worker, shard, None)
                return
            try:
                image, label, key = self._decode(shard, name, data)
            except CorruptItemError as exc:
                yield self._skip(exc, epoch, worker, shard, name, position)
                continue
            if self.transform is not None:  # outside the try: its errors are its own
                where = f"shard '{shard}', member '{name}'"
                image = apply_transform(self.transform, image, where)
            yield image, label, key

    def _decode(self, shard: str, name: str, data: bytes | None) -> tuple[torch.Tensor, int, str]:
        where = f"shard '{shard}', member '{name}'"
        if data is None:
            msg = f"{where}: not a regular file (a link or a device)"
            raise CorruptItemError(msg)
        member = PurePosixPath(name)
        label_name = member.parent.name
        if label_name not in self.classes:
            msg = f"{where}: folder {label_name!r} is not a class {self.classes}"
            raise CorruptItemError(msg)
        image = decode_image(data, where=where)
        return image, self.classes.index(label_name), f"{label_name}/{member.stem}"

    def _skip(
        self,
        exc: CorruptItemError,
        epoch: int,
        worker: int,
        shard: str,
        member: str | None,
        position: int | None = None,
    ) -> SkippedItem:
        if not self.skip_bad:
            raise exc
        record = SkippedItem(epoch, worker, shard, member, str(exc), position)
        log = Path(self._log_dir) / f"pid-{os.getpid()}.jsonl"
        with log.open("a", encoding="utf-8") as file:  # one write per line: whole lines
            file.write(json.dumps(record._asdict()) + "\n")
        return record


def _file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    import stat  # noqa: PLC0415  (only needed for this message)

    kinds = (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _remove_in(pid: int, path: str) -> None:
    """Remove ``path`` if this is process ``pid`` (a forked worker's copy must not)."""
    if os.getpid() == pid:
        shutil.rmtree(path, ignore_errors=True)


def _buffer_shuffle(items: Iterator, size: int, rng: np.random.Generator) -> Iterator:
    """Yield ``items`` in an order mixed through a buffer of ``size`` (memory stays bounded).

    Skip records pass straight through, so the warning counts them as they come.
    """
    buffer = []
    for item in items:
        if isinstance(item, SkippedItem):
            yield item
            continue
        buffer.append(item)
        if len(buffer) >= size:
            yield buffer.pop(int(rng.integers(len(buffer))))
    for k in rng.permutation(len(buffer)):
        yield buffer[k]
