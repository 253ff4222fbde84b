"""The icon font (docs/_ext/effpt_site/icons.py) is cut to the icons the stylesheet asks for."""

from __future__ import annotations

import re
from pathlib import Path

from effpt_site import cssprune, icons

# -- icons ---------------------------------------------------------------------------------


def _icon_font(path):
    """A font with three glyphs, like an icon font's private-use code points."""
    from fontTools.fontBuilder import FontBuilder
    from fontTools.pens.ttGlyphPen import TTGlyphPen

    def square():
        pen = TTGlyphPen(None)
        pen.moveTo((0, 0))
        pen.lineTo((500, 0))
        pen.lineTo((500, 500))
        pen.closePath()
        return pen.glyph()

    names = [".notdef", "search", "moon", "sun"]
    builder = FontBuilder(1000, isTTF=True)
    builder.setupGlyphOrder(names)
    builder.setupCharacterMap({0xF002: "search", 0xF186: "moon", 0xF185: "sun"})
    builder.setupGlyf({name: square() for name in names})
    builder.setupHorizontalMetrics(dict.fromkeys(names, (600, 0)))
    builder.setupHorizontalHeader(ascent=800, descent=-200)
    builder.setupNameTable({"familyName": "Icons", "styleName": "Regular"})
    builder.setupOS2()
    builder.setupPost()
    builder.save(str(path))


def test_a_font_is_cut_to_the_code_points_asked_for(tmp_path):
    from fontTools.ttLib import TTFont

    _icon_font(tmp_path / "icons.ttf")
    kept = icons.subset_font(tmp_path / "icons.ttf", tmp_path / "cut.ttf", {0xF002}, flavor=None)
    assert kept == 2  # .notdef and the magnifying glass
    with TTFont(tmp_path / "cut.ttf") as font:
        assert set(font.getBestCmap()) == {0xF002}


def test_the_stylesheet_points_at_the_cut_font(tmp_path):
    # WOFF2 needs brotli: the test group includes the assets group, so this never skips.
    from fontTools.ttLib import TTFont

    _icon_font(tmp_path / "icons.ttf")
    with TTFont(tmp_path / "icons.ttf") as font:
        font.flavor = "woff2"
        font.save(tmp_path / "icons.woff2")
    css = (
        '.fa:before{content:var(--fa)}.fa-magnifying-glass{--fa:"\\f002"}'
        "@font-face{font-family:I;src:url(icons.woff2)}"
    )
    out = icons.subset_icon_fonts(css, tmp_path / "site.css")
    (name,) = re.findall(r'url\("([^"]+)"\)', out)
    assert name.startswith("effpt-icons-icons-")
    with TTFont(tmp_path / name) as font:
        assert set(font.getBestCmap()) == {0xF002}


def test_icons_reached_through_custom_properties_are_asked_for():
    # The theme's admonition icons: content names a property, which names another.
    css = (
        'html{--pst-icon-info-circle:"\\f05a";--pst-icon-bell:"\\f0f3";'
        "--pst-icon-admonition-note:var(--pst-icon-info-circle);"
        "--pst-icon-admonition-default:var(--pst-icon-bell)}"
        ".admonition>.admonition-title:after{content:var(--pst-icon-admonition-default)}"
        ".admonition.note>.admonition-title:after{content:var(--pst-icon-admonition-note)}"
    )
    assert icons.icon_codepoints(css) == {0xF05A, 0xF0F3}


def test_a_property_no_content_uses_asks_for_nothing():
    css = 'html{--pst-icon-pencil:"\\f303"}.x:after{content:"\\f05a" / ""}'
    assert icons.icon_codepoints(css) == {0xF05A}


def test_declarations_split_outside_strings_and_brackets():
    assert icons.declarations('content:";" ; --a:var(--b, url(x;y));Color:red') == [
        ("content", '";"'),
        ("--a", "var(--b, url(x;y))"),
        ("color", "red"),
    ]


def _theme_file(*parts):
    import pydata_sphinx_theme

    root = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme"
    return root.joinpath("static", *parts)


def test_the_theme_s_note_keeps_its_icon_in_the_cut_font(tmp_path):
    """A page with a note (sphinx-gallery's download note is one) gets its circle-info."""
    from fontTools.ttLib import TTFont

    css = _theme_file("styles", "pydata-sphinx-theme.css").read_text(encoding="utf-8")
    info = re.search(r"--pst-icon-info-circle:\s*\"(.)\"", css).group(1)
    words = cssprune.words(['<div class="admonition note"><p class="admonition-title">'])
    pruned = cssprune.prune(css, words)
    assert ord(info) in icons.icon_codepoints(pruned)
    icons.subset_font(
        _theme_file("vendor", "fontawesome", "webfonts", "fa-solid-900.woff2"),
        tmp_path / "cut.woff2",
        icons.icon_codepoints(pruned),
    )
    with TTFont(tmp_path / "cut.woff2") as font:
        assert ord(info) in font.getBestCmap()


def test_a_stylesheet_without_icons_is_left_alone(tmp_path):
    css = "@font-face{font-family:X;src:url(x.woff2)}"
    assert icons.subset_icon_fonts(css, tmp_path / "site.css") == css
