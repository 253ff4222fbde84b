"""Related pages and the index of torch names (docs/_ext/effpt_site/related.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


# `conf` and `site_app`: tests/conftest.py.


# -- Related pages and the index of torch names ------------------------------------------


def test_related_pages_are_other_gallery_pages_of_this_site(site_app):
    from effpt_site import related

    paths = related.scripts(site_app)
    assert all(path.is_file() for path in paths.values())
    recommended = related.recommend(paths)
    assert set(recommended) == set(paths)
    for doc, others in recommended.items():
        assert len(others) == min(related.RELATED, len(paths) - 1)
        assert doc not in others
        assert set(others) <= set(paths)


def test_related_pages_are_fitted_again_only_when_a_script_changed(tmp_path, monkeypatch):
    import shutil

    from sphinx_gallery import recommender

    from effpt_site import related

    examples = sorted((ROOT / "examples").glob("*/plot_*.py"))[:6]
    paths = {}
    for path in examples:
        shutil.copy(path, tmp_path / path.name)
        paths[f"auto/{path.stem}"] = tmp_path / path.name
    cache = tmp_path / "related.json"
    fits = []
    model = recommender.ExampleRecommender
    monkeypatch.setattr(recommender, "ExampleRecommender", lambda **k: fits.append(1) or model(**k))
    first = related.recommend(paths, cache=cache)
    assert related.recommend(paths, cache=cache) == first
    assert len(fits) == 1  # the scripts are as they were
    changed = paths["auto/" + examples[0].stem]
    changed.write_text(examples[1].read_text(encoding="utf-8"), encoding="utf-8")
    again = related.recommend(paths, cache=cache)
    assert len(fits) == 2
    assert again == related.recommend(paths)  # the same as fitting without a cache


def test_torch_index_keeps_torch_names_and_maps_them_to_pages(tmp_path):
    from effpt_site import related

    docs = tmp_path / "docs"
    target = docs / "auto_examples" / "basics"
    entry = ["plot_a.py", str(tmp_path / "examples" / "basics"), str(target), "i", "A"]
    other = ["plot_b.py", str(tmp_path / "examples" / "basics"), str(target), "i", "B"]
    backrefs = {
        "torch.cat": [other, entry],
        "torch.nn.Linear": [entry],
        "torchvision.io": [entry],  # not torch itself
        "torch.Adam": [entry],  # shortened past what exists (torch.optim.Adam)
        "torch.nn.modules.loss._WeightedLoss": [entry],  # private
        "effpt.bench.compare": [entry],
    }
    assert related.torch_uses(backrefs, docs) == {
        "torch.cat": ["auto_examples/basics/plot_a", "auto_examples/basics/plot_b"],
        "torch.nn.Linear": ["auto_examples/basics/plot_a"],
    }


def test_the_gallery_records_torch_names(conf):
    assert "torch" in conf["sphinx_gallery_conf"]["doc_module"]
    assert conf["sphinx_gallery_conf"]["backreferences_dir"]
