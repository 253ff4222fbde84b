"""Start the ranks of a data-parallel function the way torchrun does, with a deadline.

``torchrun --nproc-per-node=N script.py`` starts N processes that run the script, each
with ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``
and ``MASTER_PORT`` in its environment, so that
:func:`torch.distributed.init_process_group` finds its peers. :func:`launch` does the
same for a function, from inside a running program (a notebook, a documentation
build, a test), and returns what each rank's function returned. It adds what a
program that must never hang needs:

- a deadline: ranks still running after ``timeout_s`` seconds are terminated (then
  killed) and :class:`DDPTimeoutError` is raised;
- a rank that raises or dies stops the others at once, and :class:`DDPWorkerError`
  names it and carries its traceback, or the signal that killed it;
- a rendezvous port that another program takes between being chosen and being bound
  is retried with a fresh one (only torch's rendezvous error counts, never ``fn``'s);
- a rank forked from a process that has initialised CUDA cannot use CUDA (the first
  CUDA call raises "Cannot re-initialize CUDA in forked subprocess"), yet
  :func:`torch.cuda.is_available` still says True there, and code that picks a CUDA
  path from it fails (``torch.distributed.checkpoint``'s file writer copies through a
  CUDA stream). In such a rank ``torch.cuda.is_available()`` returns False.

What each rank runs inside the group is the page's; joining and leaving it is the same
everywhere. :func:`process_group` is that part: it joins the default process group with
a timeout, meets the other ranks at a barrier when the block succeeds (so that no rank
tears down its connections while another still reads from them), and destroys the group
however the block ended.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

__all__ = ["DDPTimeoutError", "DDPWorkerError", "free_port", "launch", "process_group"]

_PORT_TAKEN = ("address already in use", "eaddrinuse")
#: How the rendezvous's own failure to listen ends its traceback: a DistNetworkError on
#: recent torch, the TCP store's bare RuntimeError on torch 2.6.
_RENDEZVOUS_ERRORS = (
    "torch.distributed.distnetworkerror",
    "runtimeerror: the server socket has failed to listen",
)
_START_METHODS = ("fork", "forkserver", "spawn")


class DDPWorkerError(RuntimeError):
    """A rank raised or died; the message names the rank and holds its traceback."""


class DDPTimeoutError(TimeoutError):
    """The ranks did not all finish within ``timeout_s``; they were terminated."""


class _PortTakenError(DDPWorkerError):
    """The rendezvous could not listen on the chosen port: another program took it."""


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that was free a moment ago (the OS picks it).

    Another program may take the port before it is used; :func:`launch` retries then.

    Examples
    --------
    >>> port = free_port()
    >>> 1024 <= port <= 65535
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _rank_main(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    rank: int,
    world_size: int,
    port: int,
    outdir: str,
    cuda_unusable: bool = False,
) -> None:
    """What each started process runs: torchrun's variables, then ``fn``, then its result."""
    if cuda_unusable:  # forked after the parent initialised CUDA: say so to torch's users
        import torch  # noqa: PLC0415  (loaded already: the parent had initialised CUDA)

        torch.cuda.is_available = _cuda_unavailable
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    try:
        result = fn(*args)
        payload = pickle.dumps(result)
        del result
        # A DistributedDataParallel model sits in reference cycles (its hooks refer to
        # it), so its Reducer, and through it the process group with gloo's worker and
        # I/O threads and the TCPStore's, outlive destroy_process_group until the cyclic
        # garbage collector runs, which may be only while Python shuts down. Collect now,
        # while the interpreter is whole, so those threads are joined here and none of
        # them releases a tensor owned by Python during finalization.
        gc.collect()
    except BaseException:  # noqa: BLE001  (every failure is reported to the parent)
        Path(outdir, f"rank{rank}.err").write_text(traceback.format_exc(), encoding="utf-8")
        sys.exit(1)
    partial = Path(outdir, f"rank{rank}.pkl.part")
    partial.write_bytes(payload)
    partial.replace(Path(outdir, f"rank{rank}.pkl"))


def _cuda_unavailable() -> bool:
    """``torch.cuda.is_available`` in a rank forked after its parent initialised CUDA."""
    return False


def _cuda_poisons_fork() -> bool:
    """Whether a process forked now could not use CUDA: this one has initialised it."""
    torch = sys.modules.get("torch")  # never import torch just to ask
    return torch is not None and bool(torch.cuda.is_initialized())


def _stop(processes: Sequence[Any], grace_s: float = 5.0) -> None:
    """Terminate, then kill, any of ``processes`` still alive; reap them all.

    Processes that were never started (a start that failed stops the others) are
    left alone: joining one would raise and hide why the start failed.
    """
    processes = [p for p in processes if getattr(p, "_popen", True) is not None]
    for process in processes:
        if process.is_alive():
            process.terminate()
    end = time.monotonic() + grace_s
    for process in processes:
        process.join(max(0.0, end - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def _failure(rank: int, exitcode: int, outdir: str) -> str:
    err = Path(outdir, f"rank{rank}.err")
    if err.is_file():
        return f"rank {rank} raised:\n{err.read_text(encoding='utf-8').rstrip()}"
    if exitcode < 0:
        return f"rank {rank} was killed by signal {signal.Signals(-exitcode).name}"
    return f"rank {rank} exited with code {exitcode}"


def _port_taken(rank: int, outdir: str, port: int) -> bool:
    """Whether ``rank`` failed because the rendezvous could not listen on ``port``.

    Only torch's own rendezvous error counts (the last line of the traceback is a
    ``DistNetworkError``, or on torch 2.6 the TCP store's "server socket has failed to
    listen", naming the port as in use): an error of ``fn`` that merely
    mentions "address already in use" is ``fn``'s, and ``fn`` is not run again.
    """
    err = Path(outdir, f"rank{rank}.err")
    if not err.is_file():
        return False
    last = err.read_text(encoding="utf-8").rstrip().rsplit("\n", 1)[-1].lower()
    return (
        last.startswith(_RENDEZVOUS_ERRORS)
        and f"port: {port}," in last
        and any(mark in last for mark in _PORT_TAKEN)
    )


def _first_failure(failed: list[tuple[int, int]], outdir: str) -> tuple[int, int]:
    """The rank that failed first: the oldest traceback, else the lowest rank."""

    def when(item: tuple[int, int]) -> float:
        err = Path(outdir, f"rank{item[0]}.err")
        return err.stat().st_mtime if err.is_file() else float("inf")

    return min(failed, key=lambda item: (when(item), item[0]))


def _launch_once(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    world_size: int,
    timeout_s: float,
    context: Any,
    port: int,
) -> list[Any]:
    fork = context.get_start_method() == "fork"
    cuda_unusable = fork and _cuda_poisons_fork()
    with tempfile.TemporaryDirectory(prefix="effpt-ddp-") as outdir:
        processes = [
            context.Process(
                target=_rank_main,
                args=(fn, args, rank, world_size, port, outdir, cuda_unusable),
                name=f"effpt-ddp-rank{rank}",
            )
            for rank in range(world_size)
        ]
        deadline = time.monotonic() + timeout_s
        try:
            for rank, process in enumerate(processes):
                try:
                    process.start()
                except Exception as exc:  # spawn pickles fn and args here
                    method = context.get_start_method()
                    msg = (
                        f"DDP rank {rank} could not be started by {method!r}: "
                        f"{type(exc).__name__}: {exc} (fn and args must pickle)"
                    )
                    raise DDPWorkerError(msg) from exc
            while True:
                codes = [p.exitcode for p in processes]
                failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
                if failed:
                    rank, code = _first_failure(failed, outdir)
                    others = [r for r, _ in failed if r != rank]
                    also = f" (then rank(s) {others} failed too)" if others else ""
                    msg = f"DDP {_failure(rank, code, outdir)}{also}"
                    taken = _port_taken(rank, outdir, port)
                    raise (_PortTakenError if taken else DDPWorkerError)(msg)
                if all(c == 0 for c in codes):
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    alive = [r for r, c in enumerate(codes) if c is None]
                    msg = (
                        f"DDP ranks {alive} of {world_size} were still running after "
                        f"{timeout_s:g} s (timeout_s); all ranks were terminated"
                    )
                    raise DDPTimeoutError(msg)
                # Wait on the ranks this pass saw running. Looking at exit codes again
                # here could miss a rank that exited in between: it would be neither
                # counted as failed above nor waited on, and the loop would sleep on
                # the others until they finished or the deadline came.
                running = [p.sentinel for p, c in zip(processes, codes, strict=True) if c is None]
                if wait(running, timeout=left):
                    time.sleep(0.01)  # a closed sentinel may precede the exit status
        finally:
            _stop(processes)
        missing = [r for r in range(world_size) if not Path(outdir, f"rank{r}.pkl").is_file()]
        if missing:  # fn called os._exit(0), or something killed the rank's Python quietly
            msg = (
                f"DDP rank {missing[0]} exited with status 0 without a result "
                f"(ranks without one: {missing}): did fn call os._exit()?"
            )
            raise DDPWorkerError(msg)
        return [
            pickle.loads(Path(outdir, f"rank{rank}.pkl").read_bytes()) for rank in range(world_size)
        ]


def _check_importable(fn: Callable[..., Any], method: str) -> None:
    """A spawned or forkserver process must import ``fn``; say so now if it cannot."""
    if method == "fork" or getattr(fn, "__module__", None) != "__main__":
        return
    main = sys.modules.get("__main__")
    if getattr(main, "__file__", None) is None:
        name = getattr(fn, "__qualname__", repr(fn))
        # fork exists only on POSIX systems: elsewhere (Windows) moving fn is the way out.
        fix = (
            "pass start_method='fork' or "
            if "fork" in multiprocessing.get_all_start_methods()
            else ""
        )
        msg = (
            f"{name} is defined in a __main__ that has no file (a notebook, an interactive "
            f"session or a sphinx-gallery build), so a process started by {method!r} cannot "
            f"import it: {fix}move {name} into a module (or save the page as a .py file "
            "and run it with python or torchrun)"
        )
        raise ValueError(msg)


def launch(
    fn: Callable[..., Any],
    *,
    world_size: int = 2,
    timeout_s: float = 120.0,
    start_method: str | None = None,
    args: Sequence[Any] = (),
    attempts: int = 3,
) -> list[Any]:
    """Run ``fn(*args)`` in ``world_size`` processes as torchrun would; return their results.

    Each process finds torchrun's variables in its environment (``RANK`` and
    ``LOCAL_RANK`` equal to its index, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
    ``MASTER_ADDR=127.0.0.1`` and a free ``MASTER_PORT``), so ``fn`` calls
    :func:`torch.distributed.init_process_group` exactly as under torchrun. The list
    holds each rank's return value (it must pickle), in rank order.

    ``start_method`` is one of ``"fork"``, ``"forkserver"``, ``"spawn"`` or ``None``
    (the platform's default). Under spawn and forkserver, each process imports ``fn``:
    a function defined in a ``__main__`` without a file (a notebook, a sphinx-gallery
    build) needs ``"fork"``, and :class:`ValueError` says so before anything starts.
    A rank forked after this process initialised CUDA sees
    ``torch.cuda.is_available()`` return False, as CUDA is unusable there; ranks
    started by spawn or forkserver use CUDA as usual.

    ``attempts`` bounds the runs when the rendezvous port was taken between being
    chosen and being bound: only torch's own rendezvous error
    (``DistNetworkError``, the port in use) counts, so ``fn`` is never run again
    because its own error mentions "address already in use".

    Raises
    ------
    DDPWorkerError
        A rank raised or died, could not be started (``fn`` or ``args`` do not pickle
        under spawn or forkserver), or exited with status 0 without a result; the
        message names the rank and holds its traceback or the cause.
    DDPTimeoutError
        The ranks were still running after ``timeout_s`` seconds; all were terminated.

    Examples
    --------
    >>> launch(print, world_size=0)
    Traceback (most recent call last):
    ...
    ValueError: world_size must be an int >= 1, got 0
    >>> launch(print, timeout_s=float("inf"))
    Traceback (most recent call last):
    ...
    ValueError: timeout_s must be a number of seconds in (0, 3600], got inf
    """
    if not callable(fn):
        msg = f"fn must be callable, got {type(fn).__name__}"
        raise TypeError(msg)
    for name, value in (("world_size", world_size), ("attempts", attempts)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            msg = f"{name} must be an int >= 1, got {value!r}"
            raise ValueError(msg)
    number = isinstance(timeout_s, (int, float)) and not isinstance(timeout_s, bool)
    if not number or not 0 < timeout_s <= 3600:
        msg = f"timeout_s must be a number of seconds in (0, 3600], got {timeout_s!r}"
        raise ValueError(msg)
    if start_method is not None and start_method not in _START_METHODS:
        msg = f"start_method must be None or one of {_START_METHODS}, got {start_method!r}"
        raise ValueError(msg)
    args = tuple(args)  # once: an iterator would be empty on a retry
    context = multiprocessing.get_context(start_method)
    _check_importable(fn, context.get_start_method())
    for attempt in range(1, attempts + 1):
        try:
            return _launch_once(fn, args, world_size, timeout_s, context, free_port())
        except _PortTakenError:
            if attempt == attempts:
                raise
    raise AssertionError  # pragma: no cover  (the loop returns or raises)


@contextmanager
def process_group(backend: str, *, timeout: timedelta, **kwargs: Any) -> Iterator[None]:
    """Join the default process group for the block; leave it through a barrier, then destroy it.

    On entry it calls :func:`torch.distributed.init_process_group` with ``backend``,
    ``timeout`` (a collective that waits longer raises instead of hanging) and
    ``kwargs`` (``device_id``, ``store``, ``rank``, ``world_size``, ...); the
    rendezvous comes from torchrun's variables unless ``kwargs`` say otherwise. When the
    block ends normally, every rank waits at :func:`torch.distributed.barrier`: past it,
    all of them are done communicating. However the block ended, garbage is collected
    (a DistributedDataParallel model sits in reference cycles that hold the group's
    threads) and :func:`torch.distributed.destroy_process_group` runs. A block that
    raises skips the barrier: its peers then fail at their next collective within
    ``timeout``, rather than wait for a rank that will never come.

    The gallery page on autocast with DDP writes this block out by hand, as part of its
    lesson; this is the same block for pages where the process group is not the lesson.

    Examples
    --------
    >>> with process_group("gloo", timeout=60):
    ...     pass
    Traceback (most recent call last):
    ...
    TypeError: timeout must be a positive datetime.timedelta, got 60
    """
    if not isinstance(timeout, timedelta):
        msg = f"timeout must be a positive datetime.timedelta, got {timeout!r}"
        raise TypeError(msg)
    if timeout <= timedelta(0):
        msg = f"timeout must be a positive datetime.timedelta, got {timeout!r}"
        raise ValueError(msg)
    import torch.distributed as dist  # noqa: PLC0415  (launch never imports torch)

    dist.init_process_group(backend, timeout=timeout, **kwargs)
    try:
        yield
        dist.barrier()
    finally:
        gc.collect()
        dist.destroy_process_group()
