"""Where the gallery lives: families, their reading order and generated pages.

Every other module of the extension asks this one where things are, so the layout of
``examples/`` and ``auto_examples/`` is described once. What executing a page leaves
there (records, expectations, stamps, costs) is read through :mod:`effpt_site.outputs`.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

_ORDER_MARK = re.compile(r"^\.\. reading order:[ \t]*$", re.MULTILINE)


def read_reading_order(folder: str | Path) -> list[str]:
    r"""The script names listed under ``.. reading order:`` in a family's header, in order.

    Returns an empty list when the folder has no header or the header no such list.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "GALLERY_HEADER.rst").write_text(
    ...     "T\n-\n\n.. reading order:\n   plot_b.py\n   plot_a.py\n\nAfter.\n")
    >>> read_reading_order(folder)
    ['plot_b.py', 'plot_a.py']
    """
    header = Path(folder) / "GALLERY_HEADER.rst"
    if not header.is_file():
        return []
    text = header.read_text(encoding="utf-8")
    match = _ORDER_MARK.search(text)
    if match is None:
        return []
    names = []
    for line in text[match.end() :].splitlines()[1:]:
        if not line.startswith(" ") or not line.strip():
            break
        names.append(line.strip())
    return names


class ReadingOrder:
    """sphinx-gallery ``within_subsection_order``: the order a family's header lists.

    Each family's ``GALLERY_HEADER.rst`` ends with a reST comment (invisible on the page)::

        .. reading order:
           plot_first.py
           plot_second.py

    A script missing from that list stops the build with a message naming it, so a new
    page cannot land in a random place in the reading order.
    """

    def __init__(self, src_dir: str) -> None:
        self.src_dir = Path(src_dir)
        self.order = read_reading_order(self.src_dir)

    def __call__(self, filename: str) -> tuple[int, str]:
        name = Path(filename).name
        if not self.order:
            return (0, name)
        if name not in self.order:
            msg = (
                f"{self.src_dir / name} is not listed under '.. reading order:' in "
                f"{self.src_dir / 'GALLERY_HEADER.rst'}; add it where a reader should meet it"
            )
            raise ValueError(msg)
        return (self.order.index(name), name)

    def __repr__(self) -> str:
        return f"ReadingOrder({str(self.src_dir)!r})"


def examples_dir(app) -> Path:
    """The gallery's source folder (``examples/``)."""
    return (Path(app.srcdir) / app.config.sphinx_gallery_conf["examples_dirs"]).resolve()


def generated_dir(app) -> Path:
    """The folder sphinx-gallery writes pages into (``docs/auto_examples``)."""
    return Path(app.srcdir) / app.config.sphinx_gallery_conf["gallery_dirs"]


def family_dirs(app) -> list[Path]:
    """Each lesson family's source folder, in reading order."""
    return [examples_dir(app) / family for family in app.config.effpt_families]


def reading_order(folder: Path) -> list[str]:
    """A family's scripts in reading order (by name when its header lists none).

    A script the header lists that does not exist stops the build, naming both.
    """
    listed = read_reading_order(folder)
    missing = [name for name in listed if not (folder / name).is_file()]
    if missing:
        msg = (
            f"{folder / 'GALLERY_HEADER.rst'} lists {', '.join(missing)} under "
            "'.. reading order:', but no such script is in the folder"
        )
        raise ValueError(msg)
    return listed or sorted(p.name for p in folder.glob("plot_*.py"))


def signature(*paths: Path) -> tuple:
    """What :func:`memo` keys a result on: each folder's file names, each file's bytes' hash.

    A file added, removed, renamed or rewritten changes it (bytes, not modification
    times, which a rewrite within the same clock tick would leave unchanged).
    """
    out: list[tuple] = []
    for path in paths:
        if path.is_dir():
            out.append((str(path), tuple(sorted(p.name for p in path.iterdir()))))
        elif path.is_file():
            digest = hashlib.sha1(path.read_bytes(), usedforsecurity=False).hexdigest()
            out.append((str(path), digest))
        else:
            out.append((str(path), None))
    return tuple(out)


def memo(app, name: str, key: object, compute):
    """``compute()``, computed again only when ``key`` differs from the last call's on ``app``.

    A build asks for the same per-build values (every page, every column of evidence) on
    each of its pages; the key (inputs' :func:`signature`, the configuration used) keeps
    a value from outliving what it was computed from. ``app`` is the application or, in
    a directive, the build environment (Sphinx 9 deprecates ``env.app``): this module's
    readers use only their ``config`` and ``srcdir``. The environment is pickled with
    what it keeps here; on the next build the key still decides.
    """
    store = app.__dict__.setdefault("_effpt_memo", {})
    found = store.get(name)
    if found is not None and found[0] == key:
        return found[1]
    value = compute()
    store[name] = (key, value)
    return value


def example_pages(app) -> dict[str, str]:
    """Map each example's stem to its page's docname, for every family in reading order."""
    gallery = app.config.sphinx_gallery_conf["gallery_dirs"]
    folders = family_dirs(app)
    key = (gallery, signature(*folders, *(f / "GALLERY_HEADER.rst" for f in folders)))
    return dict(memo(app, "example_pages", key, lambda: _example_pages(gallery, folders)))


def _example_pages(gallery: str, folders: list[Path]) -> dict[str, str]:
    pages = {}
    for folder in folders:
        for name in reading_order(folder):
            stem = Path(name).stem
            pages[stem] = f"{gallery}/{folder.name}/{stem}"
    return pages


def page_stem(app, docname: str) -> str | None:
    """The stem of the example whose page is ``docname``; None for any other document."""
    return {doc: stem for stem, doc in example_pages(app).items()}.get(docname)


def header_title_and_intro(folder: Path) -> tuple[str, str]:
    """A family's title and first paragraph, from its GALLERY_HEADER.rst."""
    lines = (folder / "GALLERY_HEADER.rst").read_text(encoding="utf-8").splitlines()
    title = lines[0].strip()
    paragraph: list[str] = []
    for line in lines[2:]:
        if line.startswith(".."):
            break
        if not line.strip():
            if paragraph:
                break
            continue
        paragraph.append(line.strip())
    return title, " ".join(paragraph)
