"""effpt.torchscript: TorchScript's deprecation warnings silenced, and nothing else."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

from effpt import torchscript


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def _jit_calls() -> None:
    torch.jit.script(double)
    torch.jit.trace(double, torch.ones(2))


def test_torchs_own_deprecation_warnings_are_silenced_inside_the_block():
    with warnings.catch_warnings(record=True) as outside:
        warnings.simplefilter("always")
        _jit_calls()
        with torchscript.quietly(), warnings.catch_warnings(record=True) as inside:
            _jit_calls()
    deprecated = [w for w in outside if re.match(torchscript.DEPRECATION, str(w.message))]
    if not deprecated:  # torch 2.6 scripts and traces without one
        pytest.skip(f"torch {torch.__version__} warns no TorchScript deprecation to silence")
    assert not [w for w in inside if re.match(torchscript.DEPRECATION, str(w.message))]


def test_other_warnings_pass_and_the_filters_come_back():
    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torchscript.quietly():
            warnings.warn(
                "`torch.jit.script` is deprecated (not torch's)", UserWarning, stacklevel=1
            )
            warnings.warn("something else", DeprecationWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == [
        "`torch.jit.script` is deprecated (not torch's)",
        "something else",
    ]
    assert warnings.filters == before


def test_script_prints_the_deprecation_once_and_returns_the_scripted_function(capsys):
    scripted = torchscript.script(double)
    said = capsys.readouterr().out.splitlines()
    assert len(said) == 1
    assert re.match(r"\w+Warning: " + torchscript.DEPRECATION, said[0]) or (
        said[0] == f"torch {torch.__version__} scripts it without a deprecation warning"
    )
    assert torch.equal(scripted(torch.ones(3)), double(torch.ones(3)))


def test_script_issues_every_other_warning_again(monkeypatch, capsys):
    real = torch.jit.script

    def script_that_also_warns(fn):
        warnings.warn("a warning of the code being scripted", RuntimeWarning, stacklevel=1)
        return real(fn)

    monkeypatch.setattr(torch.jit, "script", script_that_also_warns)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torchscript.script(double)
    assert [str(w.message) for w in caught if w.category is RuntimeWarning] == [
        "a warning of the code being scripted"
    ]
    capsys.readouterr()
