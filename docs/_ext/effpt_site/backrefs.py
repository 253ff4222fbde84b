"""sphinx-gallery's backreference files, with each example's thumbnail block made once.

At every build, even one in which nothing changed, sphinx-gallery writes for each
example one thumbnail block into the ``.examples`` file of every name the example uses
(``gen_modules/backreferences``), and makes that block afresh for each name: about sixty
times per page, the same text each time, looking up the thumbnail's file each time. It
was the largest part of sphinx-gallery's work in a build that executes nothing.

:func:`install` wraps sphinx-gallery's ``_write_backreferences`` so that, within one call
(one example), the block is made once per distinct set of arguments and reused for each
name. The next example, or the next build, makes its own again, so a changed thumbnail
or title is never served from an older call; the files written are byte for byte those
sphinx-gallery writes (``tests/test_site_backrefs.py``).
"""

from __future__ import annotations

import functools


def install() -> None:
    """Make each example's thumbnail block once per ``_write_backreferences`` call."""
    from sphinx_gallery import backreferences, gen_rst  # noqa: PLC0415  (docs-only)

    write = backreferences._write_backreferences
    if getattr(write, "effpt_once_per_example", False):
        return

    @functools.wraps(write)
    def write_backreferences(*args, **kwargs):
        thumbnail_div = backreferences._thumbnail_div
        made: dict[str, str] = {}

        def once(*a, **k):
            key = repr((a, sorted(k.items())))
            if key not in made:
                made[key] = thumbnail_div(*a, **k)
            return made[key]

        backreferences._thumbnail_div = once
        try:
            return write(*args, **kwargs)
        finally:
            backreferences._thumbnail_div = thumbnail_div

    write_backreferences.effpt_once_per_example = True
    # gen_rst calls it by the name it imported.
    backreferences._write_backreferences = write_backreferences
    gen_rst._write_backreferences = write_backreferences


def setup(app) -> None:  # noqa: ARG001  (Sphinx's signature)
    install()
