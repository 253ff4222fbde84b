r"""The theme's icon font, cut down to the glyphs the site's stylesheet asks of it.

The theme draws its icons (search, colour mode, menu, GitHub, the admonitions' and
directives' marks...) with Font Awesome: three fonts of 19-115 KB holding some two
thousand glyphs, of which the site shows a few dozen. What it shows is what the CSS
asks for: once the stylesheet keeps only the rules that some page can match
(:mod:`effpt_site.cssprune`), every ``content:`` declaration left in it names the
characters a pseudo-element draws, either as a string (``content:"\f05a"``) or through
custom properties (``content:var(--pst-icon-admonition-note)``, which the theme defines
as ``var(--pst-icon-info-circle)``, which is the glyph; Font Awesome's own classes set
``--fa:"\f002"`` for ``.fa:before{content:var(--fa)}``). :func:`icon_codepoints` follows
those references through every definition in the stylesheet, so an admonition, a
directive or an icon class that some page uses keeps its glyph, and none is listed by
hand. fontTools' subsetter writes each font with the requested code points it has, and
the stylesheet's ``@font-face`` rules point at the small fonts. Reading and writing
WOFF2 needs the ``brotli`` module (the ``assets`` dependency group); without it the
full fonts stay, and the build says so. The browser test (``nox -s browser``) checks
in every rendered page that each icon's code point is in the font the page loaded.

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

_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})\s?|(.))", re.DOTALL)
_STRING = re.compile(r"""(["'])((?:\\.|(?!\1)[^\\])*)\1""", re.DOTALL)
_VAR = re.compile(r"var\(\s*(--[\w-]+)\s*(?:,([^()]*(?:\([^()]*\)[^()]*)*))?\)")
_SRC = re.compile(r"""url\(\s*(['"]?)([^'")]+\.woff2)\1\s*\)""")


def _unescape(text: str) -> str:
    r"""A CSS string's characters: ``\f05a`` and ``\"`` become what they stand for.

    >>> _unescape(r"\f05a\"x") == chr(0xF05A) + '"x'
    True
    """

    def char(match: re.Match) -> str:
        if match.group(1):
            return chr(int(match.group(1), 16))
        return "" if match.group(2) == "\n" else match.group(2)

    return _ESCAPE.sub(char, text)


def declarations(body: str) -> list[tuple[str, str]]:
    """A style rule's declarations as (property, value) pairs, in order.

    Semicolons inside strings and brackets do not end a declaration; property names
    are lower-cased except custom properties (``--x``), which are case-sensitive.

    >>> declarations('color:red;content:"a;b";--Icon:var(--x, ";")')
    [('color', 'red'), ('content', '"a;b"'), ('--Icon', 'var(--x, ";")')]
    """
    parts = cssprune.split_top_level(body, ";")
    pairs = []
    for part in parts:
        name, colon, value = part.partition(":")
        name = name.strip()
        if colon and name:
            pairs.append((name if name.startswith("--") else name.lower(), value.strip()))
    return pairs


def _style_rules(rules: list[cssprune.Rule]):
    for rule in rules:
        if isinstance(rule.body, list):
            yield from _style_rules(rule.body)
        elif isinstance(rule.body, str) and not rule.at_name:
            yield rule


def icon_codepoints(css: str) -> set[int]:
    r"""Every code point that a ``content:`` declaration of the stylesheet can draw.

    A value's strings count as they are; each ``var(--name)`` in it counts with every
    definition of ``--name`` anywhere in the stylesheet (and its fallback), followed
    through further ``var()`` references. Prune the stylesheet first: then only rules
    some page can match ask for glyphs.

    Examples
    --------
    >>> css = ('html{--icon-info:"\\f05a";--icon-note:var(--icon-info)}'
    ...        '.admonition.note>.admonition-title:after{content:var(--icon-note)}')
    >>> [hex(c) for c in icon_codepoints(css)]
    ['0xf05a']
    >>> sorted(hex(c) for c in icon_codepoints(
    ...     '.fa:before{content:var(--fa)}.fa-x{--fa:"\\f002"}.fa-y{--fa:"\\e521"}'))
    ['0xe521', '0xf002']
    >>> icon_codepoints('.x:before{content:var(--nowhere, "A")}.y{--unused:"\\f000"}')
    {65}
    """
    defined: dict[str, list[str]] = {}
    contents: list[str] = []
    for rule in _style_rules(cssprune.parse(css)):
        for name, value in declarations(rule.body):
            if name.startswith("--"):
                defined.setdefault(name, []).append(value)
            elif name == "content":
                contents.append(value)
    points: set[int] = set()
    seen: set[str] = set()
    pending = list(contents)
    while pending:
        value = pending.pop()
        for match in _STRING.finditer(value):
            points.update(ord(ch) for ch in _unescape(match.group(2)))
        for match in _VAR.finditer(_STRING.sub('""', value)):
            name, fallback = match.group(1), match.group(2)
            if fallback:
                pending.append(fallback)
            if name not in seen:
                seen.add(name)
                pending.extend(defined.get(name, []))
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
