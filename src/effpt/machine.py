"""The machine a page ran on, as a value: what stamps, records and the torch matrix store.

:func:`effpt.device.this_machine` makes one for a device; ``str()`` of it is the line
:func:`effpt.device.describe` prints. JSON files store its fields (:meth:`Machine.to_dict`)
and read them back with :meth:`Machine.read`, so that no reader parses the line. This
module needs nothing beyond the standard library (tools without torch load it alone).

A machine also carries the environment variables that change timings when they are set
(:data:`TIMING_VARIABLES`, read by :func:`timing_environment`): a run with
``OMP_NUM_THREADS=1`` or ``OMP_WAIT_POLICY=PASSIVE`` is not the same machine as one
without, and its stamp and records say so.

:func:`bfloat16_support` says whether this CPU has native bfloat16 instructions and
whether torch's oneDNN bfloat16 kernels are in use here: where they are not, a bfloat16
matrix product or convolution falls back to a generic kernel many times slower than
float32. It imports torch only when it must ask it. :func:`load_line` prints the load
average beside the cores, for verdicts that other work on the machine can decide.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BFLOAT16_FLAGS",
    "TIMING_VARIABLES",
    "Bfloat16Support",
    "Machine",
    "bfloat16_support",
    "cpu_model",
    "load_line",
    "timing_environment",
]

#: Environment variables that change how fast torch runs when they are set (thread
#: counts, how OpenMP's idle threads wait, the instruction set of the CPU kernels and of
#: oneDNN; on CUDA, synchronous launches and the allocator's settings).
TIMING_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "KMP_BLOCKTIME",
    "GOMP_SPINCOUNT",
    "OMP_PROC_BIND",
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "CUDA_LAUNCH_BLOCKING",
    "PYTORCH_CUDA_ALLOC_CONF",
)
_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
_SETTING = re.compile(r"([A-Z][A-Z0-9_]*)=(.*)")


def cpu_model(cpuinfo: str | None = None) -> str:
    r"""The CPU's model name as Linux tells it, else the architecture (torch-free).

    ``cpuinfo`` is the text of ``/proc/cpuinfo`` (default: read it where it exists).
    Both this library's run stamps and the evidence tool (which loads this module alone)
    name CPUs by it.

    Examples
    --------
    >>> cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 9R14 96-Core Processor\n")
    'AMD EPYC 9R14 96-Core Processor'
    >>> cpu_model("processor\t: 0\n") != ""  # no model name: the architecture
    True
    """
    import platform  # noqa: PLC0415  (rarely needed)

    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8")
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


def timing_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of :data:`TIMING_VARIABLES` set in ``environ`` (default: this process's).

    What a stamp, a record or a machine's evidence file names beside its timings; an
    empty dict means torch ran with its own defaults.

    Examples
    --------
    >>> timing_environment({"OMP_WAIT_POLICY": "PASSIVE", "MPLBACKEND": "Agg", "HOME": "/root"})
    {'OMP_WAIT_POLICY': 'PASSIVE'}
    >>> timing_environment({})
    {}
    """
    env = os.environ if environ is None else environ
    return {name: env[name] for name in TIMING_VARIABLES if name in env}


@dataclass(frozen=True)
class Machine:
    """The hardware and torch version a page ran on, as fields rather than a line of text.

    ``kind`` is the device type (``"cpu"``, ``"cuda"``, ``"mps"``, or another torch
    device type such as ``"meta"``); ``name`` names the processor or GPU as printed
    (``"x86_64 CPU (AMD EPYC 9B14)"``, ``"NVIDIA H100 80GB HBM3"``); ``threads`` is the
    CPU's thread count (CPU only), ``cuda`` the CUDA version torch was built with (CUDA
    only), ``torch`` torch's version, ``environment`` the timing variables that were set
    (:func:`timing_environment`; none by default). ``str()`` gives the line that
    :func:`~effpt.device.describe` prints, the variables set at its end.

    Examples
    --------
    >>> m = Machine("cuda", "NVIDIA H100 80GB HBM3", None, "12.8", "2.13.0")
    >>> str(m)
    'NVIDIA H100 80GB HBM3 · CUDA 12.8 · torch 2.13.0'
    >>> Machine.from_dict(m.to_dict()) == m
    True
    >>> str(Machine("cpu", "x86_64 CPU (AMD EPYC 9B14)", 1, None, "2.6.0"))
    'x86_64 CPU (AMD EPYC 9B14), 1 thread · torch 2.6.0'
    >>> str(Machine("cpu", "x86_64 CPU", 2, None, "2.13.0", {"OMP_WAIT_POLICY": "PASSIVE"}))
    'x86_64 CPU, 2 threads · torch 2.13.0 · OMP_WAIT_POLICY=PASSIVE'
    >>> Machine("cpu", "x86_64 CPU", None, None, "2.13.0")
    Traceback (most recent call last):
    ...
    ValueError: machine field 'threads' must be a positive int on a CPU, got None
    """

    kind: str
    name: str
    threads: int | None
    cuda: str | None
    torch: str
    environment: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        env = self.environment
        if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and _NAME.fullmatch(k) and isinstance(v, str) for k, v in env.items()
        ):
            msg = (
                "machine field 'environment' must map variable names (A-Z, 0-9, _) "
                f"to str values, got {env!r}"
            )
            raise ValueError(msg)
        object.__setattr__(self, "environment", dict(sorted(env.items())))
        for field_name in ("kind", "name", "torch"):
            value = getattr(self, field_name)
            if not isinstance(value, str) or not value.strip():
                msg = f"machine field {field_name!r} must be a non-empty str, got {value!r}"
                raise ValueError(msg)
        cpu, cuda = self.kind == "cpu", self.kind == "cuda"
        threads_ok = isinstance(self.threads, int) and not isinstance(self.threads, bool)
        if cpu and not (threads_ok and self.threads > 0):
            msg = f"machine field 'threads' must be a positive int on a CPU, got {self.threads!r}"
            raise ValueError(msg)
        if not cpu and self.threads is not None:
            msg = f"machine field 'threads' is for a CPU only, got {self.threads!r} on {self.kind}"
            raise ValueError(msg)
        if cuda and not (isinstance(self.cuda, str) and self.cuda.strip()):
            msg = f"machine field 'cuda' must be a non-empty str on CUDA, got {self.cuda!r}"
            raise ValueError(msg)
        if not cuda and self.cuda is not None:
            msg = f"machine field 'cuda' is for CUDA only, got {self.cuda!r} on {self.kind}"
            raise ValueError(msg)

    @property
    def hardware(self) -> str:
        """The processor or GPU and, on a CPU, its thread count, e.g. ``"x86_64 CPU, 2 threads"``."""
        if self.threads is None:
            return self.name
        return f"{self.name}, {self.threads} thread{'s' if self.threads != 1 else ''}"

    def __hash__(self) -> int:
        fields = (self.kind, self.name, self.threads, self.cuda, self.torch)
        return hash((*fields, tuple(self.environment.items())))

    @property
    def settings(self) -> list[str]:
        """The timing variables set, as ``NAME=value`` strings (empty when none was set)."""
        return [f"{name}={value}" for name, value in self.environment.items()]

    def __str__(self) -> str:
        cuda = [f"CUDA {self.cuda}"] if self.cuda is not None else []
        return " · ".join([self.hardware, *cuda, f"torch {self.torch}", *self.settings])

    def to_dict(self) -> dict[str, Any]:
        """The machine as a JSON-ready dict (:meth:`from_dict` reads it back)."""
        return {
            "kind": self.kind,
            "name": self.name,
            "threads": self.threads,
            "cuda": self.cuda,
            "torch": self.torch,
            "environment": dict(self.environment),
        }

    @classmethod
    def from_dict(cls, data: object) -> Machine:
        """The machine :meth:`to_dict` wrote; a missing, unknown or bad field raises ValueError.

        A file written before machines carried their ``environment`` has none: it reads
        as a machine with no timing variable set.

        Examples
        --------
        >>> Machine.from_dict({"kind": "mps", "name": "Apple arm64 GPU (MPS)", "torch": "2.6.0"})
        Traceback (most recent call last):
        ...
        ValueError: machine: missing fields ['cuda', 'threads']
        """
        if not isinstance(data, dict):
            msg = f"machine must be a JSON object, got {type(data).__name__}"
            raise TypeError(msg)
        names = {"kind", "name", "threads", "cuda", "torch"}
        missing = sorted(names - data.keys())
        extra = sorted(data.keys() - names - {"environment"})
        if missing or extra:
            msg = (
                f"machine: missing fields {missing}"
                if missing
                else f"machine: unknown fields {extra}"
            )
            raise ValueError(msg)
        return cls(**data)

    @classmethod
    def from_text(cls, text: str) -> Machine:
        """The machine a line of :func:`~effpt.device.describe` names, for files written before the fields.

        Stamps, records and torch-matrix files once stored only that line; this reads
        them. A line that is not one :func:`~effpt.device.describe` writes raises ValueError.

        Examples
        --------
        >>> Machine.from_text("x86_64 CPU (Intel(R) Xeon(R) Processor), 2 threads · torch 2.6.0")
        Machine(kind='cpu', name='x86_64 CPU (Intel(R) Xeon(R) Processor)', threads=2, cuda=None, torch='2.6.0', environment={})
        >>> Machine.from_text("x86_64 CPU, 1 thread · torch 2.13.0 · OMP_NUM_THREADS=1").environment
        {'OMP_NUM_THREADS': '1'}
        >>> Machine.from_text("NVIDIA H100 80GB HBM3 · CUDA 12.8 · torch 2.13.0").kind
        'cuda'
        >>> Machine.from_text("a fast box")
        Traceback (most recent call last):
        ...
        ValueError: machine line 'a fast box' is not one that effpt.device.describe() writes
        """
        if not isinstance(text, str):
            msg = f"machine must be a JSON object or a str, got {type(text).__name__}"
            raise TypeError(msg)
        parts = text.split(" · ")
        settings = {}
        while len(parts) > 1 and (setting := _SETTING.fullmatch(parts[-1])):
            settings[setting.group(1)] = setting.group(2)
            parts.pop()
        machine = cls._from_parts(text, parts)
        return cls(**{**machine.to_dict(), "environment": settings})

    @classmethod
    def _from_parts(cls, text: str, parts: list[str]) -> Machine:
        torch_part = parts.pop() if len(parts) > 1 and parts[-1].startswith("torch ") else ""
        version = torch_part.removeprefix("torch ")
        cpu = re.fullmatch(r"(.+), (\d+) threads?", parts[0]) if len(parts) == 1 else None
        if version and len(parts) == 2 and parts[1].startswith("CUDA "):
            return cls("cuda", parts[0], None, parts[1].removeprefix("CUDA "), version)
        if version and len(parts) == 1 and parts[0].endswith(" GPU (MPS)"):
            return cls("mps", parts[0], None, None, version)
        if version and cpu:
            return cls("cpu", cpu.group(1), int(cpu.group(2)), None, version)
        if version and len(parts) == 1 and parts[0].endswith(" device"):
            return cls(
                parts[0].removesuffix(" device").split(":")[0], parts[0], None, None, version
            )
        msg = f"machine line {text!r} is not one that effpt.device.describe() writes"
        raise ValueError(msg)

    @classmethod
    def read(cls, data: object, where: object = None) -> Machine:
        """The machine a JSON file stored: its fields, or (in an older file) its line.

        A bad one raises ValueError (TypeError for neither an object nor a str) whose
        message ``where`` (a file, a file and line) starts; without ``where``, as it is.

        Examples
        --------
        >>> Machine.read({"kind": "cpu"}, where="stamp.json")
        Traceback (most recent call last):
        ...
        ValueError: stamp.json: field 'machine': machine: missing fields ['cuda', 'name', 'threads', 'torch']
        """
        try:
            return cls.from_text(data) if isinstance(data, str) else cls.from_dict(data)
        except (TypeError, ValueError) as exc:
            if where is None:
                raise
            msg = f"{where}: field 'machine': {exc}"
            raise type(exc)(msg) from None

    @classmethod
    def in_file(cls, data: object, where: object) -> Machine:
        """The machine under the key ``"machine"`` of a JSON object read from ``where``.

        Examples
        --------
        >>> Machine.in_file({"executed_at": "2026-11-25 04:00 UTC"}, where="plot_a.stamp.json")
        Traceback (most recent call last):
        ...
        ValueError: plot_a.stamp.json: no 'machine' field
        """
        if not isinstance(data, dict) or "machine" not in data:
            msg = f"{where}: no 'machine' field"
            raise ValueError(msg)
        return cls.read(data["machine"], where)


#: The names ``/proc/cpuinfo`` gives native bfloat16 arithmetic: x86's AVX512-BF16 and
#: AMX-BF16 (on its ``flags`` line), Arm's BF16 (on its ``Features`` line).
BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
_FLAG_LINE = re.compile(r"^(?:flags|features)\s*:(.*)$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Bfloat16Support:
    """What decides whether bfloat16 products are fast on this CPU.

    ``instructions``: the native bfloat16 instructions the CPU lists (``()`` for none),
    or ``None`` where there is no ``/proc/cpuinfo`` or it lists no flags. ``onednn``: whether torch
    sends bfloat16 products to oneDNN here, or ``None`` where this torch cannot say.
    oneDNN needs AVX-512 or Arm's BF16 for them, and ``ONEDNN_MAX_CPU_ISA`` can cap it
    below that: a CPU can list the instructions while torch does not use them.
    """

    instructions: tuple[str, ...] | None
    onednn: bool | None

    def __str__(self) -> str:
        if self.instructions is None:
            listed = "unknown (no CPU flags in /proc/cpuinfo here)"
        else:
            listed = ", ".join(self.instructions) or "none listed in /proc/cpuinfo"
        kernels = {
            True: "oneDNN's",
            False: "none of oneDNN's (generic fallback kernels)",
            None: "unknown (this torch cannot say)",
        }[self.onednn]
        return f"native bfloat16 instructions: {listed}; bfloat16 kernels: {kernels}"


def bfloat16_support(cpuinfo: str | None = None, onednn: bool | None = None) -> Bfloat16Support:
    r"""Whether this CPU has native bfloat16 instructions and torch uses oneDNN for them.

    ``cpuinfo`` is the text of ``/proc/cpuinfo`` (default: read it where it exists); only
    its ``flags``/``Features`` lines count, so a model name that contains "bf16" does
    not. ``onednn`` overrides torch's own answer
    (``torch.ops.mkldnn._is_mkldnn_bf16_supported``, asked when it is ``None``).

    Examples
    --------
    >>> text = "model name : AMD EPYC bf16\nflags : fpu avx2 avx512f avx512_bf16\n"
    >>> support = bfloat16_support(text, onednn=False)
    >>> support.instructions
    ('avx512_bf16',)
    >>> print(support)
    native bfloat16 instructions: avx512_bf16; bfloat16 kernels: none of oneDNN's (generic fallback kernels)
    >>> bfloat16_support("flags : fpu avx2 fma\n", onednn=True).instructions
    ()
    >>> bfloat16_support("processor : 0\n", onednn=True).instructions is None
    True
    >>> bfloat16_support(b"flags : avx2", onednn=True)
    Traceback (most recent call last):
    ...
    TypeError: cpuinfo must be the text of /proc/cpuinfo (str) or None, got bytes
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = None
    elif not isinstance(cpuinfo, str):
        msg = (
            f"cpuinfo must be the text of /proc/cpuinfo (str) or None, got {type(cpuinfo).__name__}"
        )
        raise TypeError(msg)
    if onednn is not None and not isinstance(onednn, bool):
        msg = f"onednn must be True, False or None, got {onednn!r}"
        raise TypeError(msg)
    lines = _FLAG_LINE.findall(cpuinfo) if cpuinfo is not None else []
    listed = {flag for line in lines for flag in line.split()}
    instructions = tuple(f for f in BFLOAT16_FLAGS if f in listed) if lines else None
    if onednn is None:
        onednn = _onednn_bfloat16()
    return Bfloat16Support(instructions, onednn)


def _onednn_bfloat16() -> bool | None:
    """torch's own answer: are bfloat16 products sent to oneDNN here? None if unknown."""
    try:
        import torch  # noqa: PLC0415 - this module loads without torch

        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (ImportError, AttributeError, RuntimeError):  # no torch, or built without oneDNN
        return None


def load_line(loadavg: tuple[float, float, float] | None = None, cores: int | None = None) -> str:
    """The last minute's load average beside the cores, as a page prints it.

    ``loadavg`` and ``cores`` default to :func:`os.getloadavg` and :func:`os.cpu_count`;
    where the OS has no load average (Windows) the line says so instead of failing.

    Examples
    --------
    >>> load_line((3.25, 1.0, 0.5), cores=2)
    'load average, last minute: 3.2 on 2 cores'
    >>> load_line((0.0, 0.0, 0.0), cores=1)
    'load average, last minute: 0.0 on 1 core'
    >>> load_line(()).startswith("load average: not reported")
    True
    """
    if cores is None:
        cores = os.cpu_count() or 1
    if loadavg is None and hasattr(os, "getloadavg"):
        try:
            loadavg = os.getloadavg()
        except OSError:  # the OS keeps none
            loadavg = ()
    if not loadavg:
        return f"load average: not reported by this OS; {cores} core{'s' * (cores != 1)}"
    return f"load average, last minute: {loadavg[0]:.1f} on {cores} core{'s' * (cores != 1)}"
