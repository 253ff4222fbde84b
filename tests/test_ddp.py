"""Tests of effpt.ddp: real two-process runs, and every way they can fail, bounded in time."""

from __future__ import annotations

import multiprocessing
import socket
import threading
import time

import pytest
import torch

import effpt.ddp
from effpt.ddp import (
    AutocastMLP,
    DDPConfig,
    DDPTimeoutError,
    DDPWorkerError,
    free_port,
    run_ddp,
)


def test_free_port_can_be_bound():
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"world_size": 0}, "world_size must be an int >= 1, got 0"),
        ({"steps": 1.5}, "steps must be an int >= 1, got 1.5"),
        ({"timeout_s": 0}, r"timeout_s must be a number of seconds in \(0, 3600\), got 0"),
        ({"timeout_s": float("inf")}, "timeout_s must be a number of seconds"),
        ({"fault": "explode"}, "fault must be one of"),
    ],
)
def test_config_is_validated(changes, match):
    with pytest.raises(ValueError, match=match):
        DDPConfig(**changes)


def test_attempts_is_validated():
    with pytest.raises(ValueError, match="attempts must be an int >= 1, got 0"):
        run_ddp(DDPConfig(), attempts=0)


def test_resolved_picks_gloo_on_cpu_when_gpus_are_too_few():
    config = DDPConfig(world_size=max(2, torch.cuda.device_count() + 1)).resolved()
    assert (config.backend, config.device_type) == ("gloo", "cpu")
    assert DDPConfig(backend="gloo", device_type="cpu").resolved().backend == "gloo"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_mlp_autocasts_in_any_thread(dtype):
    torch.manual_seed(0)
    model = AutocastMLP(4, 8, "cpu", dtype)
    x = torch.randn(5, 4)
    out = {}
    side = threading.Thread(target=lambda: out.update(side=model(x)))
    side.start()
    side.join()
    assert out["side"].dtype == dtype
    assert model(x).dtype == dtype
    assert model.last_autocast is True


def test_autocast_mlp_without_autocast_matches_float64_reference():
    torch.manual_seed(0)
    model = AutocastMLP(4, 8, "cpu", None)
    x = torch.randn(5, 4)
    out = model(x)
    assert out.dtype == torch.float32
    assert model.last_autocast is False
    ref = model.double()(x.double())
    torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=1e-6)


def test_two_ranks_average_their_gradients():
    start = time.monotonic()
    results = run_ddp(DDPConfig(world_size=2, steps=3, timeout_s=120))
    assert time.monotonic() - start < 120
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert r["backend"] == "gloo"
        assert r["autocast_in_forward"] is True
        assert r["output_dtype"] == r["autocast_dtype"] == "bfloat16"
        assert r["grad_vs_mean"] < 1e-6
        assert r["grad_vs_own"] > 1e-3  # the ranks saw different data
        assert r["param_spread"] == 0
        assert len(r["losses"]) == 3
    assert results[0]["losses"] != results[1]["losses"]
    assert multiprocessing.active_children() == []


def test_a_rank_that_raises_fails_fast_with_its_traceback():
    start = time.monotonic()
    with pytest.raises(DDPWorkerError, match=r"(?s)DDP rank 1 .*fails on purpose"):
        run_ddp(DDPConfig(fault="raise", fault_rank=1, timeout_s=60))
    assert time.monotonic() - start < 60
    assert multiprocessing.active_children() == []


def test_a_rank_that_hangs_is_stopped_at_the_deadline():
    timeout = 10.0
    start = time.monotonic()
    with pytest.raises(DDPTimeoutError, match=r"still running after 10 s"):
        run_ddp(DDPConfig(fault="hang", fault_rank=1, timeout_s=timeout))
    elapsed = time.monotonic() - start
    assert timeout <= elapsed < timeout + 15  # the deadline, plus the terminate grace
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
        results = run_ddp(DDPConfig(steps=1, timeout_s=60))
    assert len(calls) == 2
    assert all(r["grad_vs_mean"] < 1e-6 for r in results)


def test_a_port_taken_every_time_gives_up_with_the_cause(monkeypatch):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        monkeypatch.setattr(effpt.ddp, "free_port", lambda *_args, **_kwargs: taken)
        with pytest.raises(DDPWorkerError, match="EADDRINUSE"):
            run_ddp(DDPConfig(steps=1, timeout_s=60), attempts=1)
