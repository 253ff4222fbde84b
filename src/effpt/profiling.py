"""Rows of one kind from the profiler's ``key_averages()``, so that no sum mixes two kinds.

:meth:`torch.profiler.profile.key_averages` groups events by name *and* by where they
were recorded, so one name can have several rows. On a CUDA GPU a
:func:`~torch.profiler.record_function` label has a row for its span on the CPU thread
and a ``gpu_user_annotation`` row for its span on the device; every kernel has a row of
its own, while the operator that launched it also carries its time as
``self_device_time_total``. Summing every row counts each kernel twice and adds each
label's whole span on top; reading rows into a dict by name keeps whichever came last.
On a CPU there is one kind of row per name, which is why such code looks right there.

:func:`profiler_rows` picks the rows of one kind, by name:

* ``"operators"``: operators, as recorded on the CPU thread (``aten::mm``); their self
  CPU times, and on CUDA their self device times (the kernels each one launched),
  count every piece of work once;
* ``"labels"``: :func:`~torch.profiler.record_function` labels and the ones torch adds
  (``Optimizer.step#Adam.step``), as recorded on the CPU thread; memory is attributed
  to these rows, the device's included;
* ``"host"``: both of the above: every row recorded on the CPU thread; their self
  times add up to the thread's time inside the profiled labels and operators;
* ``"kernels"``: the work recorded on the device (kernels, copies, memsets);
* ``"device labels"``: the labels' spans on the device (``gpu_user_annotation``),
  which contain kernels and are not work of their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["ROW_KINDS", "profiler_rows"]

#: The kinds of row :func:`profiler_rows` tells apart.
ROW_KINDS = ("operators", "labels", "host", "kernels", "device labels")


def _on_host(row: Any) -> bool:
    """Whether a row was recorded on the CPU thread (its ``device_type`` is the CPU's)."""
    device_type = getattr(row, "device_type", None)
    return getattr(device_type, "name", str(device_type)).rsplit(".", 1)[-1] == "CPU"


def _kind(row: Any) -> str:
    label = bool(getattr(row, "is_user_annotation", False))
    if _on_host(row):
        return "labels" if label else "operators"
    return "device labels" if label else "kernels"


def profiler_rows(events: Iterable[Any], kind: str) -> dict[str, Any]:
    """The rows of ``events`` (``prof.key_averages()``) of one ``kind``, by name.

    ``kind`` is one of :data:`ROW_KINDS`. Two rows of one kind with the same name (from
    ``key_averages(group_by_input_shapes=True)`` or ``group_by_stack_n``) raise
    ValueError naming it: a dict by name would keep one of them silently.

    Examples
    --------
    >>> import torch
    >>> from torch.profiler import profile, record_function
    >>> with profile() as prof:
    ...     with record_function("forward"):
    ...         y = torch.ones(8, 8) @ torch.ones(8, 8)
    >>> sorted(profiler_rows(prof.key_averages(), "labels"))
    ['forward']
    >>> "aten::mm" in profiler_rows(prof.key_averages(), "operators")
    True
    >>> profiler_rows(prof.key_averages(), "kernels")  # a CPU run records no device rows
    {}
    >>> profiler_rows(prof.key_averages(), "ops")
    Traceback (most recent call last):
    ...
    ValueError: kind must be one of 'operators', 'labels', 'host', 'kernels', 'device labels', got 'ops'
    """
    if kind not in ROW_KINDS:
        names = ", ".join(repr(k) for k in ROW_KINDS)
        msg = f"kind must be one of {names}, got {kind!r}"
        raise ValueError(msg)
    wanted = {"operators", "labels"} if kind == "host" else {kind}
    out: dict[str, Any] = {}
    for row in events:
        if _kind(row) not in wanted:
            continue
        if row.key in out:
            msg = (
                f"two {kind!r} rows are named {row.key!r}: group the events by name only "
                "(key_averages() without group_by_input_shapes or group_by_stack_n)"
            )
            raise ValueError(msg)
        out[row.key] = row
    return out
