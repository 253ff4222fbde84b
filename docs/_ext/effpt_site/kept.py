"""Files one build keeps for the next, named by their inputs, and removed once unused.

The English pass keeps sphinx-gallery's linked code cells (:mod:`effpt_site.code_links`)
and resized thumbnails (:mod:`effpt_site.images`) under ``docs/_build``; the Chinese pass
and later builds read them instead of making them again. A kept file is named by the
hash of everything it was made from, so a changed input makes a new file and the old one
is never read again: each use touches the file's time, and :func:`prune_unused` removes
those no build has used for :data:`UNUSED_DAYS` days.
"""

from __future__ import annotations

import gc
import os
import pickle
import time
from pathlib import Path

#: A kept file no build has used for this long is removed (its inputs changed, or its
#: page was removed or renamed).
UNUSED_DAYS = 30


def store(path: Path, data: bytes) -> None:
    """Write ``data`` at ``path`` whole or not at all, also when processes race to write it.

    Each writer uses a temporary name of its own (two readers of a parallel build may make
    the same file at once) and renames it over ``path``: a reader never sees half a file.

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "sub" / "cell.pickle"
    >>> store(path, b"nodes"); path.read_bytes(), sorted(p.name for p in path.parent.iterdir())
    (b'nodes', ['cell.pickle'])
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_bytes(data)
    partial.replace(path)


def load(path: Path):
    """Unpickle the kept file at ``path`` and mark it used; raises as ``pickle.loads`` does.

    The cyclic garbage collector is paused while the objects are made: a kept cell is
    hundreds of docutils nodes, each a few containers, and a build holds millions of
    objects that each collection the new ones trigger walks again. In a cold Chinese
    pass the 548 cells took 4.5 s to load with it running and a tenth of that without;
    nothing made here is garbage, so the pause frees nothing later.

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "cell.pickle"
    >>> store(path, pickle.dumps(["nodes"])); load(path), gc.isenabled()
    (['nodes'], True)
    """
    data = path.read_bytes()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        kept = pickle.loads(data)
    finally:
        if was_enabled:
            gc.enable()
    os.utime(path)  # used by this build (see prune_unused)
    return kept


def prune_unused(folder: Path, pattern: str = "*", days: float = UNUSED_DAYS) -> list[Path]:
    """Remove the files matching ``pattern`` in ``folder`` unused for ``days``; return them.

    A missing folder has nothing to remove.

    Examples
    --------
    >>> import os, tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> (folder / "old.pickle").write_bytes(b"x") and (folder / "new.pickle").write_bytes(b"x")
    1
    >>> month_ago = time.time() - 31 * 24 * 3600
    >>> os.utime(folder / "old.pickle", (month_ago, month_ago))
    >>> [p.name for p in prune_unused(folder, "*.pickle")], sorted(p.name for p in folder.iterdir())
    (['old.pickle'], ['new.pickle'])
    >>> prune_unused(folder / "absent")
    []
    """
    if not folder.is_dir():
        return []
    oldest = time.time() - days * 24 * 3600
    removed = []
    for path in sorted(folder.glob(pattern)):
        if path.is_file() and path.stat().st_mtime < oldest:
            path.unlink()
            removed.append(path)
    return removed
