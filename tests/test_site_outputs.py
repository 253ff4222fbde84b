"""Where a page's run leaves its records, stamp and cost (docs/_ext/effpt_site/outputs.py)."""

from __future__ import annotations

from pathlib import Path

from effpt_site import page_checks


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
