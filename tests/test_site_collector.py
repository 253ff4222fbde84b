"""docs/_ext/effpt_site/collector.py: the collector relaxed once the gallery has run."""

from __future__ import annotations

import gc
import json

from minisite import build, one_page_gallery

from effpt_site import collector

#: The page writes the thresholds it ran under, for the test to read.
PAGE = '''"""
Thresholds
==========
"""
import gc, json, pathlib

pathlib.Path({seen!r}).write_text(json.dumps(gc.get_threshold()))
'''

#: An extension beside conf.py records the thresholds while the pages are read.
RECORDER = """
import gc, json, pathlib

def _record(app, docname, source):
    pathlib.Path({seen!r}).write_text(json.dumps(gc.get_threshold()))

def setup(app):
    app.connect("source-read", _record)
"""


def test_pages_run_under_the_usual_collector_and_are_read_under_the_relaxed_one(tmp_path):
    ran, read = tmp_path / "ran.json", tmp_path / "read.json"
    docs = one_page_gallery(
        tmp_path,
        "plot_a.py",
        PAGE.format(seen=str(ran)),
        extensions=["sphinx_gallery.gen_gallery", "effpt_site.collector"],
        conf_extra=f"sys.path.insert(0, {str(tmp_path)!r})\nextensions.append('recorder')",
    )
    (tmp_path / "recorder.py").write_text(RECORDER.format(seen=str(read)), encoding="utf-8")
    before = gc.get_threshold()
    build(docs, tmp_path / "html")
    assert tuple(json.loads(ran.read_text())) == before  # executed before the reading began
    assert tuple(json.loads(read.read_text())) == collector.BUILD_THRESHOLDS
    assert gc.get_threshold() == before  # given back when the build finished


def test_a_build_that_reads_twice_gives_back_the_first_thresholds():
    class App:
        pass

    app, before = App(), gc.get_threshold()
    try:
        collector.relax(app, None, [])
        collector.relax(app, None, [])  # Sphinx reads again when a transform asks
        collector.restore(app, None)
        assert gc.get_threshold() == before
    finally:
        gc.set_threshold(*before)
