"""Choosing the CUDA build of the pinned torch for a GPU runner (docs/_tools/torch_cuda.py)."""

from __future__ import annotations

import doctest
import io
import sys

import pytest
import torch_cuda


def index(*builds: str, torch: str = "2.13.0", tag: str = "cp311"):
    """A fake reader of PyTorch's indexes: only ``builds`` have the pinned torch."""

    def get(url: str) -> str:
        build = url.rstrip("/").split("/")[-2]
        if build in builds:
            return f'<a href="torch-{torch}%2B{build}-{tag}-{tag}-manylinux_2_28_x86_64.whl">'
        return '<a href="torch-2.9.0%2Bcu126-cp311-cp311-manylinux_2_28_x86_64.whl">'

    return get


def test_doctests():
    assert doctest.testmod(torch_cuda).failed == 0


def test_the_newest_build_the_driver_supports_that_has_the_pin():
    assert torch_cuda.choose((12, 8), "2.13.0", "cp311", index("cu126", "cu128")) == (
        "cu128",
        False,
    )


def test_an_index_without_the_pin_is_skipped_not_taken():
    # The driver supports 12.8, but cu128 has no torch 2.13.0: take cu126, never PyPI's.
    assert torch_cuda.choose((12, 8), "2.13.0", "cp311", index("cu126")) == ("cu126", False)


def test_a_newer_minor_version_of_the_same_major_runs_under_compatibility():
    assert torch_cuda.choose((12, 4), "2.13.0", "cp311", index("cu126", "cu130")) == (
        "cu126",
        True,
    )


def test_no_fitting_build_names_the_driver_and_every_index_tried():
    with pytest.raises(torch_cuda.NoBuild) as caught:
        torch_cuda.choose((12, 4), "2.13.0", "cp311", index("cu130"))
    message = str(caught.value)
    assert "supports CUDA up to 12.4" in message
    assert "https://download.pytorch.org/whl/cu124/torch/ (no torch 2.13.0 for cp311)" in message
    assert "cu129" in message
    assert "cu130" not in message  # another major version is never tried


def test_an_unreachable_index_is_named():
    def offline(url: str) -> str:
        raise torch_cuda.NoBuild(f"could not read {url}: timed out")

    with pytest.raises(torch_cuda.NoBuild, match=r"cu130/torch/ \(could not read"):
        torch_cuda.choose((13, 0), "2.13.0", "cp311", offline)


def test_the_wheel_must_be_for_this_python():
    assert not torch_cuda.has_wheel(
        index("cu128", tag="cp312")("https://x/whl/cu128/torch/"), "2.13.0", "cu128", "cp311"
    )


def test_main_writes_the_index_and_the_build(tmp_path, monkeypatch, capsys):
    env = tmp_path / "github_env"
    monkeypatch.setattr("sys.stdin", io.StringIO("CUDA Version: 12.8  |"))
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    monkeypatch.setattr(torch_cuda, "fetch", index("cu128", tag=tag))
    assert torch_cuda.main(["--torch", "2.13.0", "--github-env", str(env)]) == 0
    assert env.read_text() == (
        "PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cu128\nEFFPT_TORCH_BUILD=cu128\n"
    )
    assert "torch 2.13.0+cu128" in capsys.readouterr().out
