"""What effpt.data raises and warns: bad data, a transform that failed, skipped items."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class CorruptItemError(ValueError):
    """An item or a shard could not be read; the message names the file and, in a shard,
    the member (or, for a shard that stops early, the last member read intact)."""


class TransformError(RuntimeError):
    """A user's ``transform`` raised. The message names the file or member it was given;
    the original exception is the ``__cause__``. Never skipped: it is a bug to fix, not
    bad data."""


class SkippedItemsWarning(UserWarning):
    """A :class:`~effpt.data.ShardStream` with ``skip_bad=True`` skipped items; the message
    counts them and :meth:`~effpt.data.ShardStream.skipped` lists them."""


def apply_transform(transform: Callable[[T], T], value: T, where: str) -> T:
    """``transform(value)``, with any exception it raises wrapped in :class:`TransformError`.

    Examples
    --------
    >>> apply_transform(lambda x: x + 1, 1, "a.png")
    2
    >>> apply_transform(lambda x: x / 0, 1, "a.png")
    Traceback (most recent call last):
    ...
    effpt.data.errors.TransformError: a.png: the transform raised ZeroDivisionError: division by zero
    """
    try:
        return transform(value)
    except Exception as exc:
        msg = f"{where}: the transform raised {type(exc).__name__}: {exc}"
        raise TransformError(msg) from exc
