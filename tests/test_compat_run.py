"""The torch matrix's tool (docs/_tools/compat_run.py): the constraints of an entry, pip's reason."""

from __future__ import annotations

import doctest
from pathlib import Path

import compat_run

ROOT = Path(__file__).resolve().parent.parent


def test_doctests_of_the_tool_pass():
    # docs/_tools is not among pytest's doctest paths: its examples run here.
    failed, attempted = doctest.testmod(compat_run, optionflags=doctest.ELLIPSIS)
    assert attempted >= 4
    assert failed == 0


def test_an_entry_pins_its_torch_and_leaves_torchs_own_dependencies_to_torch():
    text = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    entry, dropped = compat_run.matrix_constraints(text, "2.6.0")
    lines = entry.splitlines()
    assert [line for line in lines if line.startswith("torch==")] == ["torch==2.6.0"]
    assert dropped, "constraints.txt pins some of torch's own dependencies (sympy, filelock)"
    for pin in dropped:
        assert compat_run.TORCH_OWN.match(pin)
        assert pin not in lines
    # everything else is kept as it was, in its order
    kept = [
        line
        for line in text.splitlines()
        if not line.startswith("torch==") and not compat_run.TORCH_OWN.match(line)
    ]
    assert lines[:-1] == kept


def test_a_bad_version_is_refused_before_anything_is_installed(tmp_path, capsys):
    code = compat_run.prepare("latest", tmp_path / "env", ROOT / "constraints.txt", [])
    assert code == 2
    assert "'latest'" in capsys.readouterr().out
    assert not (tmp_path / "env").exists()


def test_an_environment_made_from_the_same_inputs_is_kept(tmp_path, capsys):
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("")
    constraints = ROOT / "constraints.txt"
    text, _ = compat_run.matrix_constraints(constraints.read_text(encoding="utf-8"), "2.6.0")
    (env / ".effpt-installed").write_text(compat_run.inputs_key(text, ["pytest"]))
    assert compat_run.prepare("2.6.0", env, constraints, ["pytest"]) == 0
    assert "kept" in capsys.readouterr().out
