"""One small real build that the tests assert on (the ``built_site`` fixture, tests/conftest.py).

sphinx-build of a one-page gallery (tests/minisite.py) whose page sphinx-gallery really
executes, with the site's hooks around it and the extension modules of BUILT_EXTENSIONS;
built once per test session, read by every test here. Each module's own tests are in
tests/test_site_<module>.py; these check that the modules work together on one page as
the site's build runs them: what the run left, what the page shows, what the grid shows.
"""

from __future__ import annotations

import html
import json
import re

import torch
from minisite import BUILT_PAGE

from effpt_site import outputs


def _text(page: str) -> str:
    """A page's body as text: tags dropped, entities decoded, whitespace squashed."""
    body = page.split('<div class="body" role="main">', 1)[-1]
    body = body.split('<div class="sphinxsidebar', 1)[0]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def _page(built_site) -> str:
    _, out = built_site
    return (out / "auto" / "fam" / "plot_sum.html").read_text(encoding="utf-8")


def _conf(built_site) -> dict:
    docs, _ = built_site
    return {"src_dir": docs, "gallery_dirs": "auto"}


def test_the_page_ran_and_its_output_is_on_its_page(built_site):
    docs, _ = built_site
    assert "the sum of 1..10 is 55" in _text(_page(built_site))
    cost = outputs.read_cost(docs, "auto/fam/plot_sum")
    assert cost is not None, "sphinx-gallery left no cost file: the page did not run"
    assert cost.seconds >= 0


def test_the_sites_hook_stamped_the_run_with_this_machine_and_the_page_shows_it(built_site):
    (stem,) = outputs.stamps(_conf(built_site))  # one page, one stamp
    assert stem == "plot_sum"
    stamp = outputs.read_stamp(_conf(built_site), stem)
    assert stamp["machine"]["torch"] == torch.__version__.split("+")[0]
    assert stamp["machine"]["kind"] == "cpu"  # the page ran on the CPU (it names device="cpu")
    text = _text(_page(built_site))
    assert f"Executed {stamp['executed_at']} on {stamp['machine']['name']}" in text


def test_the_badge_is_under_the_title_and_the_stamp_after_the_summary(built_site):
    page = _page(built_site)
    title = page.index("</h1>")
    badge = page.index('class="effpt-badge"')
    intro = page.index("This page compares two sums")
    assert title < badge < intro
    stamp = page.index('class="effpt-stamp')
    assert page.index("The verdict is printed.") < stamp < page.index("sphx-glr-footer")
    assert page.count('class="effpt-badge"') == page.count('class="effpt-stamp') == 1


def test_the_pages_expectation_is_recorded_boxed_after_its_output_and_in_the_grid(built_site):
    _, out = built_site
    statement = "the fixture sum beats the loop"
    assert statement in BUILT_PAGE
    lines = outputs.expectations_file(_conf(built_site), "plot_sum").read_text().splitlines()
    (recorded,) = (json.loads(line) for line in lines)
    assert (recorded["statement"], recorded["verdict"]) == (statement, "holds here")
    page = _page(built_site)
    printed = page.index(f"Expectation: {statement}")
    box = page.index('class="effpt-verdict-box')
    assert printed < box < page.index("The verdict is printed.")
    assert "holds here" in _text(page[box:])
    grid = _text((out / "measurements.html").read_text(encoding="utf-8"))
    assert "1 expectations: 1 hold here, 0 do not, 0 inconclusive." in grid
    assert f"Sum faster {statement} above 1× 2.0× (1.9–2.1) holds" in grid


def test_a_page_that_timed_nothing_and_checked_no_claim_leaves_empty_files(built_site):
    conf = _conf(built_site)
    assert outputs.records_file(conf, "plot_sum").read_text() == ""
    assert outputs.claims_file(conf, "plot_sum").read_text() == ""
