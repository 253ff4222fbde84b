"""Hooks that sphinx-gallery calls while it builds the site.

An example can change global state that the next one would silently inherit: a seed,
the default dtype, grad mode, thread count, compiled-graph caches, warning filters.
:func:`reset_state` puts all of it back before each example (and restores the build's
own warning filters after it). Everything reset is listed in :data:`RESET_STATE`, in
one place, so a reader can see what a page may rely on.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import threading
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch

from effpt.bench import RECORDS_ENV
from effpt.device import describe

__all__ = [
    "POLICY_MODULES",
    "RESET_STATE",
    "SEED",
    "STAMP_SUFFIX",
    "ReadingOrder",
    "apply_warning_policy",
    "call_memory",
    "read_reading_order",
    "records_dir",
    "reset_state",
]

#: Suffix of the file, beside an example's records, saying when and where it last ran.
STAMP_SUFFIX = ".stamp.json"

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
    "warning filters: DeprecationWarning and FutureWarning from torch, NumPy, effpt or the page are errors",
    "matplotlib's rcParams (sphinx-gallery's own 'matplotlib' reset)",
)

_BUILD_THREADS = torch.get_num_threads()
_saved_filters: list[tuple[Any, ...]] = []


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
    ...     warnings.warn("old", DeprecationWarning, stacklevel=1)
    Traceback (most recent call last):
    ...
    DeprecationWarning: old
    """
    warnings.resetwarnings()
    warnings.simplefilter("default")
    for category in (DeprecationWarning, FutureWarning):
        warnings.filterwarnings("error", category=category, module=POLICY_MODULES)
    # torch's own use of a deprecated API, not the reader's: Inductor imports
    # torch.utils.mkldnn, which applies @torch.jit.script_method at import (torch 2.13).
    warnings.filterwarnings(
        "ignore", message=TORCH_INTERNAL_DEPRECATION, category=DeprecationWarning
    )


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


def records_dir(gallery_conf: dict[str, Any]) -> Path:
    """The folder, inside the generated gallery, where measurement records persist."""
    gallery_dirs = gallery_conf["gallery_dirs"]
    first = gallery_dirs if isinstance(gallery_dirs, str) else gallery_dirs[0]
    return Path(gallery_conf["src_dir"]) / first / "_records"


def reset_state(gallery_conf: dict[str, Any], fname: str | None, when: str = "before") -> None:
    """sphinx-gallery ``reset_modules`` hook: restore everything in :data:`RESET_STATE`.

    Before an example it also names the file that :func:`effpt.bench.compare` appends
    records to (emptied, since the example is about to measure afresh) and writes a
    stamp of when and on which machine the example ran; after it, the build's own
    warning filters come back.

    Examples
    --------
    >>> import torch
    >>> torch.set_default_dtype(torch.float64)
    >>> reset_state({"gallery_dirs": "out", "src_dir": "."}, None)
    >>> torch.get_default_dtype()
    torch.float32
    >>> reset_state({"gallery_dirs": "out", "src_dir": "."}, None, when="after")
    """
    if when == "after":
        os.environ.pop(RECORDS_ENV, None)
        _restore_filters(_saved_filters)
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
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

    _saved_filters[:] = [tuple(f) for f in warnings.filters]
    apply_warning_policy()

    if fname is not None:
        folder = records_dir(gallery_conf)
        folder.mkdir(parents=True, exist_ok=True)
        stem = Path(fname).stem
        path = folder / f"{stem}.jsonl"
        path.write_text("", encoding="utf-8")
        os.environ[RECORDS_ENV] = str(path)
        stamp = {
            "executed_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": describe(),
        }
        (folder / f"{stem}{STAMP_SUFFIX}").write_text(json.dumps(stamp), encoding="utf-8")


def _rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; elsewhere the peak so far)."""
    try:
        statm = Path("/proc/self/statm").read_text(encoding="ascii")
        return int(statm.split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        import resource  # noqa: PLC0415  (POSIX only)

        scale = 1 if sys.platform == "darwin" else 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def call_memory(func: Callable[[], Any]) -> tuple[float, Any]:
    """sphinx-gallery ``show_memory`` hook: run ``func`` and return (peak MiB, result).

    On CUDA the peak is ``torch.cuda.max_memory_allocated``; on CPU it is the
    process's resident memory, sampled every 20 ms while ``func`` runs.

    Examples
    --------
    >>> mib, value = call_memory(lambda: 42)
    >>> value, mib > 0
    (42, True)
    """
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
        result = func()
        return torch.cuda.max_memory_allocated() / 2**20, result

    peak = _rss_bytes()
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.02):
            peak = max(peak, _rss_bytes())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = func()
    finally:
        done.set()
        sampler.join()
    return max(peak, _rss_bytes()) / 2**20, result


_ORDER_MARK = re.compile(r"^\.\. reading order:[ \t]*$", re.MULTILINE)


def read_reading_order(folder: str | Path) -> list[str]:
    r"""The script names listed under ``.. reading order:`` in a family's header, in order.

    Returns an empty list when the folder has no header or the header no such list.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "GALLERY_HEADER.rst").write_text(
    ...     "T\n-\n\n.. reading order:\n   plot_b.py\n   plot_a.py\n\nAfter.\n")
    >>> read_reading_order(folder)
    ['plot_b.py', 'plot_a.py']
    """
    header = Path(folder) / "GALLERY_HEADER.rst"
    if not header.is_file():
        return []
    text = header.read_text(encoding="utf-8")
    match = _ORDER_MARK.search(text)
    if match is None:
        return []
    names = []
    for line in text[match.end() :].splitlines()[1:]:
        if not line.startswith(" ") or not line.strip():
            break
        names.append(line.strip())
    return names


class ReadingOrder:
    """sphinx-gallery ``within_subsection_order``: the order a family's header lists.

    Each family's ``GALLERY_HEADER.rst`` ends with a reST comment (invisible on the page)::

        .. reading order:
           plot_first.py
           plot_second.py

    A script missing from that list stops the build with a message naming it, so a new
    page cannot land in a random place in the reading order.
    """

    def __init__(self, src_dir: str) -> None:
        self.src_dir = Path(src_dir)
        self.order = read_reading_order(self.src_dir)

    def __call__(self, filename: str) -> tuple[int, str]:
        name = Path(filename).name
        if not self.order:
            return (0, name)
        if name not in self.order:
            msg = (
                f"{self.src_dir / name} is not listed under '.. reading order:' in "
                f"{self.src_dir / 'GALLERY_HEADER.rst'}; add it where a reader should meet it"
            )
            raise ValueError(msg)
        return (self.order.index(name), name)

    def __repr__(self) -> str:
        return f"ReadingOrder({str(self.src_dir)!r})"
