"""The hooks sphinx-gallery calls around every example: state resets, warnings, the stamp.

An example can change global state that the next one would silently inherit: a seed,
the default dtype, grad mode, thread count, compiled-graph caches, warning filters.
:func:`reset_state` puts all of it back before each example (and restores the build's
own warning filters after it). Everything reset is listed in :data:`RESET_STATE`, in
one place, so a reader can see what a page may rely on.

torch is imported by the first hook that runs, not with this module: docs/conf.py and
sphinx-gallery import it at every build, and a build that executes no page (the
Chinese pass, a rebuild with nothing changed) needs no torch for it.
"""

from __future__ import annotations

import os
import random
import sys
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from effpt.claims import CLAIMS_ENV
from effpt.expect import EXPECTATIONS_ENV
from effpt.records import RECORDS_ENV
from effpt_site.outputs import (
    claims_file,
    expectations_file,
    read_stamp,
    records_file,
    write_stamp,
)

#: The seed every example starts from (the page still sets its own, visibly).
SEED = 0

#: What :func:`reset_state` restores before every example.
RESET_STATE = (
    "RNG seeds: torch (all devices), Python's random, NumPy's legacy global generator",
    "default dtype float32 and default device None",
    "grad mode on, anomaly detection off",
    "deterministic algorithms off; cuDNN benchmark/deterministic off; float32 matmul precision 'highest'",
    "torch's intra-op thread count, as it was when the build started",
    "torch._dynamo's compiled-graph cache (when torch._dynamo was imported)",
    "torch print options",
    "sys.excepthook (init_process_group installs one that destroy_process_group leaves)",
    "warning filters: DeprecationWarning and FutureWarning from torch, NumPy, effpt or the page are errors",
    "matplotlib's rcParams (sphinx-gallery's own 'matplotlib' reset)",
)

#: torch's intra-op thread count when the first page was about to run (see _torch).
_BUILD_THREADS: int | None = None
_saved_filters: list[tuple[Any, ...]] = []
#: torch's CUDA allocator statistics when the page started (see _stamp_device_used).
_gpu_start: dict[str, Any] = {}
#: The allocator's count of the blocks it has handed out since the process started.
_ALLOCATIONS = "allocation.all.allocated"
#: torch's own reset of the peak statistics; a page's call goes through _reset_keeping_peak.
_RESET_PEAK: Any = None


def _torch():
    """torch, imported at the first hook; notes its thread count and its peak reset then.

    Before the first page nothing has changed torch's thread count, so it is the
    build's as it was when the build started.
    """
    global _BUILD_THREADS, _RESET_PEAK  # noqa: PLW0603  (noted once, at the first hook)
    import torch  # noqa: PLC0415  (see the module's docstring)

    if _BUILD_THREADS is None:
        _BUILD_THREADS = torch.get_num_threads()
    if _RESET_PEAK is None:
        _RESET_PEAK = torch.cuda.reset_peak_memory_stats
    return torch


def _reset_keeping_peak(device: Any = None) -> None:
    """A page's :func:`torch.cuda.reset_peak_memory_stats`: note the peak it drops, then reset.

    A page that measures one region's peak resets the statistics first (the usual
    way); the page's own peak, which the build reads after it, must not lose what came
    before. The build installs this in ``torch.cuda`` while a page runs.
    """
    torch = _torch()
    dropped = torch.cuda.max_memory_allocated(device)
    _gpu_start["dropped"] = max(_gpu_start.get("dropped", 0), dropped)
    _RESET_PEAK(device)


#: Deprecation warnings attributed to these modules fail an example. They are the
#: libraries the pages teach and the page itself (torch attributes most of its warnings
#: to the caller, ``__main__``). Python's own, such as 3.12's warning about ``fork()``
#: in a threaded process, stay warnings.
POLICY_MODULES = r"(torch|numpy|effpt|__main__)(\.|$)"

#: A deprecation that torch raises against itself; ignored (see apply_warning_policy).
TORCH_INTERNAL_DEPRECATION = r"`torch\.jit\.script_method` is deprecated"


def apply_warning_policy() -> None:
    """Make deprecation warnings errors, so that no page teaches a deprecated API by accident.

    Applies to warnings attributed to :data:`POLICY_MODULES`. A page that shows a
    deprecated API on purpose catches the warning with :func:`warnings.catch_warnings`
    and prints it.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     apply_warning_policy()
    ...     warnings.warn_explicit("old", FutureWarning, "f.py", 1, module="torch.jit")
    Traceback (most recent call last):
    ...
    FutureWarning: old
    """
    warnings.resetwarnings()
    warnings.simplefilter("default")
    for category in (DeprecationWarning, FutureWarning):
        warnings.filterwarnings("error", category=category, module=POLICY_MODULES)
    # torch's own use of a deprecated API, not the reader's: Inductor imports
    # torch.utils.mkldnn, which applies @torch.jit.script_method at import (torch 2.13).
    for category in (DeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", message=TORCH_INTERNAL_DEPRECATION, category=category)


def _restore_filters(saved: list[tuple[Any, ...]]) -> None:
    warnings.resetwarnings()
    for action, message, category, module, lineno in saved:
        warnings.filterwarnings(
            action,
            getattr(message, "pattern", message) or "",
            category,
            getattr(module, "pattern", module) or "",
            lineno,
            append=True,
        )


def reset_state(gallery_conf: dict[str, Any], fname: str | None, when: str = "before") -> None:
    """sphinx-gallery ``reset_modules`` hook: restore everything in :data:`RESET_STATE`.

    Before an example it also names the files that :func:`effpt.bench.compare`,
    :func:`effpt.expect.expect` and :meth:`effpt.claims.Claim.check` append to
    (emptied, since the example is about to measure afresh) and writes a stamp of when
    and on which machine the example ran;
    after it, the build's own warning filters come back and, on CUDA, the stamp gets
    the device the page used and its peak GPU memory.

    Examples
    --------
    >>> import torch
    >>> torch.set_default_dtype(torch.float64)
    >>> reset_state({"gallery_dirs": "out", "src_dir": "."}, None)
    >>> torch.get_default_dtype()
    torch.float32
    >>> sys.excepthook = print
    >>> reset_state({"gallery_dirs": "out", "src_dir": "."}, None)
    >>> sys.excepthook is sys.__excepthook__
    True
    >>> reset_state({"gallery_dirs": "out", "src_dir": "."}, None, when="after")
    """
    torch = _torch()
    if when == "after":
        os.environ.pop(RECORDS_ENV, None)
        os.environ.pop(EXPECTATIONS_ENV, None)
        os.environ.pop(CLAIMS_ENV, None)
        _restore_filters(_saved_filters)
        torch.cuda.reset_peak_memory_stats = _RESET_PEAK
        if fname is not None:
            _stamp_device_used(gallery_conf, Path(fname).stem)
        return

    torch.manual_seed(SEED)
    random.seed(SEED)
    np.random.seed(SEED)  # noqa: NPY002  (reset the legacy global state examples may touch)
    torch.set_default_dtype(torch.float32)
    if hasattr(torch, "set_default_device"):
        torch.set_default_device(None)
    torch.set_grad_enabled(True)
    torch.autograd.set_detect_anomaly(False)
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = False
    torch.set_float32_matmul_precision("highest")
    torch.set_num_threads(_BUILD_THREADS)
    torch.set_printoptions(profile="default")
    sys.excepthook = sys.__excepthook__
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        _RESET_PEAK()  # read after the page (see _stamp_device_used)
        _gpu_start.clear()
        _gpu_start.update(held=torch.cuda.memory_allocated(), stats=torch.cuda.memory_stats())
        torch.cuda.reset_peak_memory_stats = _reset_keeping_peak

    _saved_filters[:] = [tuple(f) for f in warnings.filters]
    apply_warning_policy()

    if fname is not None:
        stem = Path(fname).stem
        for path, env in (
            (records_file(gallery_conf, stem), RECORDS_ENV),
            (expectations_file(gallery_conf, stem), EXPECTATIONS_ENV),
            (claims_file(gallery_conf, stem), CLAIMS_ENV),
        ):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("", encoding="utf-8")
            os.environ[env] = str(path)
        from effpt.device import this_machine  # noqa: PLC0415  (imports torch)

        stamp = {
            "executed_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": this_machine().to_dict(),
        }
        write_stamp(gallery_conf, stem, stamp)


def page_used_cuda(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether a page allocated CUDA memory, from :func:`torch.cuda.memory_stats` around it.

    The allocator counts every block it hands out (``allocation.all.allocated``, never
    reset by :func:`torch.cuda.reset_peak_memory_stats`); the page used CUDA when the
    count grew. The peak cannot tell: memory an earlier page left allocated (cuBLAS's
    workspace stays from the build's first matrix product) makes every later page's
    peak positive, a CPU-only page's too. A page that reset the counts
    (:func:`torch.cuda.reset_accumulated_memory_stats`) used CUDA if any were counted since.

    Examples
    --------
    >>> held = {"allocation.all.allocated": 40, "allocated_bytes.all.peak": 2**22}
    >>> page_used_cuda(held, held)  # a CPU page on a GPU build: a peak, no allocation
    False
    >>> page_used_cuda(held, {**held, "allocation.all.allocated": 41})
    True
    >>> page_used_cuda({}, {})  # CUDA was never initialised
    False
    >>> page_used_cuda(held, {"allocation.all.allocated": 3})  # reset, then 3 allocations
    True
    """
    start, end = before.get(_ALLOCATIONS, 0), after.get(_ALLOCATIONS, 0)
    return end > start or (end < start and end > 0)


def _stamp_device_used(gallery_conf: dict[str, Any], stem: str) -> None:
    """Name the device the page used in its stamp, and on CUDA its peak GPU memory.

    A page that allocated no CUDA memory (:func:`page_used_cuda`) ran on the CPU (the
    DDP ranks, the data loaders and the TorchScript page pin themselves there),
    whatever the build has: a GPU build's CPU-only page says CPU and has no GPU memory
    figure. ``gpu_peak_mib`` is the most memory torch's allocator held for tensors
    during the page beyond what it held when the page started
    (:func:`torch.cuda.max_memory_allocated`, its peak statistics reset before the page),
    or the higher peak the page itself reset away (:func:`_reset_keeping_peak`).
    """
    from effpt.device import this_machine  # noqa: PLC0415  (imports torch)

    torch = _torch()
    stamp = read_stamp(gallery_conf, stem)
    if stamp is None or not torch.cuda.is_available():
        return
    used_cuda = page_used_cuda(_gpu_start.get("stats", {}), torch.cuda.memory_stats())
    stamp["machine"] = this_machine("cuda" if used_cuda else "cpu").to_dict()
    stamp.pop("gpu_peak_mib", None)
    if used_cuda:
        peak = max(torch.cuda.max_memory_allocated(), _gpu_start.get("dropped", 0))
        stamp["gpu_peak_mib"] = max(0, peak - _gpu_start.get("held", 0)) / 2**20
    write_stamp(gallery_conf, stem, stamp)


def memory_is_measured() -> bool:
    """Whether this build can measure a page's own peak memory: only on CUDA.

    On a CPU the process's resident memory belongs to the whole Sphinx build and rarely
    shrinks between pages, so its growth during one page is not that page's usage.
    The build then prints no memory figure rather than a wrong one.

    docs/conf.py asks at every build. On Linux, CUDA needs the GPU driver's device file
    (NVIDIA's ``/dev/nvidiactl``, ROCm's ``/dev/kfd``, WSL's ``/dev/dxg``): without one
    the answer is no, and torch is not imported to say so.
    """
    if sys.platform == "linux" and not any(Path(p).exists() for p in GPU_DEVICE_FILES):
        return False
    return _torch().cuda.is_available()


#: The device files through which torch reaches a GPU on Linux (see memory_is_measured).
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")
