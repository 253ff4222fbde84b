"""The site's page weight (docs/_ext/effpt_site/assets.py): one pruned stylesheet, deferred
and pruned scripts, made again only when their inputs change.
"""

from __future__ import annotations

from types import SimpleNamespace

from effpt_site import assets

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


def test_a_page_is_read_for_its_words_again_only_when_it_changed(tmp_path, monkeypatch):
    from effpt_site import cssprune

    out, cache = tmp_path / "site", tmp_path / "words.json"
    (out / "_static").mkdir(parents=True)
    (out / "a.html").write_text('<p class="one">x</p>', encoding="utf-8")
    (out / "b.html").write_text('<p class="two">x</p>', encoding="utf-8")
    (out / "_static" / "s.js").write_text("three()", encoding="utf-8")
    first = assets.site_words(out, cache)
    assert {"one", "two", "three"} <= first
    read = []
    words = cssprune.words
    monkeypatch.setattr(cssprune, "words", lambda texts: read.append(1) or words(texts))
    assert assets.site_words(out, cache) == first
    assert read == []  # nothing changed: nothing read
    (out / "b.html").write_text('<p class="four">x!</p>', encoding="utf-8")
    (out / "a.html").unlink()
    again = assets.site_words(out, cache)
    assert read == [1]  # b.html alone
    assert "four" in again
    assert not {"one", "two"} & again
    assert again == assets.site_words(out)  # the same as reading every file
