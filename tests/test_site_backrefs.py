"""sphinx-gallery's backreference files, each example's thumbnail block made once
(docs/_ext/effpt_site/backrefs.py)."""

from __future__ import annotations

import pytest
from sphinx_gallery import backreferences as br

from effpt_site import backrefs


def _gallery(tmp_path):
    target = tmp_path / "auto"
    thumbs = target / "images" / "thumb"
    thumbs.mkdir(parents=True)
    for stem in ("plot_a", "plot_b"):
        (thumbs / f"sphx_glr_{stem}_thumb.png").write_bytes(b"png")
    (tmp_path / "gen").mkdir()
    return target, {"backreferences_dir": "gen", "src_dir": str(tmp_path)}


def _write_all(tmp_path, target, conf):
    seen: set[str] = set()
    names = {"torch.add", "torch.mul", "effpt.bench.compare"}
    for stem in ("plot_a", "plot_b"):
        br._write_backreferences(
            names, seen, conf, tmp_path / "ex", target, f"{stem}.py", f"{stem} intro", stem
        )
    return {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "gen").iterdir()}


@pytest.fixture
def counted(monkeypatch):
    """sphinx-gallery's functions as they were, its thumbnail block counted."""
    from sphinx_gallery import gen_rst

    theirs = getattr(br._write_backreferences, "__wrapped__", br._write_backreferences)
    monkeypatch.setattr(br, "_write_backreferences", theirs)
    monkeypatch.setattr(gen_rst, "_write_backreferences", theirs)
    calls = []
    made = br._thumbnail_div
    monkeypatch.setattr(
        br, "_thumbnail_div", lambda *a, **k: calls.append(str(a[2])) or made(*a, **k)
    )
    return calls


def test_each_examples_thumbnail_block_is_made_once_and_the_files_are_unchanged(tmp_path, counted):
    target, conf = _gallery(tmp_path)
    theirs = _write_all(tmp_path, target, conf)
    assert len(counted) == 6  # sphinx-gallery: once per name per example
    counted.clear()
    backrefs.install()
    for path in (tmp_path / "gen").iterdir():
        path.unlink()
    ours = _write_all(tmp_path, target, conf)
    assert ours == theirs
    assert counted == ["plot_a.py", "plot_b.py"]  # once per example
    assert "plot_a intro" in ours["torch.add.examples.new"]
    assert "plot_b intro" in ours["torch.add.examples.new"]
    from sphinx_gallery import gen_rst

    assert gen_rst._write_backreferences is br._write_backreferences  # what the build calls


def test_a_missing_thumbnail_still_fails(tmp_path, counted):  # noqa: ARG001
    from sphinx.errors import ExtensionError

    target, conf = _gallery(tmp_path)
    (target / "images" / "thumb" / "sphx_glr_plot_b_thumb.png").unlink()
    backrefs.install()
    with pytest.raises(ExtensionError, match="thumbnail"):
        _write_all(tmp_path, target, conf)
