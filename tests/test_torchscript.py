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
