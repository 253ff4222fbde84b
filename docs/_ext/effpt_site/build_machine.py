"""The machine that builds the site, asked of torch only when something it depends on changed.

The pages Sphinx writes at every build (the general index, the module index, the search
page, the highlighted sources) carry the build's machine in their report link
(:mod:`effpt_site.reader_links`), and ``effpt-build.json`` states it
(:mod:`effpt_site.cards`). :func:`effpt.device.this_machine` answers, but it imports
torch, which was a third of a build in which nothing changed.

So the answer is kept in the build's doctree folder (``effpt-machine.json``) with a
fingerprint of everything it is computed from on a Linux machine without a GPU driver:
torch's installed version and place, the code of :mod:`effpt.device`,
:mod:`effpt.machine` and this module, the CPU (``/proc/cpuinfo`` but its clock, the CPUs this
process may use, the cgroup's CPU quota), the architecture, and the environment
variables that choose the device or change threads and kernels. A build whose
fingerprint differs asks torch again. Where a GPU could answer (a driver's device file
exists, or the system is not Linux) nothing is kept: torch is asked at every build.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from importlib import metadata, util
from pathlib import Path

from effpt.machine import Machine
from effpt_site.hooks import GPU_DEVICE_FILES  # with one of them, torch always answers

#: Where the answer is kept, in the build's doctree folder.
RECORD = "effpt-machine.json"
CPUINFO = Path("/proc/cpuinfo")
CPU_QUOTA = Path("/sys/fs/cgroup/cpu.max")
#: Environment variables that may change the answer (by name or by prefix).
PREFIXES = (
    "EFFPT_",
    "OMP_",
    "MKL_",
    "KMP_",
    "GOMP_",
    "ATEN_",
    "ONEDNN_",
    "DNNL_",
    "CUDA_",
    "PYTORCH_",
    "TORCH_",
    "HIP_",
    "ROCR_",
    "LD_",
)


def _ask_torch() -> tuple[Machine, str]:
    """This machine (:func:`effpt.device.this_machine`) and torch's full version."""
    import torch  # noqa: PLC0415  (the import this module saves when it can)

    from effpt.device import this_machine  # noqa: PLC0415

    return this_machine(), torch.__version__


def _code() -> str:
    """The code the answer comes from: effpt.device, effpt.machine and this module."""
    spec = util.find_spec("effpt")
    root = Path(spec.origin).parent if spec and spec.origin else Path()
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for name in ("device.py", "machine.py"):
        path = root / name
        digest.update(path.read_bytes() if path.is_file() else b"?")
    return digest.hexdigest()


def _torch_installed() -> str:
    """torch's version and where it lies (a reinstall changes its metadata's stamp)."""
    try:
        dist = metadata.distribution("torch")
    except metadata.PackageNotFoundError:
        return "no torch"
    record = dist.locate_file(f"{dist.metadata['Name']}-{dist.version}.dist-info/RECORD")
    try:
        stat = Path(record).stat()
        stamp = f"{stat.st_mtime_ns} {stat.st_size}"
    except OSError:
        stamp = "?"
    return f"{dist.version} {dist.locate_file('')} {stamp}"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _cpu_description() -> str:
    """``/proc/cpuinfo`` without its clock lines (``cpu MHz`` moves between two reads)."""
    lines = _read(CPUINFO).splitlines()
    return "\n".join(line for line in lines if not line.startswith("cpu MHz"))


def fingerprint() -> str | None:
    """A digest of what :func:`_ask_torch` answers from; ``None`` where it cannot be trusted."""
    if sys.platform != "linux" or any(Path(p).exists() for p in GPU_DEVICE_FILES):
        return None
    environment = sorted(
        (name, value) for name, value in os.environ.items() if name.startswith(PREFIXES)
    )
    parts = [
        _code(),
        _torch_installed(),
        platform.machine(),
        sys.executable,
        _cpu_description(),
        repr(sorted(os.sched_getaffinity(0))),
        _read(CPU_QUOTA),
        repr(environment),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def machine(app) -> tuple[Machine, str]:
    """The machine building ``app``'s site and torch's version, asking torch only when needed.

    Asked once per build at most (kept on ``app``).
    """
    known = getattr(app, "_effpt_build_machine", None)
    if known is not None:
        return known
    key = fingerprint()
    record = Path(app.doctreedir) / RECORD
    answer = None
    if key is not None:
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
            if data["fingerprint"] == key:
                answer = Machine.from_dict(data["machine"]), str(data["torch"])
        except (OSError, ValueError, KeyError, TypeError):
            answer = None
    if answer is None:
        answer = _ask_torch()
        if key is not None:
            record.parent.mkdir(parents=True, exist_ok=True)
            data = {"fingerprint": key, "machine": answer[0].to_dict(), "torch": answer[1]}
            record.write_text(json.dumps(data, indent=1), encoding="utf-8")
    app._effpt_build_machine = answer
    return answer
