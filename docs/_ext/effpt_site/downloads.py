"""The downloaded scripts carry the line that runs them alone.

A page's source does not state effpt's install line: its "before you start" box does,
made from the version the site is built with (:mod:`effpt_site.before_you_start`), so
that a release edits ``src/effpt/__init__.py`` and nothing else. A reader who downloads
the script alone still needs the line, so once the site is written this module adds it
to the end of the docstring of every script in ``_downloads`` (each page's ``.py`` and
the ``.py`` files inside the zips), in the words the pages once stated by hand.
:func:`effpt_site.packages.check_install_lines` then checks those lines like every other.

Sphinx copies every download afresh at every build, unstamped. Stamping (parsing each
script, rewriting each zip) is done once per content: the stamped file is kept in the
doctree folder (``effpt-stamped/``) under a digest of the file as copied, its name, the
install line and this module's code, and a later build with the same inputs writes it
back without stamping again.
"""

from __future__ import annotations

import ast
import hashlib
import io
import zipfile
from pathlib import Path

from effpt_site.packages import install_command

#: Where sphinx-gallery's scripts and zips land in a built site.
DOWNLOADS = "_downloads"


def run_alone_line(name: str) -> str:
    """The sentence a downloaded script's docstring ends with.

    Examples
    --------
    >>> run_alone_line("plot_modules.py")  # doctest: +ELLIPSIS
    'To run this page on its own: ``pip install effpt==... --find-links https://.../packages/``, then ``python plot_modules.py``.'
    """
    return f"To run this page on its own: ``{install_command()}``, then ``python {name}``."


def stamp_script(text: str, name: str) -> str:
    """``text`` with :func:`run_alone_line` closing its module docstring (once).

    A script without a module docstring is returned as it is: a gallery page always has
    one (the build stops on a page without a title), and a file that is not a page has
    nothing to say.

    Examples
    --------
    >>> quotes = chr(34) * 3
    >>> page = quotes + "\\nTitle\\n=====\\n\\nIntro.\\n" + quotes + "\\nx = 1\\n"
    >>> stamped = stamp_script(page, "plot_a.py")
    >>> print(stamped.replace(quotes, "'''"))  # doctest: +ELLIPSIS
    '''
    Title
    =====
    <BLANKLINE>
    Intro.
    <BLANKLINE>
    To run this page on its own: ``pip install effpt==...``, then ``python plot_a.py``.
    '''
    x = 1
    <BLANKLINE>
    >>> stamp_script(stamped, "plot_a.py") == stamped
    True
    >>> stamp_script("x = 1\\n", "plot_a.py")
    'x = 1\\n'
    """
    line = run_alone_line(name)
    if line in text:
        return text
    module = ast.parse(text)
    first = module.body[0] if module.body else None
    if not (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return text
    lines = text.splitlines(keepends=True)
    end_line = lines[first.end_lineno - 1]
    # The closing quotes are the last three characters of the docstring's last line.
    close = end_line.rstrip().rfind(end_line.rstrip()[-3:])
    body = "".join(lines[: first.end_lineno - 1]) + end_line[:close]
    tail = end_line[close:] + "".join(lines[first.end_lineno :])
    return f"{body.rstrip()}\n\n{line}\n{tail}"


def _stamped(path: Path, data: bytes) -> bytes:
    """``data``, the file at ``path``, with the run-alone line in each of its scripts."""
    if path.suffix == ".zip":
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = [(info, archive.read(info)) for info in archive.infolist()]
        changed = False
        rewritten = []
        for info, member in members:
            name = Path(info.filename).name
            new = member
            if name.startswith("plot_") and name.endswith(".py"):
                new = stamp_script(member.decode("utf-8"), name).encode("utf-8")
                changed = changed or new != member
            rewritten.append((info, new))
        if not changed:
            return data
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for info, member in rewritten:
                archive.writestr(info, member)
        return buffer.getvalue()
    text = data.decode("utf-8")
    stamped = stamp_script(text, path.name)
    return data if stamped == text else stamped.encode("utf-8")


def _cache_key(path: Path, data: bytes) -> str:
    """What a stamped file is made of: its content, name, the install line and this code."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for part in (install_command().encode(), path.name.encode(), data):
        digest.update(len(part).to_bytes(8, "little") + part)
    return digest.hexdigest()


def stamp_downloads(site: Path, cache: Path | None = None) -> int:
    """Add the run-alone line to every downloadable gallery script under ``site``.

    With a ``cache`` folder, a file whose inputs (:func:`_cache_key`) were stamped before
    is written back from it; entries no file used are removed. Returns how many files
    changed (a rebuild that copied nothing new changes none).
    """
    changed, used = 0, set()
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    paths = [
        *sorted((site / DOWNLOADS).glob("*/plot_*.py")),
        *sorted((site / DOWNLOADS).glob("*/*.zip")),
    ]
    for path in paths:
        data = path.read_bytes()
        kept = None
        if cache is not None:
            # KEY holds the stamped file; KEY.same says the file needs no change.
            key = _cache_key(path, data)
            used |= {key, f"{key}.same"}
            if (cache / f"{key}.same").is_file():
                kept = data
            else:
                try:
                    kept = (cache / key).read_bytes()
                except OSError:
                    kept = None
        new = _stamped(path, data) if kept is None else kept
        if cache is not None and kept is None:
            if new == data:
                (cache / f"{key}.same").touch()
            else:
                (cache / key).write_bytes(new)
                done = _cache_key(path, new)
                (cache / f"{done}.same").touch()
                used.add(f"{done}.same")
        elif cache is not None and new != data:
            used.add(f"{_cache_key(path, new)}.same")
        if new != data:
            path.write_bytes(new)
            changed += 1
    if cache is not None:
        for entry in cache.iterdir():
            if entry.name not in used:
                entry.unlink()
    return changed


def on_build_finished(app, exception) -> None:
    """build-finished, before the install lines are checked (packages.publish)."""
    if exception is not None or app.builder.format != "html":
        return
    stamp_downloads(Path(app.outdir), Path(app.doctreedir) / "effpt-stamped")


def setup(app) -> None:
    # Before effpt_site.packages.publish (priority 500) checks every stated line.
    app.connect("build-finished", on_build_finished, priority=400)
