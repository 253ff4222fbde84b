"""The GPU build's entry point (docs/_tools/gpu_build.py): what it refuses and what it copies.

Its whole run is proven by ``nox -s gpu_rehearsal`` (the English site built on the CPU).
"""

from __future__ import annotations

import gpu_build


def test_without_wheels_it_stops_before_building_and_says_how_to_get_them(tmp_path, capsys):
    out = tmp_path / "out"
    status = gpu_build.main(
        ["--out", str(out), "--wheels", str(tmp_path / "none"), "--work", str(tmp_path / "w")]
    )
    assert status == 2
    log = (out / "build.log").read_text()
    assert "no wheels in" in log
    assert "nox -s gpu_wheels" in log
    assert "nox -s gpu_wheels" in capsys.readouterr().out


def test_the_build_copies_the_tree_without_earlier_outputs(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    for path in (
        "docs/conf.py",
        "docs/auto_examples/basics/plot_a.py",
        "docs/_build/html/index.html",
        "examples/basics/plot_a.py",
        ".whl/sphinx.whl",
        ".nox/docs/bin/python",
        "src/effpt/__init__.py",
    ):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("x")
    monkeypatch.setattr(gpu_build, "ROOT", root)
    tree = gpu_build.copy_tree(tmp_path / "work")
    copied = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file())
    assert copied == ["docs/conf.py", "examples/basics/plot_a.py", "src/effpt/__init__.py"]
