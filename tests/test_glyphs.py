"""The browser test's icon check (docs/_tools/glyphs.py) names a code point its font lacks."""

from __future__ import annotations

import doctest

import glyphs
import pytest


def _font(path, cmap: dict[int, str]) -> None:
    """A WOFF2 font whose character map is ``cmap``, each glyph a square."""
    from fontTools.fontBuilder import FontBuilder
    from fontTools.pens.ttGlyphPen import TTGlyphPen

    pen = TTGlyphPen(None)
    pen.moveTo((0, 0))
    pen.lineTo((500, 0))
    pen.lineTo((500, 500))
    pen.closePath()
    names = [".notdef", *cmap.values()]
    builder = FontBuilder(1000, isTTF=True)
    builder.setupGlyphOrder(names)
    builder.setupCharacterMap(cmap)
    builder.setupGlyf({name: pen.glyph() for name in names})
    builder.setupHorizontalMetrics(dict.fromkeys(names, (600, 0)))
    builder.setupHorizontalHeader(ascent=800, descent=-200)
    builder.setupNameTable({"familyName": "Icons", "styleName": "Solid"})
    builder.setupOS2()
    builder.setupPost()
    builder.font.flavor = "woff2"
    builder.save(str(path))


BASE = "http://127.0.0.1:8000/"


@pytest.fixture
def site(tmp_path):
    """A site whose solid face has the magnifying glass but not the circle-info."""
    (tmp_path / "_static").mkdir()
    _font(tmp_path / "_static" / "solid.woff2", {0xF002: "search"})
    return tmp_path


def _found(content: str, weight: str = "900") -> dict:
    """What GLYPHS_JS returns for a page with one admonition drawing ``content``."""
    return {
        "faces": [
            {
                "family": "Font Awesome 7 Free",
                "weight": "900",
                "style": "normal",
                "urls": [f"{BASE}_static/solid.woff2"],
            },
        ],
        "asks": [
            {
                "family": "Font Awesome 7 Free",
                "weight": weight,
                "style": "normal",
                "kind": "content",
                "value": content,
                "where": "p.admonition-title::after (light)",
            }
        ],
    }


def test_doctests_pass():
    assert doctest.testmod(glyphs).failed == 0


def test_a_code_point_the_loaded_font_lacks_is_named(site):
    problems = glyphs.missing_glyphs(_found('"\uf05a"'), glyphs.site_cmaps(site, BASE))
    assert len(problems) == 1
    assert "U+F05A" in problems[0]
    assert "solid.woff2" in problems[0]
    assert "p.admonition-title::after" in problems[0]


def test_a_code_point_the_font_has_passes(site):
    assert glyphs.missing_glyphs(_found('"\uf002"'), glyphs.site_cmaps(site, BASE)) == []


def test_alternative_text_and_spaces_are_not_glyphs_of_the_icon(site):
    found = _found('"\uf002  " / "Search"')
    assert glyphs.missing_glyphs(found, glyphs.site_cmaps(site, BASE)) == []


def test_text_in_an_icon_font_is_checked_too(site):
    found = _found("")
    found["asks"][0].update(kind="text", value="Note")
    problems = glyphs.missing_glyphs(found, glyphs.site_cmaps(site, BASE))
    assert ["U+004E, U+0065, U+006F, U+0074" in p for p in problems] == [True]


def test_a_font_from_another_host_is_an_error(site):
    found = _found('"\uf05a"')
    found["faces"][0]["urls"] = ["https://example.org/solid.woff2"]
    with pytest.raises(ValueError, match=r"https://example\.org/solid\.woff2"):
        glyphs.missing_glyphs(found, glyphs.site_cmaps(site, BASE))


def test_the_nearest_weight_s_face_is_read(site):
    _font(site / "_static" / "regular.woff2", {0xF05A: "info"})
    found = _found('"\uf05a"', weight="400")
    found["faces"].append(
        {**found["faces"][0], "weight": "400", "urls": [f"{BASE}_static/regular.woff2"]}
    )
    assert glyphs.missing_glyphs(found, glyphs.site_cmaps(site, BASE)) == []
    found["asks"][0]["weight"] = "800"  # nearer 900: the solid face, which lacks it
    assert len(glyphs.missing_glyphs(found, glyphs.site_cmaps(site, BASE))) == 1
