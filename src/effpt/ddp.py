"""Two real processes training with autocast under DistributedDataParallel, safely.

Worker functions started with the ``spawn`` method must be importable by the child
process, so the worker of the DDP page lives here rather than on the page. The launcher
around it is what makes a distributed page safe to execute inside a documentation build:

- :func:`free_port` asks the operating system for a free TCP port (and
  :func:`run_ddp` retries with a new one if another program takes it first);
- every rank's process group has a bounded timeout, and the parent gives up after
  ``DDPConfig.timeout_s`` seconds in all, terminating the ranks, so a rank that
  hangs fails the page with :class:`DDPTimeoutError` instead of hanging the build;
- a rank that raises makes the others stop and surfaces as :class:`DDPWorkerError`
  with the rank's traceback;
- each rank destroys its process group on every exit path (``try``/``finally``).

The model, :class:`AutocastMLP`, enters :func:`torch.autocast` inside its own
``forward``: autocast state is thread-local, so this is the placement that reaches every
rank and every thread that runs the forward pass.
"""

from __future__ import annotations

import copy
import json
import socket
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as tmp
from torch import nn
from torch.multiprocessing.spawn import ProcessException
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel

__all__ = [
    "AutocastMLP",
    "DDPConfig",
    "DDPTimeoutError",
    "DDPWorkerError",
    "free_port",
    "run_ddp",
    "worker",
]

_FAULTS = (None, "raise", "hang")
_PORT_TAKEN = ("address already in use", "eaddrinuse")


class DDPWorkerError(RuntimeError):
    """A rank exited with an error; the message holds its rank and traceback."""


class DDPTimeoutError(TimeoutError):
    """The ranks did not all finish within ``DDPConfig.timeout_s``; they were terminated."""


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that was free a moment ago (the OS picks it).

    Another program may take the port before it is used; :func:`run_ddp` retries then.

    Examples
    --------
    >>> port = free_port()
    >>> 1024 <= port <= 65535
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class AutocastMLP(nn.Module):
    """A two-layer MLP whose ``forward`` runs under :func:`torch.autocast`.

    ``autocast_dtype=None`` disables autocast (a float32 reference). The attribute
    ``last_autocast`` records whether autocast was on during the last forward.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> model = AutocastMLP(4, 8, "cpu", torch.bfloat16)
    >>> out = model(torch.randn(3, 4))
    >>> out.shape, out.dtype, model.last_autocast
    (torch.Size([3, 1]), torch.bfloat16, True)
    """

    def __init__(
        self, features: int, hidden: int, device_type: str, autocast_dtype: torch.dtype | None
    ) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.fc2 = nn.Linear(hidden, 1)
        self.device_type = device_type
        self.autocast_dtype = autocast_dtype
        self.last_autocast = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map ``x`` of shape ``(batch, features)`` to ``(batch, 1)``, under autocast."""
        enabled = self.autocast_dtype is not None
        dtype = self.autocast_dtype or torch.float32
        with torch.autocast(self.device_type, dtype=dtype, enabled=enabled):
            self.last_autocast = torch.is_autocast_enabled(self.device_type)
            return self.fc2(F.relu(self.fc1(x)))  # (batch, 1)


@dataclass(frozen=True)
class DDPConfig:
    """What :func:`run_ddp` runs: sizes, backend, device and the time it may take.

    ``backend``/``device_type`` of ``None`` choose NCCL on CUDA when this machine has a
    GPU for every rank, else gloo on CPU. ``fault`` makes rank ``fault_rank`` raise or
    hang on purpose, to exercise the failure paths.
    """

    world_size: int = 2
    steps: int = 5
    batch: int = 32
    features: int = 16
    hidden: int = 64
    lr: float = 0.05
    timeout_s: float = 60.0
    backend: str | None = None
    device_type: str | None = None
    fault: str | None = None
    fault_rank: int = 1

    def __post_init__(self) -> None:
        for name in ("world_size", "steps", "batch", "features", "hidden"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                msg = f"{name} must be an int >= 1, got {value!r}"
                raise ValueError(msg)
        if not (isinstance(self.timeout_s, (int, float)) and 0 < self.timeout_s < 3600):
            msg = f"timeout_s must be a number of seconds in (0, 3600), got {self.timeout_s!r}"
            raise ValueError(msg)
        if self.fault not in _FAULTS:
            msg = f"fault must be one of {_FAULTS}, got {self.fault!r}"
            raise ValueError(msg)

    def resolved(self) -> DDPConfig:
        """This config with ``backend`` and ``device_type`` filled in for this machine."""
        enough_gpus = torch.cuda.is_available() and torch.cuda.device_count() >= self.world_size
        device_type = self.device_type or ("cuda" if enough_gpus else "cpu")
        backend = self.backend or ("nccl" if device_type == "cuda" else "gloo")
        return _replace(self, device_type=device_type, backend=backend)


def _replace(config: DDPConfig, **changes: Any) -> DDPConfig:
    return DDPConfig(**{**config.__dict__, **changes})


def _flat_grad(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])  # (n_params,)


def _train(rank: int, config: DDPConfig, device: torch.device) -> dict[str, Any]:
    """One rank's work: check the gradient averaging once, then train a few steps."""
    low = torch.float16 if device.type == "cuda" else torch.bfloat16
    torch.manual_seed(0)  # every rank builds the same weights (DDP also broadcasts rank 0's)
    model = AutocastMLP(config.features, config.hidden, device.type, low).to(device)
    local = copy.deepcopy(model)  # same weights, no DDP: this rank's own gradient
    ddp = DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )

    gen = torch.Generator(device="cpu").manual_seed(1000 + rank)  # a different shard per rank
    x = torch.randn(config.batch, config.features, generator=gen).to(device)  # (batch, features)
    y = x[:, :1].sin().to(device)  # (batch, 1)

    F.mse_loss(local(x).float(), y).backward()
    F.mse_loss(ddp(x).float(), y).backward()  # DDP all-reduces (averages) the gradients here
    own, averaged = _flat_grad(local), _flat_grad(model)
    every = [torch.empty_like(own) for _ in range(config.world_size)]
    dist.all_gather(every, own)
    expected = torch.stack(every).mean(dim=0)  # (n_params,)

    scaler = torch.amp.GradScaler(device.type, enabled=low == torch.float16)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
    losses = []
    for _ in range(config.steps):
        optimizer.zero_grad(set_to_none=True)
        out = ddp(x)  # (batch, 1), in the autocast dtype
        loss = F.mse_loss(out.float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())

    checksum = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double().sum()
    sums = [torch.empty_like(checksum) for _ in range(config.world_size)]
    dist.all_gather(sums, checksum)
    return {
        "rank": rank,
        "backend": dist.get_backend(),
        "device": str(device),
        "autocast_dtype": str(low).removeprefix("torch."),
        "autocast_in_forward": bool(model.last_autocast),
        "output_dtype": str(out.dtype).removeprefix("torch."),
        "grad_vs_mean": (averaged - expected).abs().max().item(),
        "grad_vs_own": (averaged - own).abs().max().item(),
        "losses": losses,
        "param_spread": (max(sums) - min(sums)).item(),
    }


def worker(rank: int, config: DDPConfig, port: int, outdir: str) -> None:
    """Entry point of one rank (what :func:`torch.multiprocessing.spawn` calls).

    Joins the process group at ``127.0.0.1:port``, runs the rank's work and writes its
    result to ``outdir/rank<rank>.json``. The process group is destroyed however the
    work ends.
    """
    torch.set_num_threads(1)  # the ranks share this machine's cores
    if config.fault == "hang" and rank == config.fault_rank:
        time.sleep(10 * config.timeout_s)  # never joins: the others must not wait forever
    device = torch.device("cpu")
    if config.device_type == "cuda":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    dist.init_process_group(
        config.backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=config.world_size,
        timeout=timedelta(seconds=config.timeout_s),
    )
    try:
        if config.fault == "raise" and rank == config.fault_rank:
            msg = f"rank {rank} fails on purpose (DDPConfig.fault='raise')"
            raise RuntimeError(msg)
        result = _train(rank, config, device)
        Path(outdir, f"rank{rank}.json").write_text(json.dumps(result), encoding="utf-8")
    finally:
        dist.destroy_process_group()


def _stop(processes: list[Any], grace_s: float = 5.0) -> None:
    """Terminate, then kill, any of ``processes`` still alive; reap them all."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    end = time.monotonic() + grace_s
    for process in processes:
        process.join(max(0.0, end - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def _run_once(config: DDPConfig, port: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="effpt-ddp-") as outdir:
        context = tmp.spawn(
            worker, args=(config, port, outdir), nprocs=config.world_size, join=False
        )
        deadline = time.monotonic() + config.timeout_s
        try:
            while not context.join(timeout=max(0.0, deadline - time.monotonic()), grace_period=5):
                if time.monotonic() >= deadline:
                    alive = [r for r, p in enumerate(context.processes) if p.is_alive()]
                    msg = (
                        f"DDP ranks {alive} of {config.world_size} were still running after "
                        f"{config.timeout_s:g} s (DDPConfig.timeout_s); all ranks were terminated"
                    )
                    raise DDPTimeoutError(msg)
        except ProcessException as exc:
            msg = f"DDP rank {exc.error_index} (pid {exc.error_pid}) failed: {str(exc).strip()}"
            raise DDPWorkerError(msg) from None
        finally:
            _stop(context.processes)
        paths = [Path(outdir, f"rank{rank}.json") for rank in range(config.world_size)]
        return [json.loads(path.read_text(encoding="utf-8")) for path in paths]


def run_ddp(config: DDPConfig | None = None, *, attempts: int = 3) -> list[dict[str, Any]]:
    """Spawn ``config.world_size`` ranks running :func:`worker`; return their results.

    Each result is a dict with the rank's ``losses``, the ``backend``, the autocast
    dtype, whether autocast was on inside ``forward`` and three checks:
    ``grad_vs_mean`` (largest difference between the DDP gradient and the mean of all
    ranks' own gradients), ``grad_vs_own`` (the same against this rank's own gradient)
    and ``param_spread`` (how far the ranks' weights drifted apart). A port that was
    taken in the meantime is retried with a fresh one, up to ``attempts`` times.

    Raises
    ------
    DDPWorkerError
        A rank raised or died; the message holds its traceback.
    DDPTimeoutError
        The ranks were still running after ``config.timeout_s`` seconds.

    Examples
    --------
    >>> run_ddp(DDPConfig(world_size=0))
    Traceback (most recent call last):
    ...
    ValueError: world_size must be an int >= 1, got 0
    """
    config = (config or DDPConfig()).resolved()
    if not isinstance(attempts, int) or attempts < 1:
        msg = f"attempts must be an int >= 1, got {attempts!r}"
        raise ValueError(msg)
    for attempt in range(1, attempts + 1):
        try:
            return _run_once(config, free_port())
        except DDPWorkerError as exc:
            port_taken = any(mark in str(exc).lower() for mark in _PORT_TAKEN)
            if not port_taken or attempt == attempts:
                raise
    raise AssertionError  # pragma: no cover  (the loop returns or raises)
