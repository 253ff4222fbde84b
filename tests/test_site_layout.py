"""Where the gallery's pages live and in which order (docs/_ext/effpt_site/layout.py).

A page's stem names only a page of a listed family; the reading order follows the family's
header and stops the build on a listed script that does not exist.
"""

from __future__ import annotations

import pytest
from minisite import family_of_one, stub_app

from effpt_site import layout
from effpt_site.layout import ReadingOrder


def test_page_stem_names_a_gallery_pages_example_and_nothing_else(app):
    from effpt_site.layout import page_stem

    assert page_stem(app, "auto/fam/plot_a") == "plot_a"
    assert page_stem(app, "index") is None
    assert page_stem(app, "auto/other/plot_a") is None  # a family the site does not list


def test_reading_order_follows_the_header(tmp_path):
    (tmp_path / "GALLERY_HEADER.rst").write_text(
        "Title\n-----\n\nText.\n\n.. reading order:\n   plot_b.py\n   plot_a.py\n"
    )
    key = ReadingOrder(str(tmp_path))
    assert sorted(["x/plot_a.py", "x/plot_b.py"], key=key) == ["x/plot_b.py", "x/plot_a.py"]
    with pytest.raises(ValueError, match=r"plot_c\.py is not listed"):
        key("x/plot_c.py")


def test_reading_order_without_a_list_sorts_by_name(tmp_path):
    key = ReadingOrder(str(tmp_path))
    assert sorted(["plot_b.py", "plot_a.py"], key=key) == ["plot_a.py", "plot_b.py"]


def test_a_listed_script_that_does_not_exist_stops_the_build(tmp_path):
    from effpt_site.layout import reading_order

    (tmp_path / "GALLERY_HEADER.rst").write_text(
        "Title\n-----\n\nText.\n\n.. reading order:\n   plot_a.py\n   plot_gone.py\n"
    )
    (tmp_path / "plot_a.py").write_text('"""\nA\n=\n"""\n')
    with pytest.raises(ValueError, match=r"lists plot_gone\.py .* no such script"):
        reading_order(tmp_path)
    (tmp_path / "plot_gone.py").write_text('"""\nGone\n====\n"""\n')
    assert reading_order(tmp_path) == ["plot_a.py", "plot_gone.py"]


# -- computed once per build -------------------------------------------------------


def test_example_pages_reads_the_headers_once_while_they_do_not_change(tmp_path, calls_to):
    family_of_one(tmp_path)
    app = stub_app(tmp_path)
    calls = calls_to(layout, "reading_order")
    first = layout.example_pages(app)
    assert layout.example_pages(app) == first == {"plot_a": "auto/fam/plot_a"}
    assert len(calls) == 1
    first["plot_x"] = "changed by a caller"  # a caller's copy: the kept value is untouched
    assert layout.example_pages(app) == {"plot_a": "auto/fam/plot_a"}


def test_example_pages_follow_a_changed_header_and_a_new_script(tmp_path, calls_to):
    family = family_of_one(tmp_path).parent
    app = stub_app(tmp_path)
    calls = calls_to(layout, "reading_order")
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
