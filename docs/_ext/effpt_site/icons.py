r"""The theme's icon font, cut down to the icons the site's pages show.

The theme draws its icons (search, colour mode, menu, GitHub...) with Font Awesome:
three fonts of 19-115 KB holding some two thousand glyphs, of which a page shows about
a dozen. Once the stylesheet keeps only the rules of icons some page names
(:mod:`effpt_site.cssprune`), the code points those rules draw (``--fa:"\f002"``)
are exactly the glyphs needed; fontTools' subsetter writes each font with only those,
and the stylesheet's ``@font-face`` rules point at the small fonts. Reading and writing
WOFF2 needs the ``brotli`` module (the ``assets`` dependency group); without it the
full fonts stay, and the build says so.

The cut fonts are new files beside the theme's, and the ``@font-face`` addresses change
in the site's stylesheet as :mod:`effpt_site.assets` composes it, before it is written:
no font or stylesheet the build wrote is edited.
"""

from __future__ import annotations

import hashlib
import logging as std_logging
import re
from pathlib import Path

from sphinx.util import logging

from effpt_site import cssprune

logger = logging.getLogger(__name__)

#: ``--fa:"\f002"`` (and ``--fa--fa:"\f002\f002"`` for two-tone icons).
_GLYPH = re.compile(r"""--fa(?:-{2}fa)?\s*:\s*(["'])((?:\\[0-9a-fA-F]{1,6}\s?|[^"'\\])+)\1""")
_ESCAPE = re.compile(r"\\([0-9a-fA-F]{1,6})\s?")
_SRC = re.compile(r"""url\(\s*(['"]?)([^'")]+\.woff2)\1\s*\)""")


def icon_codepoints(css: str) -> set[int]:
    r"""The code points that the stylesheet's icon rules draw.

    Examples
    --------
    >>> sorted(hex(c) for c in icon_codepoints('.fa-x{--fa:"\\f002"}.fa-y{--fa:"\\e521"}'))
    ['0xe521', '0xf002']
    >>> icon_codepoints(".fa-x{--fa:'A'}")
    {65}
    """
    points: set[int] = set()
    for match in _GLYPH.finditer(css):
        value = match.group(2)
        points.update(int(m.group(1), 16) for m in _ESCAPE.finditer(value))
        points.update(ord(ch) for ch in _ESCAPE.sub("", value))
    return points


def subset_font(
    source: Path, target: Path, codepoints: set[int], flavor: str | None = "woff2"
) -> int:
    """Write ``source`` with only ``codepoints`` to ``target``; return the glyphs kept."""
    from fontTools import subset  # noqa: PLC0415  (docs-only dependency)

    options = subset.Options()
    options.flavor = flavor
    options.layout_features = []  # icons are single glyphs: no ligatures, no kerning
    options.name_IDs = ["*"]  # keep the licence and copyright names
    options.notdef_outline = True
    font = subset.load_font(str(source), options)
    # fontTools logs every table it prunes at INFO; the build reports one line per font.
    quiet = std_logging.getLogger("fontTools")
    level = quiet.level
    quiet.setLevel(std_logging.WARNING)
    try:
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=codepoints)
        subsetter.subset(font)
        target.parent.mkdir(parents=True, exist_ok=True)
        subset.save_font(font, str(target), options)
        return len(font.getGlyphOrder())
    finally:
        quiet.setLevel(level)
        font.close()


def _woff2_available() -> bool:
    try:
        import brotli  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def subset_icon_fonts(css: str, stylesheet: Path) -> str:
    """Subset every WOFF2 font the stylesheet's ``@font-face`` rules load; return the CSS.

    Subset fonts are written beside ``stylesheet`` as ``effpt-icons-<name>-<hash>.woff2``
    (the hash names the glyph set, so a browser never keeps a stale cut).
    """
    codepoints = icon_codepoints(css)
    if not codepoints:
        return css
    if not _woff2_available():
        logger.info(
            "effpt: the icon fonts are not subset (install the 'assets' dependency group "
            "for brotli); pages load the full fonts"
        )
        return css
    tag = hashlib.sha256(repr(sorted(codepoints)).encode()).hexdigest()[:8]
    rules = cssprune.parse(css)
    done: dict[str, str] = {}
    for rule in rules:
        if rule.at_name != "font-face" or not isinstance(rule.body, str):
            continue

        def replace(match: re.Match) -> str:
            url = match.group(2)
            if url not in done:
                source = (stylesheet.parent / url.split("?")[0]).resolve()
                if not source.is_file():
                    return match.group(0)
                name = f"effpt-icons-{source.stem}-{tag}.woff2"
                kept = subset_font(source, stylesheet.parent / name, codepoints)
                size = (stylesheet.parent / name).stat().st_size
                logger.info(
                    "effpt: %s: %d glyphs, %.1f KB (from %.0f KB)",
                    name,
                    kept,
                    size / 1000,
                    source.stat().st_size / 1000,
                )
                done[url] = name
            return f'url("{done[url]}")'

        rule.body = _SRC.sub(replace, rule.body)
    return cssprune.serialize(rules)
