"""The downloaded scripts carry the line that runs them alone.

A page's source does not state effpt's install line: its "before you start" box does,
made from the version the site is built with (:mod:`effpt_site.before_you_start`), so
that a release edits ``src/effpt/__init__.py`` and nothing else. A reader who downloads
the script alone still needs the line, so once the site is written this module adds it
to the end of the docstring of every script in ``_downloads`` (each page's ``.py`` and
the ``.py`` files inside the zips), in the words the pages once stated by hand.
:func:`effpt_site.packages.check_install_lines` then checks those lines like every other.
"""

from __future__ import annotations

import ast
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


def _stamp_zip(path: Path) -> bool:
    """Rewrite the gallery scripts in the zip at ``path``; whether anything changed."""
    with zipfile.ZipFile(path) as archive:
        members = [(info, archive.read(info)) for info in archive.infolist()]
    changed = False
    rewritten = []
    for info, data in members:
        name = Path(info.filename).name
        new = data
        if name.startswith("plot_") and name.endswith(".py"):
            new = stamp_script(data.decode("utf-8"), name).encode("utf-8")
            changed = changed or new != data
        rewritten.append((info, new))
    if changed:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for info, data in rewritten:
                archive.writestr(info, data)
        path.write_bytes(buffer.getvalue())
    return changed


def stamp_downloads(site: Path) -> int:
    """Add the run-alone line to every downloadable gallery script under ``site``.

    Returns how many files changed (a rebuild that copied nothing new changes none).
    """
    changed = 0
    for path in sorted((site / DOWNLOADS).glob("*/plot_*.py")):
        text = path.read_text(encoding="utf-8")
        stamped = stamp_script(text, path.name)
        if stamped != text:
            path.write_text(stamped, encoding="utf-8")
            changed += 1
    for path in sorted((site / DOWNLOADS).glob("*/*.zip")):
        changed += _stamp_zip(path)
    return changed


def on_build_finished(app, exception) -> None:
    """build-finished, before the install lines are checked (packages.publish)."""
    if exception is not None or app.builder.format != "html":
        return
    stamp_downloads(Path(app.outdir))


def setup(app) -> None:
    # Before effpt_site.packages.publish (priority 500) checks every stated line.
    app.connect("build-finished", on_build_finished, priority=400)
