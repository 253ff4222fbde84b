"""effpt_site/layout.py: the gallery's families and pages, computed once per build.

A build asks for the example pages hundreds of times (every page's reader links,
related pages, verdict boxes...); the answer is kept on the application and computed
again only when a family header or the folder's files change.
"""

from __future__ import annotations

from minisite import family_of_one, stub_app

from effpt_site import layout


def _counting(monkeypatch):
    calls = []
    real = layout.reading_order

    def counted(folder):
        calls.append(folder)
        return real(folder)

    monkeypatch.setattr(layout, "reading_order", counted)
    return calls


def test_example_pages_reads_the_headers_once_while_they_do_not_change(tmp_path, monkeypatch):
    family_of_one(tmp_path)
    app = stub_app(tmp_path)
    calls = _counting(monkeypatch)
    first = layout.example_pages(app)
    assert layout.example_pages(app) == first == {"plot_a": "auto/fam/plot_a"}
    assert len(calls) == 1
    first["plot_x"] = "changed by a caller"  # a caller's copy: the kept value is untouched
    assert layout.example_pages(app) == {"plot_a": "auto/fam/plot_a"}


def test_example_pages_follow_a_changed_header_and_a_new_script(tmp_path, monkeypatch):
    family = family_of_one(tmp_path).parent
    app = stub_app(tmp_path)
    calls = _counting(monkeypatch)
    assert list(layout.example_pages(app)) == ["plot_a"]
    (family / "plot_b.py").write_text('"""\nB\n=\n"""\n', encoding="utf-8")
    header = family / "GALLERY_HEADER.rst"
    # the same size and (within one clock tick) the same modification time: the bytes decide
    header.write_text(header.read_text().replace("plot_a.py", "plot_b.py"), encoding="utf-8")
    assert list(layout.example_pages(app)) == ["plot_b"]
    header.write_text(header.read_text() + "   plot_a.py\n", encoding="utf-8")
    assert list(layout.example_pages(app)) == ["plot_b", "plot_a"]
    assert len(calls) == 3


def test_signature_names_files_added_removed_and_rewritten(tmp_path):
    (tmp_path / "a").write_text("1", encoding="utf-8")
    before = layout.signature(tmp_path, tmp_path / "a", tmp_path / "gone")
    (tmp_path / "a").write_text("2", encoding="utf-8")
    assert layout.signature(tmp_path, tmp_path / "a", tmp_path / "gone") != before
    (tmp_path / "b").write_text("", encoding="utf-8")
    assert layout.signature(tmp_path) != layout.signature(tmp_path / "a")
    assert layout.signature(tmp_path / "gone") == ((str(tmp_path / "gone"), None),)
