"""The execution-times page (docs/_ext/effpt_site/exec_times.py): every page that ran,
slowest first, with per-family totals, and the peak GPU memory only where it was measured.

Each test builds a small Sphinx project holding the directive and the files a gallery build
leaves behind (sphinx-gallery's ``.cost.json`` per page, the site's stamp per page); no page
is executed.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from minisite import DOCS

CONF = """
import sys
sys.path.insert(0, {ext!r})
extensions = ["effpt_site.exec_times"]
sphinx_gallery_conf = {{"examples_dirs": "../examples", "gallery_dirs": "auto"}}
effpt_memory_measured = {memory!r}
def setup(app):
    app.add_config_value("effpt_families", ["fam", "other"], "env")
    app.add_config_value("sphinx_gallery_conf", {{}}, "env")  # sphinx-gallery is not loaded
"""

#: family -> page stem -> seconds of its last run (None: never ran in this build tree).
PAGES = {"fam": {"plot_a": 1.0, "plot_b": 3.0}, "other": {"plot_c": 2.0, "plot_d": None}}


def _project(root: Path, *, memory: bool = False, ran: bool = True, peaks=None) -> Path:
    docs = root / "docs"
    docs.mkdir()
    (docs / "conf.py").write_text(CONF.format(ext=str(DOCS / "_ext"), memory=memory))
    toctree = []
    for family, pages in PAGES.items():
        source = root / "examples" / family
        source.mkdir(parents=True)
        out = docs / "auto" / family
        out.mkdir(parents=True)
        (out / "index.rst").write_text(f"{family.title()}\n=====\n", encoding="utf-8")
        toctree.append(f"auto/{family}/index")
        for stem, seconds in pages.items():
            (source / f"{stem}.py").write_text('"""\nA\n=\n"""\n', encoding="utf-8")
            (out / f"{stem}.rst").write_text(f"{stem}\n======\n", encoding="utf-8")
            toctree.append(f"auto/{family}/{stem}")
            if ran and seconds is not None:
                cost = {"time": seconds, "memory": 0}
                (out / f"{stem}.cost.json").write_text(json.dumps(cost), encoding="utf-8")
    records = docs / "auto" / "_records"
    records.mkdir()
    for stem, mib in (peaks or {}).items():
        stamp = {"executed_at": "2026-11-27 10:00 UTC", "machine": "cuda", "gpu_peak_mib": mib}
        (records / f"{stem}.stamp.json").write_text(json.dumps(stamp), encoding="utf-8")
    entries = "".join(f"   {name}\n" for name in toctree)
    (docs / "index.rst").write_text(
        f"Times\n=====\n\n.. effpt-execution-times::\n\n.. toctree::\n\n{entries}",
        encoding="utf-8",
    )
    return docs


def _build(docs: Path) -> str:
    """What the directive wrote on the built index page, as text: tags dropped, whitespace
    squashed, the page's toctree and sidebar (which list every page) left out."""
    from sphinx.application import Sphinx

    out = docs.parent / "out"
    Sphinx(docs, docs, out, docs.parent / "doctrees", "html", status=None).build()
    page = (out / "index.html").read_text(encoding="utf-8")
    body = page.split('<div class="body" role="main">', 1)[-1]
    body = body.split('<div class="toctree-wrapper', 1)[0]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_pages_are_listed_slowest_first_with_each_familys_total(tmp_path):
    text = _build(_project(tmp_path))
    assert "The whole gallery ran in 6.0 s ; the slowest page is plot_b at 3.0 s ." in text
    per_family = text.split("Per family", 1)[1].split("Per page", 1)[0]
    assert "Fam 2 4.0 s" in per_family
    assert "Other 1 2.0 s" in per_family
    per_page = text.split("Per page, slowest first", 1)[1]
    assert re.search(r"plot_b 3\.0 s plot_c 2\.0 s plot_a 1\.0 s", per_page), per_page
    assert "plot_d" not in per_page  # never ran here: not listed, not counted as 0 s


def test_a_cpu_build_says_why_it_shows_no_memory(tmp_path):
    text = _build(_project(tmp_path, peaks={"plot_b": 512.0}))
    assert "cannot be told apart from the memory of the whole build process" in text
    assert "Peak GPU memory" not in text
    assert "512 MiB" not in text


def test_a_cuda_build_shows_each_pages_peak_and_cpu_pages_as_such(tmp_path):
    text = _build(_project(tmp_path, memory=True, peaks={"plot_b": 512.4}))
    assert "cannot be told apart" not in text
    per_page = text.split("Per page, slowest first", 1)[1]
    assert "Peak GPU memory" in per_page
    assert "plot_b 3.0 s 512 MiB" in per_page
    # plot_c and plot_a have no peak in their stamp: they allocated no CUDA memory.
    assert "plot_c 2.0 s none, ran on the CPU" in per_page
    assert "plot_a 1.0 s none, ran on the CPU" in per_page


def test_a_build_tree_where_nothing_ran_says_so(tmp_path):
    text = _build(_project(tmp_path, ran=False))
    assert "No example has been executed in this build tree." in text
    assert "Per page" not in text
