"""The torch-compatibility matrix (docs/_ext/effpt_site/compat.py) reads its runs and diffs
only what really changed between versions.
"""

from __future__ import annotations

import json

import pytest

from effpt.machine import Machine

CPU = Machine("cpu", "x86_64 CPU", 2, None, "2.13.0")
H100 = Machine("cuda", "NVIDIA H100 80GB HBM3", None, "12.8", "2.13.0")


def test_compat_matrix_sorts_versions_and_diffs_only_real_changes(tmp_path):
    from effpt_site import compat

    folder = tmp_path / "compat"
    folder.mkdir()
    outputs = {
        "2.6.0": "loss 0.25\nstep 2.00 ms, 4.0× (3.8–4.2) faster\n",
        "2.13.0": "loss 0.25\nstep 3.10 ms, 2.9× (2.5–3.0) faster\n",
        "2.15.0": "loss 0.26\nstep 1.90 ms, 4.1× (4.0–4.2) faster\n",
    }
    for version, output in outputs.items():
        run = {
            "torch": version,
            "machine": CPU.to_dict(),
            "pages": {"plot_a": {"ok": True, "output": output}},
        }
        (folder / f"torch-{version}.json").write_text(json.dumps(run))
    runs = compat.load_matrix(tmp_path)
    assert [r["torch"] for r in runs] == ["2.6.0", "2.13.0", "2.15.0"]
    assert {r["machine"] for r in runs} == {CPU}
    assert compat._diff(runs[0], runs[1], "plot_a") == ""  # only timings changed
    assert "-loss 0.25\n+loss 0.26" in compat._diff(runs[1], runs[2], "plot_a")


def test_compat_diffs_ignore_which_machine_ran_each_version():
    from effpt_site import compat

    xeon = Machine("cpu", "x86_64 CPU (Intel(R) Xeon(R) Processor)", 2, None, "2.13.0")
    epyc = Machine("cpu", "x86_64 CPU (AMD EPYC)", 2, None, "2.15.0")
    runs = [
        {"torch": m.torch, "machine": m, "pages": {"plot_a": {"output": f"{m}\nloss 0.25\n"}}}
        for m in (xeon, epyc)
    ]
    assert compat._diff(runs[0], runs[1], "plot_a") == ""


def _write_run(folder, version, machine):
    run = {"torch": version, "machine": machine, "pages": {"plot_a": {"ok": True, "output": ""}}}
    (folder / f"torch-{version}.json").write_text(json.dumps(run))


def test_an_old_compat_file_loads_and_a_gpu_run_is_told_by_its_fields(tmp_path):
    from effpt_site import compat

    folder = tmp_path / "compat"
    folder.mkdir()
    _write_run(folder, "2.6.0", "x86_64 CPU (Intel(R) Xeon(R) Processor), 2 threads · torch 2.6.0")
    _write_run(folder, "2.13.0", H100.to_dict())
    old, new = compat.load_matrix(tmp_path)
    assert old["machine"] == Machine(
        "cpu", "x86_64 CPU (Intel(R) Xeon(R) Processor)", 2, None, "2.6.0"
    )
    assert new["machine"] == H100
    assert compat.badge_text([old], "plot_a") == "Verified on a CPU with torch 2.6.0"
    assert (
        compat.badge_text([old, new], "plot_a") == "Verified on a GPU with torch 2.6.0 and 2.13.0"
    )


@pytest.mark.parametrize(
    ("machine", "error"),
    [
        ({**CPU.to_dict(), "threads": 0}, "'threads' must be a positive int"),
        ({**H100.to_dict(), "cuda": None}, "'cuda' must be a non-empty str"),
        ("NVIDIA H100 (CUDA 12.8)", "is not one that effpt.device.describe"),
    ],
)
def test_a_malformed_machine_in_a_compat_file_names_the_file(tmp_path, machine, error):
    from effpt_site import compat

    folder = tmp_path / "compat"
    folder.mkdir()
    _write_run(folder, "2.6.0", machine)
    path = folder / "torch-2.6.0.json"
    with pytest.raises(ValueError, match=rf"{path}: field 'machine': .*{error}"):
        compat.load_matrix(tmp_path)


def test_a_compat_file_without_a_machine_names_the_file(tmp_path):
    from effpt_site import compat

    folder = tmp_path / "compat"
    folder.mkdir()
    (folder / "torch-2.6.0.json").write_text(json.dumps({"torch": "2.6.0", "pages": {}}))
    with pytest.raises(ValueError, match=rf"{folder / 'torch-2.6.0.json'}: no 'machine' field"):
        compat.load_matrix(tmp_path)
