"""Evidence records: what every gallery page measured on one machine, read and checked.

``docs/evidence/<slug>.json`` holds one machine's (or one stand-in's) run of the
gallery: the machine, and for every page (``"<family>/<stem>"``) whether it ran, how
long, the hash of the page's source it ran, and each expectation and claim outcome it
recorded, as :mod:`effpt.expect` and :mod:`effpt.claims` write them. The site's
measurements page shows them beside this build's run (``effpt_site.across_machines``).

This module reads them and checks their shape, with the standard library only: a
missing or malformed field raises :class:`EvidenceError` naming the file and the field.
What the expectations and outcomes inside mean is checked by their own classes when
the site reads them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

#: The version of the record format this module reads.
FORMAT = 1
#: Where a record's run came from.
SOURCES = ("docs build", "reader", "standins", "gpu build")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_PAGE = re.compile(r"[A-Za-z0-9_.-]+/plot_[A-Za-z0-9_]+")


class EvidenceError(ValueError):
    """A record that cannot be read; the message names the file and the field."""


def _fail(path: Path, field: str, problem: str) -> EvidenceError:
    return EvidenceError(f"evidence record {path}: field {field!r}: {problem}")


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_machine(path: Path, machine: object) -> None:
    if not isinstance(machine, dict):
        raise _fail(path, "machine", f"must be a JSON object, got {machine!r}")
    rules = {
        "kind": (_text, "a non-empty string"),
        "name": (_text, "a non-empty string"),
        "torch": (_text, "a non-empty string"),
        "threads": (lambda v: v is None or (_int(v) and v > 0), "a positive int or null"),
        "cuda": (lambda v: v is None or _text(v), "a non-empty string or null"),
        "cpu_model": (_text, "a non-empty string"),
        "capability": (lambda v: isinstance(v, str), "a string"),
        "flags": (
            lambda v: isinstance(v, list) and all(_text(f) for f in v),
            "a list of strings",
        ),
    }
    for name, (ok, expected) in rules.items():
        if name not in machine:
            raise _fail(path, f"machine.{name}", "missing")
        if not ok(machine[name]):
            raise _fail(path, f"machine.{name}", f"must be {expected}, got {machine[name]!r}")


def _check_page(path: Path, key: str, page: object) -> None:
    where = f"pages[{key!r}]"
    if not _PAGE.fullmatch(key):
        raise _fail(path, where, "a page is named '<family>/plot_<name>'")
    if not isinstance(page, dict):
        raise _fail(path, where, f"must be a JSON object, got {page!r}")
    rules = {
        "source_sha256": (
            lambda v: isinstance(v, str) and bool(_SHA256.fullmatch(v)),
            "64 lowercase hex digits (the page's source's SHA-256)",
        ),
        "ran": (lambda v: isinstance(v, bool), "true or false"),
        "error": (lambda v: v is None or isinstance(v, str), "a string or null"),
        "seconds": (
            lambda v: (
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0)
            ),
            "a number of seconds or null",
        ),
        "peak_gpu_bytes": (lambda v: v is None or (_int(v) and v >= 0), "an int or null"),
        "device": (_text, "a non-empty string"),
        "expectations": (
            lambda v: isinstance(v, list) and all(isinstance(e, dict) for e in v),
            "a list of JSON objects",
        ),
        "claims": (
            lambda v: isinstance(v, list) and all(isinstance(c, dict) for c in v),
            "a list of JSON objects",
        ),
    }
    for name, (ok, expected) in rules.items():
        if name not in page:
            raise _fail(path, f"{where}.{name}", "missing")
        if not ok(page[name]):
            raise _fail(path, f"{where}.{name}", f"must be {expected}, got {page[name]!r}")


def read_evidence(path: str | Path) -> dict[str, Any]:
    """The record in ``path``, as its JSON object, after checking every field's shape.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "box.json"
    >>> _ = p.write_text('{"format": 2}')
    >>> read_evidence(p)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    evidence.EvidenceError: evidence record .../box.json: field 'format': this reader reads format 1, got 2
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise _fail(path, "(the whole file)", f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise _fail(path, "(the whole file)", f"must be a JSON object, got {type(data).__name__}")
    if "format" not in data:
        raise _fail(path, "format", "missing")
    if not _int(data["format"]) or data["format"] != FORMAT:
        raise _fail(path, "format", f"this reader reads format {FORMAT}, got {data['format']!r}")
    for name in ("machine", "standin", "environment", "created", "source", "pages"):
        if name not in data:
            raise _fail(path, name, "missing")
    _check_machine(path, data["machine"])
    if not (data["standin"] is None or _text(data["standin"])):
        raise _fail(path, "standin", f"must be a stand-in's name or null, got {data['standin']!r}")
    environment = data["environment"]
    if not isinstance(environment, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in environment.items()
    ):
        raise _fail(path, "environment", f"must map names to strings, got {environment!r}")
    if not (isinstance(data["created"], str) and _DATE.fullmatch(data["created"])):
        raise _fail(path, "created", f"must be a date YYYY-MM-DD, got {data['created']!r}")
    if data["source"] not in SOURCES:
        raise _fail(path, "source", f"must be one of {SOURCES}, got {data['source']!r}")
    if not isinstance(data["pages"], dict):
        raise _fail(path, "pages", f"must be a JSON object, got {data['pages']!r}")
    for key, page in data["pages"].items():
        _check_page(path, key, page)
    return data


def read_all(folder: str | Path) -> dict[Path, dict[str, Any]]:
    """Every record (``*.json``) in ``folder``, by path, sorted by file name; {} without one."""
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    return {path: read_evidence(path) for path in sorted(folder.glob("*.json"))}
