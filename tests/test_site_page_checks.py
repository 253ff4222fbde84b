"""The gallery pages' build checks (docs/_ext/effpt_site/page_checks.py) fail loudly and name what
is wrong.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from minisite import stub_app
from sphinx.errors import ExtensionError

from effpt_site import page_checks


def _page(tmp_path, docstring_tail, body):
    page = tmp_path / "plot_x.py"
    page.write_text(f'"""\nT\n=\n\nIntro.\n\n{docstring_tail}\n"""\n\n{body}')
    return page


SUMMARY = "\n# %%\n# Summary\n# -------\n# - done\n"


def test_page_without_closing_summary_fails(tmp_path):
    page = _page(tmp_path, "", "# %%\n# Details\nx = 1\n")
    with pytest.raises(
        ExtensionError, match=r"plot_x\.py: the last cell must be a closing summary"
    ):
        page_checks.check_example_source(page)
    page.write_text(page.read_text() + SUMMARY)
    page_checks.check_example_source(page)  # no error


def test_a_page_that_states_its_own_install_line_fails(tmp_path):
    # The box states the line for the version the site serves; a page's own goes stale.
    page_checks.check_example_source(_page(tmp_path, "", "x = 1\n" + SUMMARY))  # no error
    stale = "To run this page on its own: ``pip install effpt==0.0.1``, then\n``python plot_x.py``."
    page = _page(tmp_path, stale, "x = 1\n" + SUMMARY)
    with pytest.raises(
        ExtensionError,
        match=r"plot_x\.py: the page states an install line of its own \(``pip install effpt==0\.0\.1``\)",
    ):
        page_checks.check_example_source(page)
    unpinned = "Install it: ``pip install --upgrade effpt``."
    with pytest.raises(ExtensionError, match="states an install line of its own"):
        page_checks.check_example_source(_page(tmp_path, unpinned, "x = 1\n" + SUMMARY))


def test_example_that_raised_is_reported_as_raised(tmp_path):
    script = tmp_path / "plot_x.py"
    script.write_text("raise ValueError('boom')\n")
    conf = {"failing_examples": {str(script): "Traceback...\nValueError: boom\n"}}
    app = SimpleNamespace(config=SimpleNamespace(sphinx_gallery_conf=conf))
    with pytest.raises(
        ExtensionError, match=r"auto/fam/plot_x: the example raised: ValueError: boom"
    ):
        page_checks.check_not_failed(app, script, "auto/fam/plot_x")


def test_figure_that_did_not_render_fails(tmp_path):
    broken = tmp_path / "sphx_glr_plot_x_001.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    with pytest.raises(ExtensionError, match=r"auto/fam/plot_x: figure sphx_glr_plot_x_001\.png"):
        page_checks.check_image(broken, "auto/fam/plot_x")


def _run_app(app, plot_gallery="True", pattern="/plot_", not_executed=None):
    app.config.plot_gallery = plot_gallery
    app.config.effpt_not_executed = not_executed or {}
    app.config.sphinx_gallery_conf["filename_pattern"] = pattern
    return app


STAMP = {"executed_at": "2026-11-25 04:00 UTC", "machine": "cpu"}


def test_an_executed_page_keeps_its_stamp(app):
    reason = page_checks.not_executed_reason(_run_app(app), "auto/fam/plot_a", "plot_a", 1.5, STAMP)
    assert reason is None


def test_zero_time_without_a_reason_fails(app):
    with pytest.raises(ExtensionError, match=r"auto/fam/plot_a: the example reports zero"):
        page_checks.not_executed_reason(_run_app(app), "auto/fam/plot_a", "plot_a", 0.0, None)
    listed = _run_app(app, not_executed={"plot_a": "needs a GPU"})
    assert page_checks.not_executed_reason(listed, "auto/fam/plot_a", "plot_a", 0.0, None) == (
        "needs a GPU"
    )


def test_an_executed_page_without_the_sites_hook_fails(app):
    with pytest.raises(ExtensionError, match=r"without the site's gallery hook \(no plot_a\.stamp"):
        page_checks.not_executed_reason(_run_app(app), "auto/fam/plot_a", "plot_a", 1.5, None)


def test_pages_a_restricted_or_no_exec_build_did_not_run_say_why(app):
    restricted = _run_app(app, pattern="/plot_.*other")
    reason = page_checks.not_executed_reason(restricted, "auto/fam/plot_a", "plot_a", 0.0, None)
    assert reason == "this build executed only examples matching '/plot_.*other'"
    no_exec = _run_app(app, plot_gallery="0")
    reason = page_checks.not_executed_reason(no_exec, "auto/fam/plot_a", "plot_a", 0.0, None)
    assert reason == "this build executed no examples (--no-exec)"
    # A --no-exec build shows the page's last execution: its stamp stands.
    assert page_checks.not_executed_reason(no_exec, "auto/fam/plot_a", "plot_a", 2.0, STAMP) is None


def test_prose_over_the_limits_fails_naming_page_paragraph_and_count(tmp_path):
    long_paragraph = "# " + " ".join(["word"] * 121) + "\n"
    page = _page(tmp_path, "", "# %%\n# Start here\n#\n" + long_paragraph + "x = 1\n" + SUMMARY)
    with pytest.raises(
        ExtensionError,
        match=r"plot_x\.py: a paragraph of 121 words \(over 120\) starting 'word word",
    ):
        page_checks.check_prose_length(page)
    # Many short paragraphs: each within the limit, the page over 1,800 words.
    cells = "".join(
        f"# %%\n# Part {i}\n#\n# " + " ".join(["w"] * 100) + f"\nx{i} = {i}\n" for i in range(19)
    )
    page = _page(tmp_path, "", cells + SUMMARY)
    with pytest.raises(ExtensionError, match=r"plot_x\.py: 19\d\d words of prose \(over 1800\)"):
        page_checks.check_prose_length(page)
    # A directive's fields (the before-you-start box) are not a paragraph of prose.
    box = ".. effpt-before-you-start::\n   :learn: " + " ".join(["w"] * 130)
    page_checks.check_prose_length(_page(tmp_path, box, "x = 1\n" + SUMMARY))  # no error
    # Code and output do not count: a long code cell passes.
    page = _page(tmp_path, "", "# %%\n# Code\n" + "y = 1\n" * 2000 + SUMMARY)
    page_checks.check_prose_length(page)  # no error


def _gallery_with_thumbnails(tmp_path, pictures: dict[str, bytes], ran=None):
    """A two-family gallery whose pages (``family/stem``) have the thumbnails given."""
    families = sorted({key.split("/")[0] for key in pictures})
    for family in families:
        folder = tmp_path / "examples" / family
        folder.mkdir(parents=True)
        stems = [key.split("/")[1] for key in pictures if key.startswith(family + "/")]
        order = "".join(f"   {s}.py\n" for s in stems)
        (folder / "GALLERY_HEADER.rst").write_text(
            f"{family}\n---\n\nIntro.\n\n.. reading order:\n{order}", encoding="utf-8"
        )
    for key, picture in pictures.items():
        family, stem = key.split("/")
        (tmp_path / "examples" / family / f"{stem}.py").write_text('"""\nA\n=\n"""\n')
        out = tmp_path / "docs" / "auto" / family
        (out / "images" / "thumb").mkdir(parents=True, exist_ok=True)
        (out / "images" / "thumb" / f"sphx_glr_{stem}_thumb.png").write_bytes(picture)
        if ran is None or key in ran:
            (out / f"{stem}.cost.json").write_text('{"time": 1.5, "memory": 0}')
    return stub_app(tmp_path, families)


def test_two_pages_sharing_a_thumbnail_fail_the_build_naming_both(tmp_path):
    placeholder = b"\x89PNG the placeholder"
    app = _gallery_with_thumbnails(
        tmp_path,
        {"perf/plot_a": placeholder, "perf/plot_b": b"\x89PNG b", "train/plot_c": placeholder},
    )
    with pytest.raises(
        ExtensionError, match=r"share one thumbnail: auto/perf/plot_a, auto/train/plot_c"
    ):
        page_checks.check_thumbnails(app, None)


def test_distinct_thumbnails_and_pages_this_build_never_ran_pass(tmp_path):
    same = b"\x89PNG same"
    app = _gallery_with_thumbnails(
        tmp_path, {"perf/plot_a": b"\x89PNG a", "perf/plot_b": same, "train/plot_c": same}
    )
    with pytest.raises(ExtensionError):
        page_checks.check_thumbnails(app, None)
    # a page that never ran shows sphinx-gallery's placeholder until it runs: not counted
    app = _gallery_with_thumbnails(
        tmp_path / "restricted",
        {"perf/plot_a": b"\x89PNG a", "perf/plot_b": same, "train/plot_c": same},
        ran={"perf/plot_a", "perf/plot_b"},
    )
    page_checks.check_thumbnails(app, None)
