"""Datasets that DataLoader workers can import, and writers for the files they read.

The data pages build each technique on the page; these are the hardened versions,
importable by workers started with ``spawn`` or ``forkserver`` (which cannot find a
class defined in a notebook or a page run without a file), with tests.

* ``effpt.data.images``: :func:`write_image_folder` draws small labelled PNG files,
  one folder per class; :func:`decode_image` and the map-style :class:`ImageFolder`
  read them.
* ``effpt.data.tars``: :func:`write_tar_shards` packs files into tar shards, never
  leaving one that passes for complete; :func:`iter_members` reads one front to back
  and knows whether it reached a real end-of-archive marker.
* ``effpt.data.shards``: :class:`ShardStream` delivers every item of a list of shards
  exactly once per epoch for any number of shards and workers (the rule is
  :func:`shard_plan`), reshuffles per epoch, and reports damage.
* ``effpt.data.randomness``: :class:`RandomCrops`, :func:`seed_worker` and
  :func:`worker_rng`: where random augmentations and shuffles get their randomness.
* ``effpt.data.workers``: :func:`start_method`, the start method the data pages give
  their workers (fork where the code runs without a file, else the platform's).
* ``effpt.data.errors``: a file or member that cannot be read raises
  :class:`CorruptItemError` naming it; a failing ``transform`` raises
  :class:`TransformError` naming the item; skips are counted, never silent.

Pillow decodes and draws the images; it is imported only when an image is read or
written.
"""

from __future__ import annotations

from effpt.data.errors import CorruptItemError, SkippedItemsWarning, TransformError
from effpt.data.images import IMAGE_SUFFIXES, SHAPES, ImageFolder, decode_image, write_image_folder
from effpt.data.randomness import RandomCrops, seed_worker, worker_rng
from effpt.data.shards import ShardStream, SkippedItem, shard_plan
from effpt.data.tars import iter_members, write_tar_shards
from effpt.data.workers import start_method

# In the order of the API reference: images, tars, shards, randomness, workers, errors.
__all__ = [  # noqa: RUF022  (reading order, not alphabetical)
    "SHAPES",
    "IMAGE_SUFFIXES",
    "write_image_folder",
    "decode_image",
    "ImageFolder",
    "write_tar_shards",
    "iter_members",
    "shard_plan",
    "ShardStream",
    "SkippedItem",
    "RandomCrops",
    "seed_worker",
    "worker_rng",
    "start_method",
    "CorruptItemError",
    "TransformError",
    "SkippedItemsWarning",
]
