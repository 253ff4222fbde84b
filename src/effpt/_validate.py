"""Argument and file checks shared by effpt's public functions (private: not part of the API)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def read_json_lines(
    path: str | os.PathLike[str], what: str, parse: Callable[[object], T]
) -> list[T]:
    """Each line of a JSON-lines file, decoded and given to ``parse``.

    Lines end at a newline only (JSON text holds no raw newline, while U+2028, U+2029
    and U+0085 may stand raw inside its strings). A line that is not UTF-8, not JSON,
    nested too deeply, or that ``parse`` rejects, raises ``ValueError`` naming ``what``
    the line should be, the file and the line number.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "page.jsonl"
    >>> _ = p.write_text('{"n": 1}\\n{"n": \\n')
    >>> read_json_lines(p, "count", lambda data: data["n"])
    Traceback (most recent call last):
    ...
    ValueError: malformed count .../page.jsonl:2: Expecting value: line 1 column 7 (char 6)
    >>> _ = p.write_text('{"n": "a\\u2028b"}\\n', encoding="utf-8")
    >>> read_json_lines(p, "count", lambda data: data["n"])
    ['a\\u2028b']
    """
    lines = Path(path).read_bytes().split(b"\n")
    if lines[-1] == b"":  # the newline that ends the last line
        lines.pop()
    out = []
    for number, raw in enumerate(lines, 1):
        try:
            out.append(parse(json.loads(raw.decode("utf-8"))))
        except UnicodeDecodeError as exc:
            msg = f"malformed {what} {path}:{number}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            raise ValueError(msg) from exc
        except RecursionError as exc:
            msg = f"malformed {what} {path}:{number}: nested too deeply to read"
            raise ValueError(msg) from exc
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, OverflowError) as exc:
            msg = f"malformed {what} {path}:{number}: {exc}"
            raise ValueError(msg) from exc
    return out


def finite_float(name: str, value: float) -> float:
    """``value`` as a float; an int too large for one raises ``ValueError`` naming ``name``.

    Examples
    --------
    >>> finite_float("median_s", 2)
    2.0
    >>> finite_float("median_s", 10**400)
    Traceback (most recent call last):
    ...
    ValueError: median_s=1000000000...0 is too large for a float
    """
    try:
        return float(value)
    except OverflowError:
        text = str(value) if len(str(value)) <= 24 else f"{str(value)[:10]}...{str(value)[-1:]}"
        msg = f"{name}={text} is too large for a float"
        raise ValueError(msg) from None


def check_int(name: str, value: object, minimum: int) -> int:
    """Return ``value`` if it is an int (not a bool) of at least ``minimum``, else raise.

    Examples
    --------
    >>> check_int("repeats", 3, 1)
    3
    >>> check_int("repeats", 0, 1)
    Traceback (most recent call last):
    ...
    ValueError: repeats must be >= 1, got 0
    >>> check_int("repeats", 2.0, 1)
    Traceback (most recent call last):
    ...
    TypeError: repeats must be an int, got float
    """
    if not isinstance(value, int) or isinstance(value, bool):
        msg = f"{name} must be an int, got {type(value).__name__}"
        raise TypeError(msg)
    if value < minimum:
        msg = f"{name} must be >= {minimum}, got {value}"
        raise ValueError(msg)
    return value


def check_positive(name: str, value: object) -> float:
    """Return ``value`` if it is a positive finite real number (not a bool), else raise.

    Examples
    --------
    >>> check_positive("budget_s", 0.5)
    0.5
    >>> check_positive("budget_s", float("inf"))
    Traceback (most recent call last):
    ...
    ValueError: budget_s must be a positive finite number, got inf
    >>> check_positive("budget_s", "1")
    Traceback (most recent call last):
    ...
    TypeError: budget_s must be a real number, got str
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        msg = f"{name} must be a real number, got {type(value).__name__}"
        raise TypeError(msg)
    if not (0 < value < float("inf")):
        msg = f"{name} must be a positive finite number, got {value!r}"
        raise ValueError(msg)
    return value


def check_float_tensor(name: str, value: object) -> None:
    """Raise TypeError unless ``value`` is a floating-point :class:`torch.Tensor`.

    Examples
    --------
    >>> import torch
    >>> check_float_tensor("logits", torch.zeros(2))
    >>> check_float_tensor("logits", torch.zeros(2, dtype=torch.int64))
    Traceback (most recent call last):
    ...
    TypeError: logits must have a floating-point dtype, got torch.int64
    """
    import torch  # noqa: PLC0415  (keeps this module import-light)

    if not isinstance(value, torch.Tensor):
        msg = f"{name} must be a torch.Tensor, got {type(value).__name__}"
        raise TypeError(msg)
    if not value.is_floating_point():
        msg = f"{name} must have a floating-point dtype, got {value.dtype}"
        raise TypeError(msg)
