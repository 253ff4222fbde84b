"""Tests of effpt.ddp.launch: real process groups, every way a rank can fail, bounded in time."""

from __future__ import annotations

import gc
import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import types
import warnings
import weakref
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import effpt.ddp
from effpt.ddp import DDPTimeoutError, DDPWorkerError, free_port, launch

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "examples" / "amp" / "plot_autocast_ddp.py"
START_METHODS = ["fork", "forkserver", "spawn"]


# -- what the ranks run (module level: spawn and forkserver import them) ------------------
def all_reduce_rank(offset: int = 0) -> dict:
    """Join the group from torchrun's variables, sum the ranks, leave cleanly."""
    env = {k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")}
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    try:
        total = torch.tensor([float(dist.get_rank() + offset)])
        dist.all_reduce(total)
        return {"env": env, "sum": total.item(), "pid": os.getpid()}
    finally:
        dist.destroy_process_group()


def raising_rank() -> None:
    if os.environ["RANK"] == "1":
        msg = "rank 1 fails on purpose"
        raise RuntimeError(msg)
    time.sleep(60)  # rank 0 would wait for its peer; it must be stopped, not awaited


def hanging_rank() -> None:
    time.sleep(600)


def aborting_rank() -> None:
    if os.environ["RANK"] == "1":
        os.abort()  # SIGABRT, as a C++ std::terminate would
    time.sleep(60)


def unpicklable_rank() -> object:
    return lambda: None


def _note_collected(path: str) -> None:
    Path(path).write_text(f"finalizing={sys.is_finalizing()}", encoding="utf-8")


def ddp_in_a_cycle_rank(outdir: str) -> int:
    """Train a DDP model a little and leave it to the cyclic collector, which is off."""
    gc.disable()  # as when no collection happens to run before the rank exits
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    try:
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
        model(torch.randn(8, 16)).sum().backward()
        done = weakref.finalize(model, _note_collected, f"{outdir}/rank{dist.get_rank()}")
        done.atexit = False  # record a collection, not the exit
        dist.barrier()
        return dist.get_rank()
    finally:
        dist.destroy_process_group()


def silent_rank() -> int:
    if os.environ["RANK"] == "1":
        os._exit(0)  # status 0, and no result
    return 0


def port_message_rank(log: str) -> None:
    with open(log, "a", encoding="utf-8") as file:
        file.write(os.environ["RANK"] + "\n")
    if os.environ["RANK"] == "0":
        # Wait until rank 1 has logged too: the launcher stops the other ranks as soon as
        # one fails, so on a busy machine rank 1 could be stopped before its first line.
        deadline = time.monotonic() + 30
        while len(Path(log).read_text().split()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        msg = "my own server: address already in use"  # fn's error, not the rendezvous
        raise RuntimeError(msg)
    time.sleep(60)


def dcp_save_rank(path: str) -> bool:
    """Save a checkpoint with DCP's default file writer; say what CUDA looked like here."""
    import torch.distributed.checkpoint as dcp

    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    try:
        with warnings.catch_warnings():
            # torch 2.6's own DCP file writer calls the deprecated tensor.storage(); the
            # warning is torch's, not this code's (pytest's "error" filter would raise it).
            warnings.filterwarnings("ignore", "TypedStorage is deprecated", UserWarning)
            dcp.save({"w": torch.arange(4.0)}, checkpoint_id=path)
        dist.barrier()
        return torch.cuda.is_available()
    finally:
        dist.destroy_process_group()


# -- tests --------------------------------------------------------------------------------
def test_free_port_can_be_bound():
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"world_size": 0}, ValueError, "world_size must be an int >= 1, got 0"),
        ({"world_size": True}, ValueError, "world_size must be an int >= 1, got True"),
        ({"attempts": 0}, ValueError, "attempts must be an int >= 1, got 0"),
        ({"timeout_s": 0}, ValueError, r"timeout_s must be a number of seconds in \(0, 3600\]"),
        ({"timeout_s": float("nan")}, ValueError, "timeout_s must be a number of seconds"),
        ({"start_method": "thread"}, ValueError, "start_method must be None or one of"),
    ],
)
def test_arguments_are_validated(kwargs, error, match):
    with pytest.raises(error, match=match):
        launch(all_reduce_rank, **kwargs)


def test_fn_must_be_callable():
    with pytest.raises(TypeError, match="fn must be callable, got int"):
        launch(3)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_function_of_a_fileless_main_needs_fork(monkeypatch, method):
    fileless = types.ModuleType("__main__")  # what sphinx-gallery and notebooks run in
    monkeypatch.setitem(sys.modules, "__main__", fileless)

    def page_function():
        return 1

    page_function.__module__ = "__main__"
    with pytest.raises(ValueError, match=rf"page_function .* started by '{method}' cannot"):
        launch(page_function, start_method=method)


@pytest.mark.parametrize("method", START_METHODS)
def test_ranks_get_torchruns_variables_and_reduce(method):
    start = time.monotonic()
    results = launch(all_reduce_rank, world_size=2, timeout_s=120, start_method=method, args=(1,))
    assert time.monotonic() - start < 120
    assert [r["env"]["RANK"] for r in results] == ["0", "1"]
    assert [r["env"]["LOCAL_RANK"] for r in results] == ["0", "1"]
    assert all(r["env"]["WORLD_SIZE"] == r["env"]["LOCAL_WORLD_SIZE"] == "2" for r in results)
    assert [r["sum"] for r in results] == [3.0, 3.0]  # (0 + 1) + (1 + 1) on both ranks
    assert len({r["pid"] for r in results} | {os.getpid()}) == 3
    assert multiprocessing.active_children() == []


def test_a_rank_that_raises_fails_fast_with_its_traceback():
    start = time.monotonic()
    with pytest.raises(DDPWorkerError, match=r"(?s)DDP rank 1 raised:.*fails on purpose"):
        launch(raising_rank, timeout_s=60)
    assert time.monotonic() - start < 30  # not the 60 s rank 0 would have slept
    assert multiprocessing.active_children() == []


def test_a_rank_killed_by_a_signal_is_named_with_the_signal():
    with pytest.raises(DDPWorkerError, match="DDP rank 1 was killed by signal SIGABRT"):
        launch(aborting_rank, timeout_s=60, start_method="fork")
    assert multiprocessing.active_children() == []


def test_a_result_that_cannot_be_pickled_is_the_ranks_error():
    with pytest.raises(DDPWorkerError, match=r"(?s)DDP rank 0 raised:.*pickle"):
        launch(unpicklable_rank, world_size=1, timeout_s=60, start_method="fork")


class _RacyProcess:
    """A stand-in for a rank whose exit lands between two looks at its exit code.

    Rank 1 fails (writes its traceback, closes its sentinel) as it starts, but its
    exit code reads None the first time and 1 after; rank 0 runs until stopped.
    """

    def __init__(self, target, args, name):  # noqa: ARG002  (Process's signature)
        self.rank, self.outdir = args[2], args[5]
        self.sentinel, self._write_end = os.pipe()
        self.looks, self.stopped = 0, False

    def start(self):
        if self.rank == 1:
            Path(self.outdir, "rank1.err").write_text("RuntimeError: racy failure")
            os.close(self._write_end)  # the sentinel becomes readable, as at exit

    @property
    def exitcode(self):
        if self.rank == 1:
            self.looks += 1
            return None if self.looks == 1 else 1
        return -signal.SIGTERM if self.stopped else None

    def is_alive(self):
        return self.exitcode is None

    def terminate(self):
        self.stopped = True

    kill = terminate

    def join(self, timeout=None):  # noqa: ARG002
        return None


def test_a_rank_that_exits_between_two_looks_is_not_missed(monkeypatch):
    """The loop must wait on the ranks it saw running, not on a second, later look."""
    fake = types.SimpleNamespace(Process=_RacyProcess, get_start_method=lambda: "fork")
    monkeypatch.setattr(effpt.ddp.multiprocessing, "get_context", lambda _method=None: fake)
    start = time.monotonic()
    with pytest.raises(DDPWorkerError, match="DDP rank 1 raised:\nRuntimeError: racy failure"):
        launch(hanging_rank, timeout_s=20)
    assert time.monotonic() - start < 5  # not the 20 s deadline


def test_ranks_that_hang_are_stopped_at_the_deadline():
    timeout = 5.0
    start = time.monotonic()
    with pytest.raises(DDPTimeoutError, match=r"ranks \[0, 1\] of 2 were still running after 5 s"):
        launch(hanging_rank, timeout_s=timeout, start_method="fork")
    elapsed = time.monotonic() - start
    assert timeout <= elapsed < timeout + 10  # the deadline, plus the terminate grace
    assert multiprocessing.active_children() == []


def test_a_port_taken_in_the_meantime_is_retried(monkeypatch):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        ports = iter([taken])
        real_free_port = effpt.ddp.free_port
        calls = []

        def fake_free_port(host="127.0.0.1"):
            calls.append(host)
            return next(ports, None) or real_free_port(host)

        monkeypatch.setattr(effpt.ddp, "free_port", fake_free_port)
        results = launch(all_reduce_rank, timeout_s=60, start_method="fork")
    assert len(calls) == 2
    assert [r["sum"] for r in results] == [1.0, 1.0]


def test_a_port_taken_every_time_gives_up_with_the_cause(monkeypatch):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        monkeypatch.setattr(effpt.ddp, "free_port", lambda *_args, **_kwargs: taken)
        with pytest.raises(DDPWorkerError, match=r"(?i)EADDRINUSE|address already in use"):
            launch(all_reduce_rank, timeout_s=60, start_method="fork", attempts=1)


def test_the_page_runs_under_torchrun(tmp_path):
    """``torchrun --nproc-per-node=2 plot_autocast_ddp.py``, as the page tells a reader."""
    script = tmp_path / PAGE.name
    script.write_text(PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    # torchrun itself caps each rank at one OpenMP thread where nothing else did, as for a reader.
    env = {**os.environ, "MPLBACKEND": "Agg"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    result = subprocess.run(
        [*command, "--nproc-per-node=2", script.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = sorted(line for line in result.stdout.splitlines() if line.startswith("rank "))
    assert [line.split(":")[0] for line in lines] == ["rank 0", "rank 1"], result.stdout
    sums = {line.rsplit("weights' sum ", 1)[1] for line in lines}
    assert len(sums) == 1, lines  # one model: the same weights on both ranks
    assert signal.SIGABRT.name not in result.stderr


# -- issue 26: errors that name the rank and the cause -------------------------------------
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_rank_that_exits_0_without_a_result_is_named(method):
    with pytest.raises(DDPWorkerError, match="DDP rank 1 exited with status 0 without a result"):
        launch(silent_rank, timeout_s=60, start_method=method)
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize(
    ("fn", "args", "cause"),
    [(lambda: None, (), "lambda"), (all_reduce_rank, (threading.Lock(),), "lock")],
)
def test_a_function_spawn_cannot_pickle_is_the_error_shown(fn, args, cause):
    with pytest.raises(
        DDPWorkerError, match=rf"(?s)rank 0 could not be started by 'spawn'.*{cause}"
    ):
        launch(fn, args=args, timeout_s=60, start_method="spawn")
    assert multiprocessing.active_children() == []


def test_an_error_of_fn_that_mentions_address_in_use_is_not_retried(tmp_path):
    log = tmp_path / "runs.txt"
    with pytest.raises(DDPWorkerError, match="my own server: address already in use"):
        launch(port_message_rank, args=(str(log),), timeout_s=60, start_method="fork")
    assert sorted(log.read_text().split()) == ["0", "1"]  # one attempt: fn ran once per rank


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_ddp_model_in_a_cycle_is_collected_before_the_rank_exits(tmp_path, method):
    """issue 26 item 8: the model, its Reducer and the process group (gloo's threads with
    them) outlived destroy_process_group until the cyclic collector ran, which could be
    during interpreter shutdown; launch now collects them while Python is whole."""
    assert launch(ddp_in_a_cycle_rank, args=(str(tmp_path),), start_method=method) == [0, 1]
    for rank in (0, 1):
        marker = tmp_path / f"rank{rank}"
        assert marker.is_file(), f"rank {rank}'s DDP model was never collected"
        assert marker.read_text() == "finalizing=False"


def test_a_notebook_function_on_a_system_without_fork_gets_advice_that_works_there(monkeypatch):
    import multiprocessing
    import types

    from effpt import ddp

    def train():
        return 0

    train.__module__ = "__main__"
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # no __file__
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    with pytest.raises(ValueError, match="cannot import it: move") as info:
        ddp._check_importable(train, "spawn")
    assert "start_method='fork'" not in str(info.value)
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["fork", "spawn"])
    with pytest.raises(ValueError, match="pass start_method='fork' or move"):
        ddp._check_importable(train, "spawn")


#: The TCP store's message when it cannot listen, as torch writes it.
STORE_FAILED = (
    "The server socket has failed to listen on any local network address. port: {port}, "
    "useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use"
)


@pytest.mark.parametrize(
    ("last_line", "taken"),
    [
        # torch 2.13: the rendezvous wraps the store's failure in a DistNetworkError
        ("torch.distributed.DistNetworkError: " + STORE_FAILED.format(port=4321), True),
        # torch 2.6: the TCP store's own RuntimeError reaches the rank unwrapped
        ("RuntimeError: " + STORE_FAILED.format(port=4321), True),
        ("RuntimeError: my own server: address already in use", False),  # fn's error
        ("RuntimeError: " + STORE_FAILED.format(port=9999), False),  # another port
    ],
)
def test_only_the_rendezvous_failing_to_listen_counts_as_a_port_taken(tmp_path, last_line, taken):
    (tmp_path / "rank0.err").write_text(f"Traceback (most recent call last):\n{last_line}\n")
    assert effpt.ddp._port_taken(0, str(tmp_path), 4321) is taken


def test_a_rank_forked_after_cuda_was_initialised_is_told_cuda_is_unavailable(
    tmp_path, monkeypatch
):
    # issue 31, finding 1: a forked child of a process that initialised CUDA still sees
    # is_available() True; DCP's writer then copies through a CUDA stream and raises.
    # Here the parent looks like one on a GPU machine; the fork inherits the patches.
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    seen = launch(dcp_save_rank, args=(str(tmp_path / "ckpt"),), start_method="fork")
    assert seen == [False, False]
    assert (tmp_path / "ckpt" / ".metadata").is_file()


def test_a_rank_forked_before_cuda_was_initialised_keeps_torchs_answer(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    seen = launch(dcp_save_rank, args=(str(tmp_path / "ckpt"),), start_method="fork")
    assert seen == [torch.cuda.is_available()] * 2


# -- process_group: init, barrier on success, destroy in any case -------------------------
def process_group_rank() -> dict:
    """Sum the ranks inside effpt.ddp.process_group; report whether the group outlived it."""
    with effpt.ddp.process_group("gloo", timeout=timedelta(seconds=30)):
        total = torch.tensor([float(dist.get_rank())])
        dist.all_reduce(total)
    return {"sum": total.item(), "after": dist.is_initialized()}


def _one_rank_group(store_file: Path, **kwargs):
    """A gloo group of one rank, whose rendezvous is ``store_file``."""
    store = dist.FileStore(str(store_file), 1)
    return effpt.ddp.process_group(
        "gloo", timeout=timedelta(seconds=30), store=store, rank=0, world_size=1, **kwargs
    )


def test_process_group_joins_the_ranks_and_is_destroyed_after():
    results = launch(process_group_rank, world_size=2, timeout_s=60)
    assert results == [{"sum": 1.0, "after": False}] * 2


def test_process_group_meets_at_a_barrier_only_when_the_block_succeeds(tmp_path, monkeypatch):
    met = []
    barrier = dist.barrier
    monkeypatch.setattr(dist, "barrier", lambda *a, **k: (met.append(1), barrier(*a, **k)))
    with _one_rank_group(tmp_path / "ok"):
        assert dist.is_initialized()
    assert met == [1]
    assert not dist.is_initialized()
    with pytest.raises(ZeroDivisionError), _one_rank_group(tmp_path / "bad"):
        1 / 0  # noqa: B018
    assert met == [1]  # a failed rank does not wait for the others at a barrier
    assert not dist.is_initialized()  # destroyed all the same


@pytest.mark.parametrize(
    ("timeout", "error"),
    [
        (30, TypeError),
        (None, TypeError),
        (timedelta(0), ValueError),
        (timedelta(seconds=-1), ValueError),
    ],
)
def test_process_group_needs_a_positive_timedelta(timeout, error):
    match = rf"timeout must be a positive datetime\.timedelta, got {re.escape(repr(timeout))}"
    with pytest.raises(error, match=match), effpt.ddp.process_group("gloo", timeout=timeout):
        pass  # pragma: no cover
    assert not dist.is_initialized()
