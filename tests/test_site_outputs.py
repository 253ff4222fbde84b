"""Where a page's run leaves its records, stamp and cost (docs/_ext/effpt_site/outputs.py).

Its doctests (run by the tests session) cover records_dir, read_stamp and read_cost; these
tests, loading the module alone and finding every page's files by kind."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from effpt_site import outputs, page_checks


def test_outputs_loads_alone_as_the_archive_does_and_reads_every_stamp(tmp_path):
    """docs/_tools/archive.py loads outputs.py without the package (which imports Sphinx)."""
    import importlib.util

    path = Path(page_checks.__file__).with_name("outputs.py")
    spec = importlib.util.spec_from_file_location("effpt_site_outputs_alone", path)
    alone = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(alone)
    conf = {"src_dir": tmp_path, "gallery_dirs": "auto"}
    alone.write_stamp(conf, "plot_b", {"executed_at": "2026-11-25 05:00 UTC", "machine": "cpu"})
    alone.write_stamp(conf, "plot_a", {"executed_at": "2026-11-25 04:00 UTC", "machine": "gpu"})
    stamps = alone.stamps(conf)
    assert list(stamps) == ["plot_a", "plot_b"]
    assert stamps["plot_a"]["machine"] == "gpu"
    (tmp_path / "auto" / "fam").mkdir()
    (tmp_path / "auto" / "fam" / "plot_a.cost.json").write_text('{"time": 3.5, "memory": 0}')
    assert alone.read_cost(tmp_path, "auto/fam/plot_a").seconds == 3.5


def test_each_kind_of_file_is_found_by_page_and_pages_never_run_are_absent(tmp_path):
    """The doctests cover one stamp and one cost file; this, the per-page files' folders."""
    app = SimpleNamespace(
        srcdir=str(tmp_path), config=SimpleNamespace(sphinx_gallery_conf={"gallery_dirs": ["g"]})
    )
    assert outputs.conf_of(app)["src_dir"] == str(tmp_path)
    assert outputs.record_files(app) == {}  # no page ran: no folder, no error
    conf = outputs.conf_of(app)
    written = [
        outputs.records_file(conf, "plot_b"),
        outputs.records_file(conf, "plot_a"),
        outputs.expectations_file(conf, "plot_a"),
        outputs.claims_file(conf, "plot_c"),
    ]
    for path in written:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")
    outputs.write_stamp(conf, "plot_z", {"executed_at": "x", "machine": "cpu"})  # not a record
    records = outputs.record_files(app)
    assert list(records) == ["plot_a", "plot_b"]  # sorted by stem, the stamp not among them
    assert records["plot_a"] == tmp_path / "g" / "_records" / "plot_a.jsonl"
    assert list(outputs.expectation_files(app)) == ["plot_a"]
    assert outputs.claim_files(app) == {"plot_c": tmp_path / "g" / "_claims" / "plot_c.jsonl"}
