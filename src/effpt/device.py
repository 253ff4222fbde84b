"""Which device a page runs on, which autocast dtype suits it, and a stamp of both.

Every gallery page starts from :func:`pick_device`, so the whole site moves from a
laptop to a GPU runner without edits. The environment variable ``EFFPT_DEVICE``
overrides the automatic choice, e.g. ``EFFPT_DEVICE=cpu`` on a machine with a GPU.
"""

from __future__ import annotations

import os
import platform

import torch

from effpt.machine import Machine, cpu_model, timing_environment

__all__ = [
    "DEVICE_CHOICES",
    "autocast_dtype",
    "available_devices",
    "describe",
    "device_from_name",
    "pick_device",
    "this_machine",
]

#: Names accepted by :func:`device_from_name` and the ``EFFPT_DEVICE`` variable.
DEVICE_CHOICES = ("auto", "cuda", "mps", "cpu")
ENV_VAR = "EFFPT_DEVICE"


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def device_from_name(name: str) -> torch.device:
    """Return the device that ``name`` asks for.

    ``"auto"`` takes the first available of CUDA, MPS and CPU. Asking for a device this
    machine lacks raises :class:`RuntimeError` rather than silently falling back.

    Examples
    --------
    >>> device_from_name("cpu")
    device(type='cpu')
    >>> device_from_name("gpu")
    Traceback (most recent call last):
    ...
    ValueError: device name 'gpu' is not one of 'auto', 'cuda', 'mps', 'cpu'
    """
    if not isinstance(name, str):
        msg = f"device name must be a str, got {type(name).__name__}"
        raise TypeError(msg)
    key = name.strip().lower()
    if key not in DEVICE_CHOICES:
        choices = ", ".join(repr(c) for c in DEVICE_CHOICES)
        msg = f"device name {name!r} is not one of {choices}"
        raise ValueError(msg)
    if key == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if key == "cuda" and not torch.cuda.is_available():
        msg = "device 'cuda' was asked for, but torch.cuda.is_available() is False"
        raise RuntimeError(msg)
    if key == "mps" and not _mps_available():
        msg = "device 'mps' was asked for, but torch.backends.mps.is_available() is False"
        raise RuntimeError(msg)
    return torch.device(key)


def pick_device() -> torch.device:
    """Return the device pages run on: ``$EFFPT_DEVICE`` if set, else the best available.

    Examples
    --------
    >>> import os
    >>> os.environ["EFFPT_DEVICE"] = "cpu"
    >>> pick_device()
    device(type='cpu')
    >>> os.environ["EFFPT_DEVICE"] = "tpu"
    >>> pick_device()
    Traceback (most recent call last):
    ...
    ValueError: EFFPT_DEVICE='tpu' is not valid: device name 'tpu' is not one of 'auto', 'cuda', 'mps', 'cpu'
    >>> del os.environ["EFFPT_DEVICE"]

    Asking for a device this machine lacks (``EFFPT_DEVICE=cuda`` on a laptop) raises
    :class:`RuntimeError` naming the variable and the devices that are available.
    """
    name = os.environ.get(ENV_VAR, "auto")
    try:
        return device_from_name(name)
    except ValueError as exc:
        msg = f"{ENV_VAR}={name!r} is not valid: {exc}"
        raise ValueError(msg) from None
    except RuntimeError as exc:
        msg = (
            f"{ENV_VAR}={name!r} asks for a device this machine lacks ({exc}); "
            f"available here: {', '.join(repr(d) for d in available_devices())}. "
            f"Unset {ENV_VAR} to choose automatically."
        )
        raise RuntimeError(msg) from None


def available_devices() -> list[str]:
    """The device names this machine can run pages on, best first.

    Examples
    --------
    >>> available_devices()[-1]
    'cpu'
    """
    found = [
        name for name, ok in (("cuda", torch.cuda.is_available()), ("mps", _mps_available())) if ok
    ]
    return [*found, "cpu"]


def autocast_dtype(device: torch.device | str) -> torch.dtype:
    """Return the low-precision dtype that autocast should use on ``device``.

    float16 on CUDA and MPS (fast tensor cores, needs a gradient scaler), bfloat16 on
    CPU (float32's range, no scaler needed, supported by CPU autocast).

    Examples
    --------
    >>> autocast_dtype("cpu")
    torch.bfloat16
    >>> autocast_dtype(torch.device("cuda"))
    torch.float16
    """
    kind = torch.device(device).type
    if kind in ("cuda", "mps"):
        return torch.float16
    if kind == "cpu":
        return torch.bfloat16
    msg = f"no autocast dtype is known for device type {kind!r}; expected cuda, mps or cpu"
    raise ValueError(msg)


def torch_version() -> str:
    """Return torch's version without the local build label (``2.13.0+cpu`` → ``2.13.0``).

    Examples
    --------
    >>> torch_version().count(".") >= 2
    True
    """
    return torch.__version__.split("+", 1)[0]


def _cpu_name() -> str:
    """The CPU's model name (:func:`effpt.machine.cpu_model`)."""
    return cpu_model()


def this_machine(device: torch.device | str | None = None) -> Machine:
    """The :class:`~effpt.machine.Machine` that ``device`` (default: :func:`pick_device`) is on.

    Its ``environment`` holds the timing variables set in this process
    (:func:`effpt.machine.timing_environment`), on every kind of device.

    Examples
    --------
    >>> m = this_machine("cpu")
    >>> m.kind, m.threads == torch.get_num_threads(), m.torch == torch_version()
    ('cpu', True, True)
    >>> this_machine("meta").name
    'meta device'
    """
    dev = pick_device() if device is None else torch.device(device)
    env = timing_environment()
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev)
        return Machine("cuda", name, None, str(torch.version.cuda), torch_version(), env)
    if dev.type == "mps":
        name = f"Apple {platform.machine()} GPU (MPS)"
        return Machine("mps", name, None, None, torch_version(), env)
    if dev.type != "cpu":
        return Machine(dev.type, f"{dev} device", None, None, torch_version(), env)
    model = _cpu_name()
    arch = platform.machine()
    label = f"{arch} CPU" if model in ("", arch) else f"{arch} CPU ({model})"
    return Machine("cpu", label, torch.get_num_threads(), None, torch_version(), env)


def describe(device: torch.device | str | None = None) -> str:
    """Return one line naming the hardware and versions, for stamping pages and records.

    For example ``"NVIDIA H100 80GB HBM3 · CUDA 13.0 · torch 2.13.0"`` or
    ``"x86_64 CPU (AMD EPYC 9B14), 2 threads · torch 2.13.0"``. A device type this
    module has no details for (``meta``, ``xpu``, ...) is named as it is, never as the CPU.
    It is ``str(this_machine(device))``: files store :func:`this_machine`'s fields.

    Examples
    --------
    >>> line = describe("cpu")
    >>> "CPU" in line and f"{torch.get_num_threads()} thread" in line
    True
    >>> f"· torch {torch_version()}" in line
    True
    >>> describe("meta").startswith("meta device")
    True

    A timing variable set in the environment ends the line, ``NAME=value``, e.g.
    ``"x86_64 CPU, 1 thread · torch 2.13.0 · OMP_NUM_THREADS=1"``.
    """
    return str(this_machine(device))
