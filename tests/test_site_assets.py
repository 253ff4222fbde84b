"""The site's page weight and search-engine machinery (docs/_ext/effpt_site) does what it says."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from docutils import nodes

from effpt.machine import Machine
from effpt_site import assets, cards, cssprune, icons, images, seo

# -- cssprune ------------------------------------------------------------------------------


def _squash(css: str) -> str:
    return re.sub(r"\s+", "", re.sub(r"/\*(?!!).*?\*/", "", css, flags=re.DOTALL))


THEME_LIKE = """@charset "UTF-8";
/*! Bootstrap licence */
:root,[data-bs-theme=light]{--bs-blue:#0d6efd;--x:"{not a block}"}
html[data-theme=dark] .btn:hover,.unused-thing{color:red}
.fa-magnifying-glass,.fa-search{--fa:"\\f002"}
.fa-unused-icon{--fa:"\\f003"}
@media (min-width:960px){.navbar{display:flex}.modal-unused{display:none}}
@supports (display:grid){@media print{.d-print-none{display:none!important}}}
@font-face{font-family:Font Awesome\\ 7 Free;src:url(../vendor/fa-solid-900.woff2)}
@keyframes spin{0%{transform:rotate(0)}to{transform:rotate(1turn)}}
a[href$=".pdf"]::after{content:"}"}
.search-button-field>:not(svg,i){display:none}
"""


def test_parse_and_serialize_round_trip():
    assert _squash(cssprune.serialize(cssprune.parse(THEME_LIKE))) == _squash(THEME_LIKE)


def test_braces_in_strings_and_escapes_do_not_split_rules():
    rules = cssprune.parse(THEME_LIKE)
    preludes = [r.prelude for r in rules]
    assert 'a[href$=".pdf"]::after' in preludes
    assert rules[preludes.index('a[href$=".pdf"]::after')].body == 'content:"}"'


def test_prune_keeps_what_pages_name_and_drops_the_rest():
    present = cssprune.words(['<a class="btn navbar fa-magnifying-glass d-print-none">'])
    out = cssprune.prune(THEME_LIKE, present)
    assert "html[data-theme=dark] .btn:hover{color:red}" in out
    assert ".unused-thing" not in out
    assert "fa-unused-icon" not in out
    assert '.fa-magnifying-glass{--fa:"\\f002"}' in out  # the alias .fa-search is gone
    assert "@media (min-width:960px){.navbar{display:flex}}" in out
    assert "modal-unused" not in out
    assert "@supports (display:grid){@media print{.d-print-none" in out
    assert "@font-face" in out
    assert "@keyframes spin" in out
    assert "/*! Bootstrap licence */" in out
    # Names inside :not() never remove a selector.
    assert ".search-button-field>:not(svg,i)" not in out  # search-button-field absent
    kept = cssprune.prune(THEME_LIKE, present | {"search-button-field"})
    assert ".search-button-field>:not(svg,i){display:none}" in kept


def test_an_empty_grouping_rule_is_dropped():
    assert cssprune.prune("@media print{.gone{x:1}}.kept{y:2}", {"kept"}) == ".kept{y:2}"


def test_escaped_class_names_are_unescaped():
    assert cssprune.names_required(r".\31 0x") == {"10x"}
    assert cssprune.names_required(r".md\:flex") == {"md:flex"}
    # A name no word can spell is kept rather than guessed at.
    assert cssprune.prune(r".md\:flex{a:b}", set()) == r".md\:flex{a:b}"


@pytest.mark.parametrize("broken", [".a{color:red", "@media x{.a{b:c}", "/* open"])
def test_unbalanced_css_fails_loudly(broken):
    with pytest.raises(ValueError, match=r"unbalanced|unterminated"):
        cssprune.parse(broken)


# -- assets --------------------------------------------------------------------------------


def test_rebase_points_urls_from_the_new_sheet(tmp_path):
    (tmp_path / "_static" / "styles").mkdir(parents=True)
    source = tmp_path / "_static" / "styles" / "theme.css"
    css = ".a{background:url(../vendor/x.woff2)}.b{background:url('data:image/png;base64,AA')}"
    out = assets._rebase(css, source, tmp_path / "_static", tmp_path)
    assert 'url("vendor/x.woff2")' in out
    assert "url('data:image/png;base64,AA')" in out


def test_build_stylesheet_concatenates_in_order_and_prunes(tmp_path):
    static = tmp_path / "_static"
    static.mkdir()
    (static / "basic.css").write_text("@charset 'UTF-8';.a{x:1}.gone{y:2}", encoding="utf-8")
    (static / "theme.css").write_text(".a{x:3}", encoding="utf-8")
    css = assets.build_stylesheet([static / "basic.css", static / "theme.css"], tmp_path, {"a"})
    assert css == '@charset "UTF-8";.a{x:1}.a{x:3}'


class _Asset:
    def __init__(self, filename, priority=500, **attributes):
        self.filename, self.priority, self.attributes = filename, priority, attributes


def _context(body):
    scripts = [
        _Asset("_static/documentation_options.js", 200),
        _Asset("_static/clipboard.min.js"),
        _Asset("_static/copybutton.js"),
        _Asset("_static/sg-tags.js"),
        _Asset("", body="DOCUMENTATION_OPTIONS.pagename = 'x';"),
        _Asset("_static/already.js", defer="defer"),
    ]
    css = [_Asset("_static/pygments.css", 200), _Asset("https://cdn.example/x.css")]
    return {"body": body, "script_files": scripts, "css_files": css}


def _app():
    builder = SimpleNamespace(
        format="html",
        _orig_css_files=[
            _Asset("_static/styles/pydata-sphinx-theme.css", 200),
            _Asset("_static/pygments.css", 200),
            _Asset("_static/effpt.css"),
            _Asset("https://cdn.example/x.css"),
        ],
    )
    return SimpleNamespace(builder=builder)


def _site(tmp_path):
    """A built site with one sheet and one page, and the app that built it."""
    out = tmp_path / "html"
    (out / "_static").mkdir(parents=True)
    (out / "_static" / "basic.css").write_text(".a{x:1}.b{y:2}", encoding="utf-8")
    (out / "index.html").write_text('<p class="a">page</p>', encoding="utf-8")
    builder = SimpleNamespace(format="html", _orig_css_files=[], _css_files=[])
    return out, SimpleNamespace(builder=builder, outdir=out, doctreedir=tmp_path / "doctrees")


def test_the_stylesheet_is_made_again_only_when_its_inputs_change(tmp_path, monkeypatch):
    out, app = _site(tmp_path)
    made = []
    real = assets.build_stylesheet
    monkeypatch.setattr(assets, "build_stylesheet", lambda *a: made.append(1) or real(*a))
    sheet = out / assets.STYLESHEET
    assets.write_stylesheet(app, None)
    assert sheet.read_text(encoding="utf-8") == '@charset "UTF-8";.a{x:1}'
    assets.write_stylesheet(app, None)
    assert len(made) == 1  # nothing changed: the sheet stays as it was
    (out / "index.html").write_text('<p class="a b">page</p>', encoding="utf-8")
    assets.write_stylesheet(app, None)
    assert len(made) == 2  # a page uses one more class
    assert sheet.read_text(encoding="utf-8") == '@charset "UTF-8";.a{x:1}.b{y:2}'
    (out / "_static" / "basic.css").write_text(".a{x:3}.b{y:2}", encoding="utf-8")
    assets.write_stylesheet(app, None)
    assert len(made) == 3  # a sheet changed
    sheet.write_text("edited", encoding="utf-8")
    assets.write_stylesheet(app, None)
    assert len(made) == 4  # the output is not what was written
    sheet.unlink()
    assets.write_stylesheet(app, None)
    assert len(made) == 5
    assert sheet.read_text(encoding="utf-8") == '@charset "UTF-8";.a{x:3}.b{y:2}'


def test_site_stylesheets_in_cascade_order():
    assert assets.site_stylesheets(_app().builder) == [
        "_static/basic.css",
        "_static/styles/pydata-sphinx-theme.css",
        "_static/pygments.css",
        "_static/effpt.css",
    ]


def test_page_scripts_are_deferred_and_pruned():
    context = _context('<div class="highlight-python">')
    assets.page_assets(_app(), "page", "page.html", context, None)
    scripts = {s.filename: s.attributes for s in context["script_files"]}
    assert scripts["_static/documentation_options.js"] == {"defer": "defer"}
    assert "_static/copybutton.js" in scripts  # the page has a code block
    assert "_static/sg-tags.js" not in scripts  # it has no gallery tags
    assert scripts[""] == {"body": "DOCUMENTATION_OPTIONS.pagename = 'x';", "type": "module"}
    assert scripts["_static/already.js"] == {"defer": "defer"}
    assert [c.filename for c in context["css_files"]] == ["https://cdn.example/x.css"]
    assert context["effpt_stylesheet"] == assets.STYLESHEET


def test_pages_without_code_load_no_copy_button_and_search_keeps_its_scripts():
    context = _context("<p>prose only</p>")
    assets.page_assets(_app(), "page", "page.html", context, None)
    names = [s.filename for s in context["script_files"]]
    assert "_static/copybutton.js" not in names
    assert "_static/clipboard.min.js" not in names
    search = _context("<p>results</p>")
    assets.page_assets(_app(), "search", "search.html", search, None)
    assert next(s.attributes for s in search["script_files"]) == {}


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


# -- seo -----------------------------------------------------------------------------------


def _doctree(*children):
    document = nodes.document(None, None)
    section = nodes.section()
    section += nodes.title(text="Title")
    for child in children:
        section += child
    document += section
    return document


def test_description_is_the_first_paragraph_of_prose():
    badge = nodes.paragraph(text="Verified on torch 2.6.0 to 2.15.0", classes=["effpt-badge"])
    note = nodes.note()
    note += nodes.paragraph(text="Go to the end to download the full example code.")
    prose = nodes.paragraph(text="Autograd records the operations on tensors " * 10)
    text = seo.describe_page("p", "P", _doctree(badge, note, prose), "Effective PyTorch")
    assert text.startswith("Autograd records")
    assert len(text) <= seo.DESCRIPTION_CHARS
    assert text.endswith("…")


def test_pages_without_prose_are_described_by_what_they_are():
    assert "Search" in seo.describe_page("search", "Search", None, "X")
    assert seo.describe_page("other", "Other", _doctree(), "X") == "Other: a page of X."


def test_sitemap_lists_every_page(tmp_path):
    builder = SimpleNamespace(format="html", get_target_uri=lambda doc: f"{doc}.html")
    app = SimpleNamespace(
        builder=builder,
        outdir=str(tmp_path),
        config=SimpleNamespace(html_baseurl="https://effpt.github.io/effpt/"),
        env=SimpleNamespace(found_docs={"index", "auto_examples/basics/plot_x"}),
    )
    seo.write_sitemap(app, None)
    text = (tmp_path / "sitemap.xml").read_text(encoding="utf-8")
    assert "<loc>https://effpt.github.io/effpt/index.html</loc>" in text
    assert "<loc>https://effpt.github.io/effpt/auto_examples/basics/plot_x.html</loc>" in text


# -- images and cards ----------------------------------------------------------------------


def test_img_tag_offers_candidates_by_width():
    tag = images.img_tag(
        [("a.png", 640), ("a_2x.png", 1280), ("a_75w.png", 960)],
        0.75,
        640,
        sizes=images.sizes_for(640),
        alt='a "plot"',
    )
    assert 'srcset="a.png 640w, a_75w.png 960w, a_2x.png 1280w"' in tag
    assert 'src="a.png"' in tag
    assert 'width="640" height="480"' in tag
    assert 'loading="lazy"' in tag
    assert 'alt="a &quot;plot&quot;"' in tag


def test_a_decorative_picture_keeps_its_empty_alt():
    tag = images.img_tag([("t.png", 160)], 0.7, 160, sizes="160px", alt="")
    assert 'alt=""' in tag
    assert 'class="' not in tag


def test_resized_writes_once(tmp_path):
    from PIL import Image

    source = tmp_path / "thumb.png"
    Image.new("RGB", (400, 280), "white").save(source)
    assert images.resized(source, tmp_path / "small.png", 160) == (160, 112)
    assert images.resized(source, tmp_path / "small.png", 160) == (160, 112)


def test_family_picture_prefers_the_first_page_that_drew(tmp_path):
    (tmp_path / "thumb").mkdir()
    for stem in ("plot_a", "plot_b"):
        (tmp_path / "thumb" / f"sphx_glr_{stem}_thumb.png").write_bytes(b"png")
    (tmp_path / "sphx_glr_plot_b_001.png").write_bytes(b"png")
    picture = cards.family_picture(tmp_path, ["plot_a.py", "plot_b.py"])
    assert picture.name == "sphx_glr_plot_b_thumb.png"


# -- the build stamp (docs/_ext/effpt_site/cards.py) --------------------------------------------------------


def _build_stamp():
    return cards.build_stamp


@pytest.mark.parametrize(
    ("machine", "expected"),
    [
        (
            Machine("cpu", "x86_64 CPU (AMD EPYC)", 2, None, "2.13.0"),
            "Built on 2026-11-21 on an x86_64 CPU (AMD EPYC), 2 threads, with torch 2.13.0.",
        ),
        (
            Machine("cuda", "NVIDIA H100 80GB HBM3", None, "13.0", "2.13.0"),
            "Built on 2026-11-21 on an NVIDIA H100 80GB HBM3 (CUDA 13.0), with torch 2.13.0.",
        ),
        (
            Machine("mps", "Apple arm64 GPU (MPS)", None, None, "2.13.0"),
            "Built on 2026-11-21 on an Apple arm64 GPU (MPS), with torch 2.13.0.",
        ),
        (
            Machine("meta", "meta device", None, None, "2.13.0"),
            "Built on 2026-11-21 on a meta device, with torch 2.13.0.",
        ),
        (
            Machine("cpu", "x86_64 CPU", 1, None, "2.6.0"),
            "Built on 2026-11-21 on an x86_64 CPU, 1 thread, with torch 2.6.0.",
        ),
    ],
)
def test_build_stamp_reads_naturally(machine, expected):
    day = datetime(2026, 11, 21, tzinfo=timezone.utc)
    assert _build_stamp()(machine, day) == expected


def test_a_cuda_builds_stamp_names_the_gpu_and_its_cuda(monkeypatch):
    import torch

    from effpt import device

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _d: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    day = datetime(2026, 11, 21, tzinfo=timezone.utc)
    stamp = cards.build_stamp(device.this_machine("cuda"), day)
    assert stamp == (
        "Built on 2026-11-21 on an NVIDIA H100 80GB HBM3 (CUDA 12.8), "
        f"with torch {device.torch_version()}."
    )
