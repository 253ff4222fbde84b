r"""Does every icon a rendered page draws exist in the font the page loaded?

An icon font draws an icon only when the font has a glyph at the code point the CSS
asks for; otherwise the browser falls back to another font and shows a missing-glyph
box (or some unrelated character). Neither the console, the network log nor axe-core
says anything about that. :data:`GLYPHS_JS` reads, in a rendered page, the computed
``content`` and font of every ``::before`` and ``::after`` pseudo-element (and the text of
every element) whose first font family is a web font, in light and in dark mode, with
the ``@font-face`` rules the page's stylesheets hold; :func:`missing_glyphs` picks the
face the browser would use for each (family, then the nearest weight, then the style),
reads that font's character map with fontTools and names every code point it lacks.
Whitespace is not checked: it draws nothing in any font.

The browser test (``docs/_tools/browser_check.py``, ``nox -s browser``) runs this on
every page of both editions. Run alone, it checks only glyphs::

    .nox/browser/bin/python docs/_tools/glyphs.py docs/_build/html
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import unquote, urlparse

#: What a page asks of its web fonts, as {faces: [...], asks: [...]}. Each face is an
#: ``@font-face`` rule (family, weight, style, absolute font URLs); each ask is one
#: distinct (family, weight, style, computed content or text) with where it was found.
GLYPHS_JS = r"""
const unquote = s => s.trim().replace(/^(["'])(.*)\1$/, '$2');
const faces = [];
const walk = (rules, href) => {
  for (const rule of rules) {
    if (rule instanceof CSSFontFaceRule) {
      const src = rule.style.getPropertyValue('src');
      faces.push({
        family: unquote(rule.style.getPropertyValue('font-family')),
        weight: rule.style.getPropertyValue('font-weight') || '400',
        style: rule.style.getPropertyValue('font-style') || 'normal',
        urls: Array.from(src.matchAll(/url\(\s*(["']?)([^"')]+)\1\s*\)/g),
                         m => new URL(m[2], href || document.baseURI).href),
      });
    } else if (rule.cssRules) {
      walk(rule.cssRules, href);
    }
  }
};
for (const sheet of document.styleSheets) {
  let rules;
  try { rules = sheet.cssRules; } catch (e) { continue; }
  walk(rules, sheet.href);
}
const families = new Set(faces.map(f => f.family.toLowerCase()));
const first = style => unquote(style.fontFamily.split(',')[0]);
const describe = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
  Array.from(el.classList).slice(0, 3).map(c => '.' + c).join('');
const asks = new Map();
const note = (style, kind, value, where) => {
  const family = first(style);
  if (!families.has(family.toLowerCase())) return;
  const ask = {family, weight: style.fontWeight, style: style.fontStyle, kind, value, where};
  const key = JSON.stringify([family, ask.weight, ask.style, kind, value]);
  if (!asks.has(key)) asks.set(key, ask);
};
const root = document.documentElement;
const mode = root.dataset.theme;
try {
  for (const theme of ['light', 'dark']) {
    root.dataset.theme = theme;
    for (const el of document.querySelectorAll('body *')) {
      for (const pseudo of ['::before', '::after']) {
        const style = getComputedStyle(el, pseudo);
        if (style.content && style.content !== 'none' && style.content !== 'normal') {
          note(style, 'content', style.content, describe(el) + pseudo + ' (' + theme + ')');
        }
      }
      const text = Array.from(el.childNodes).filter(n => n.nodeType === Node.TEXT_NODE)
        .map(n => n.textContent).join('');
      if (text.trim()) note(getComputedStyle(el), 'text', text, describe(el) + ' (' + theme + ')');
    }
  }
} finally {
  if (mode === undefined) delete root.dataset.theme; else root.dataset.theme = mode;
}
return {faces, asks: Array.from(asks.values())};
"""

_STRING = re.compile(r"""(["'])((?:\\.|(?!\1)[^\\])*)\1""", re.DOTALL)
_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})\s?|(.))", re.DOTALL)


def content_text(computed: str) -> str:
    r"""The characters a computed ``content`` value draws: its strings, before any ``/ alt``.

    Counters, ``attr()`` and quotes keywords draw text in the element's font; they are
    not an icon's code point and are left out.

    Examples
    --------
    >>> content_text('"\\f05a"') == chr(0xF05A)
    True
    >>> content_text('"" / "Note"')
    ''
    >>> content_text('"[" counter(x) "]"')
    '[]'
    >>> content_text('"a\\"b"')
    'a"b'
    """
    out, i = [], 0
    while i < len(computed):
        char = computed[i]
        if char in "\"'":
            match = _STRING.match(computed, i)
            if match is None:
                break
            out.append(_ESCAPE.sub(_unescape_one, match.group(2)))
            i = match.end()
        elif char == "/":
            break  # what follows is the alternative text for screen readers
        else:
            i += 1
    return "".join(out)


def _unescape_one(match: re.Match) -> str:
    if match.group(1):
        return chr(int(match.group(1), 16))
    return "" if match.group(2) == "\n" else match.group(2)


def _weights(value: str) -> tuple[int, int]:
    """An ``@font-face`` weight (``900``, ``bold``, ``100 900``) as a range."""
    named = {"normal": 400, "bold": 700}
    parts = [named.get(p) or int(float(p)) for p in value.split()] or [400]
    return parts[0], parts[-1]


def pick_face(faces: list[dict], family: str, weight: str, style: str) -> dict | None:
    """The ``@font-face`` a browser uses for this family, weight and style, as CSS matches.

    The same family (case-insensitive); the face whose weight range holds the weight, or
    else the nearest one; the same style when there is one.

    >>> faces = [{"family": "Icons", "weight": "400", "style": "normal", "urls": ["r"]},
    ...          {"family": "Icons", "weight": "900", "style": "normal", "urls": ["s"]}]
    >>> pick_face(faces, "icons", "900", "normal")["urls"]
    ['s']
    >>> pick_face(faces, "Icons", "700", "italic")["urls"]
    ['s']
    >>> pick_face(faces, "Other", "400", "normal") is None
    True
    """
    same = [f for f in faces if f["family"].lower() == family.lower()]
    if not same:
        return None
    wanted = int(float(weight)) if weight.replace(".", "").isdigit() else _weights(weight)[0]

    def distance(face: dict) -> tuple[int, int]:
        low, high = _weights(face["weight"])
        gap = 0 if low <= wanted <= high else min(abs(wanted - low), abs(wanted - high))
        return gap, face["style"] != style

    return min(same, key=distance)


def missing_glyphs(found: dict, cmap_of: Callable[[str], set[int]]) -> list[str]:
    """One line per code point a page asks of a web font that the font lacks.

    ``found`` is what :data:`GLYPHS_JS` returned; ``cmap_of(url)`` gives the code points
    of the font at ``url``.
    """
    problems = []
    for ask in found["asks"]:
        text = content_text(ask["value"]) if ask["kind"] == "content" else ask["value"]
        points = sorted({ord(ch) for ch in text if not ch.isspace()})
        if not points:
            continue
        face = pick_face(found["faces"], ask["family"], ask["weight"], ask["style"])
        if face is None or not face["urls"]:
            continue
        url = face["urls"][0]
        have = cmap_of(url)
        lacking = [p for p in points if p not in have]
        if lacking:
            codes = ", ".join(f"U+{p:04X}" for p in lacking)
            problems.append(
                f"missing glyph: {ask['where']} asks {ask['family']!r} "
                f"(weight {ask['weight']}) for {codes}, which {Path(urlparse(url).path).name} "
                "lacks"
            )
    return problems


def site_cmaps(site: Path, base: str) -> Callable[[str], set[int]]:
    """``cmap_of`` for fonts served from ``site`` at ``base``, each read once."""
    from fontTools.ttLib import TTFont  # noqa: PLC0415  (the browser group has it)

    cache: dict[str, set[int]] = {}

    def cmap_of(url: str) -> set[int]:
        if url not in cache:
            if not url.startswith(base):
                msg = f"font {url} is not on the local server {base}"
                raise ValueError(msg)
            path = site / unquote(urlparse(url).path).lstrip("/")
            with TTFont(path) as font:
                cache[url] = set(font.getBestCmap() or {})
        return cache[url]

    return cmap_of


def check_page(driver, cmap_of: Callable[[str], set[int]]) -> list[str]:
    """The missing glyphs of the page open in ``driver``."""
    return missing_glyphs(driver.execute_script(GLYPHS_JS), cmap_of)


def site_pages(site: Path) -> Iterable[str]:
    """Every HTML page of the built site, both editions, as paths relative to ``site``."""
    for path in sorted(site.rglob("*.html")):
        relative = path.relative_to(site).as_posix()
        if not relative.startswith(("_", "zh_CN/_")):
            yield relative


def main() -> int:
    from chromium import serve, webdriver  # noqa: PLC0415
    from selenium.webdriver.support.ui import WebDriverWait  # noqa: PLC0415

    site = Path(sys.argv[1])
    server, base = serve(site)
    driver = webdriver(f"/tmp/effpt-chromium-{time.time_ns()}")
    cmap_of = site_cmaps(site, base)
    failed = 0
    try:
        pages = list(site_pages(site))
        for path in pages:
            driver.get(f"{base}{path}")
            WebDriverWait(driver, 30).until(
                lambda d: d.execute_script("return document.readyState") == "complete"
            )
            problems = check_page(driver, cmap_of)
            failed += bool(problems)
            print(f"{'FAIL' if problems else 'ok  '} {path}", flush=True)
            for problem in problems:
                print(f"  - {problem}")
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
    print(f"\n{len(pages)} pages, {failed} with missing glyphs")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
