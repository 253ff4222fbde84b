"""Where the gallery's pages live and in which order (docs/_ext/effpt_site/layout.py).

A page's stem names only a page of a listed family; the reading order follows the family's
header and stops the build on a listed script that does not exist.
"""

from __future__ import annotations

import pytest
from minisite import family_of_one, stub_app

from effpt_site.layout import ReadingOrder


@pytest.fixture
def app(tmp_path):
    family_of_one(tmp_path)
    (tmp_path / "docs" / "auto" / "_records").mkdir(parents=True)
    return stub_app(tmp_path)


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
