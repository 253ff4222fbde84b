"""What a build left behind for each gallery page, read in one place.

Executing a page leaves, inside the generated gallery (``docs/auto_examples``):

* ``_records/<stem>.jsonl``: the timings the page recorded (:mod:`effpt.records`);
* ``_expectations/<stem>.jsonl``: the expectations it stated (:mod:`effpt.expect`);
* ``_claims/<stem>.jsonl``: the sources' claims it checked (:mod:`effpt.claims`);
* ``_records/<stem>.stamp.json``: when and on which machine it ran, and on CUDA the
  most GPU memory torch allocated (written by :mod:`effpt_site.hooks`);
* ``<family>/<stem>.cost.json``: sphinx-gallery's record of how long it ran.

Every module that needs one of them asks this one, so the file names and formats are
stated once. It imports nothing from Sphinx: ``docs/_tools/archive.py`` loads it alone
(so it defines no dataclass, which needs its module registered).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

#: Suffix of the file, beside an example's records, saying when and where it last ran.
STAMP_SUFFIX = ".stamp.json"


def _gallery(conf: Mapping[str, Any]) -> Path:
    gallery_dirs = conf["gallery_dirs"]
    first = gallery_dirs if isinstance(gallery_dirs, str) else gallery_dirs[0]
    return Path(conf["src_dir"]) / first


def conf_of(app) -> dict[str, Any]:
    """The gallery configuration with the source folder, as sphinx-gallery's hooks see it."""
    return {**app.config.sphinx_gallery_conf, "src_dir": app.srcdir}


def records_dir(conf: Mapping[str, Any]) -> Path:
    """The folder, inside the generated gallery, where measurement records persist.

    ``conf`` is sphinx-gallery's configuration (with ``src_dir``), or :func:`conf_of`.

    Examples
    --------
    >>> records_dir({"src_dir": "docs", "gallery_dirs": ["auto", "other"]}).as_posix()
    'docs/auto/_records'
    """
    return _gallery(conf) / "_records"


def expectations_dir(conf: Mapping[str, Any]) -> Path:
    """The folder, beside the records, where each page's expectations persist."""
    return _gallery(conf) / "_expectations"


def claims_dir(conf: Mapping[str, Any]) -> Path:
    """The folder, beside the records, where each page's claim outcomes persist."""
    return _gallery(conf) / "_claims"


def records_file(conf: Mapping[str, Any], stem: str) -> Path:
    """The file a page's timings go to (:data:`effpt.records.RECORDS_ENV` names it)."""
    return records_dir(conf) / f"{stem}.jsonl"


def expectations_file(conf: Mapping[str, Any], stem: str) -> Path:
    """The file a page's expectations go to (:data:`effpt.expect.EXPECTATIONS_ENV`)."""
    return expectations_dir(conf) / f"{stem}.jsonl"


def claims_file(conf: Mapping[str, Any], stem: str) -> Path:
    """The file a page's claim outcomes go to (:data:`effpt.claims.CLAIMS_ENV`)."""
    return claims_dir(conf) / f"{stem}.jsonl"


def _by_page(folder: Path) -> dict[str, Path]:
    """The JSON-lines files in ``folder``, one per page, by page stem, sorted."""
    return {p.stem: p for p in sorted(folder.glob("*.jsonl"))} if folder.is_dir() else {}


def record_files(app) -> dict[str, Path]:
    """Each page's records file, by page stem, sorted by stem (pages never run are absent)."""
    return _by_page(records_dir(conf_of(app)))


def expectation_files(app) -> dict[str, Path]:
    """Each page's expectations file, by page stem (pages never run are absent)."""
    return _by_page(expectations_dir(conf_of(app)))


def claim_files(app) -> dict[str, Path]:
    """Each page's claim outcomes file, by page stem (pages never run are absent)."""
    return _by_page(claims_dir(conf_of(app)))


def stamp_file(conf: Mapping[str, Any], stem: str) -> Path:
    """The file saying when and where page ``stem`` last ran."""
    return records_dir(conf) / f"{stem}{STAMP_SUFFIX}"


def write_stamp(conf: Mapping[str, Any], stem: str, stamp: Mapping[str, Any]) -> None:
    """Save page ``stem``'s stamp (``executed_at``, ``machine``, optional ``gpu_peak_mib``)."""
    path = stamp_file(conf, stem)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(stamp)), encoding="utf-8")


def read_stamp(conf: Mapping[str, Any], stem: str) -> dict[str, Any] | None:
    """Page ``stem``'s stamp, or None when it never ran with the site's hook.

    Examples
    --------
    >>> import tempfile
    >>> conf = {"src_dir": tempfile.mkdtemp(), "gallery_dirs": "auto"}
    >>> read_stamp(conf, "plot_x") is None
    True
    >>> write_stamp(conf, "plot_x", {"executed_at": "2026-11-25 04:00 UTC", "machine": "cpu"})
    >>> read_stamp(conf, "plot_x")["machine"]
    'cpu'
    """
    path = stamp_file(conf, stem)
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def stamps(conf: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every page's stamp, by page stem, sorted by stem."""
    folder = records_dir(conf)
    found = sorted(folder.glob(f"*{STAMP_SUFFIX}")) if folder.is_dir() else []
    return {p.name.removesuffix(STAMP_SUFFIX): json.loads(p.read_text("utf-8")) for p in found}


class Cost(NamedTuple):
    """sphinx-gallery's record of a page's last run: how many seconds it took.

    (Its memory figure is 0 since conf.py turned ``show_memory`` off: the peak GPU
    memory is in the page's stamp.)
    """

    seconds: float
    path: Path


def cost_file(srcdir: str | Path, docname: str) -> Path:
    """sphinx-gallery's cost file of the page ``docname``."""
    return Path(srcdir, docname).with_suffix(".cost.json")


def read_cost(srcdir: str | Path, docname: str) -> Cost | None:
    """How long page ``docname`` last ran, or None when it never ran (or is no gallery page).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> src = pathlib.Path(tempfile.mkdtemp())
    >>> read_cost(src, "index") is None
    True
    >>> _ = (src / "index.cost.json").write_text('{"time": 12.5, "memory": 0}')
    >>> read_cost(src, "index").seconds
    12.5
    """
    path = cost_file(srcdir, docname)
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return Cost(float(data["time"]), path)
