"""The index's cards and build stamp (docs/_ext/effpt_site/cards.py)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from effpt.machine import Machine
from effpt_site import cards


def test_family_picture_prefers_the_first_page_that_drew(tmp_path):
    (tmp_path / "thumb").mkdir()
    for stem in ("plot_a", "plot_b"):
        (tmp_path / "thumb" / f"sphx_glr_{stem}_thumb.png").write_bytes(b"png")
    (tmp_path / "sphx_glr_plot_b_001.png").write_bytes(b"png")
    picture = cards.family_picture(tmp_path, ["plot_a.py", "plot_b.py"])
    assert picture.name == "sphx_glr_plot_b_thumb.png"


# -- the build stamp (docs/_ext/effpt_site/cards.py) --------------------------------------------------------


def _build_stamp():
    return cards.build_stamp


@pytest.mark.parametrize(
    ("machine", "expected"),
    [
        (
            Machine("cpu", "x86_64 CPU (AMD EPYC)", 2, None, "2.13.0"),
            "Built on 2026-11-21 on an x86_64 CPU (AMD EPYC), 2 threads, with torch 2.13.0.",
        ),
        (
            Machine("cuda", "NVIDIA H100 80GB HBM3", None, "13.0", "2.13.0"),
            "Built on 2026-11-21 on an NVIDIA H100 80GB HBM3 (CUDA 13.0), with torch 2.13.0.",
        ),
        (
            Machine("mps", "Apple arm64 GPU (MPS)", None, None, "2.13.0"),
            "Built on 2026-11-21 on an Apple arm64 GPU (MPS), with torch 2.13.0.",
        ),
        (
            Machine("meta", "meta device", None, None, "2.13.0"),
            "Built on 2026-11-21 on a meta device, with torch 2.13.0.",
        ),
        (
            Machine("cpu", "x86_64 CPU", 1, None, "2.6.0"),
            "Built on 2026-11-21 on an x86_64 CPU, 1 thread, with torch 2.6.0.",
        ),
    ],
)
def test_build_stamp_reads_naturally(machine, expected):
    day = datetime(2026, 11, 21, tzinfo=timezone.utc)
    assert _build_stamp()(machine, day) == expected


def test_a_cuda_builds_stamp_names_the_gpu_and_its_cuda(monkeypatch):
    import torch

    from effpt import device

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _d: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    day = datetime(2026, 11, 21, tzinfo=timezone.utc)
    stamp = cards.build_stamp(device.this_machine("cuda"), day)
    assert stamp == (
        "Built on 2026-11-21 on an NVIDIA H100 80GB HBM3 (CUDA 12.8), "
        f"with torch {device.torch_version()}."
    )
