"""
Train with DistributedDataParallel, autocast and GradScaler
===========================================================

.. effpt-before-you-start::
   :learn: - Join a process group, wrap a model in ``DistributedDataParallel``, and leave
             the group through a barrier and ``destroy_process_group``.
           - Give each rank its share of the data with ``DistributedSampler`` and
             ``set_epoch``.
           - Train two ranks under autocast and ``GradScaler``, and check that they end
             with the same weights and the same scale.
           - Enter autocast in the thread that runs ``forward``: its state belongs to
             one thread.
   :read-first: :doc:`plot_gradscaler_loop` for the scaler's loop;
                :doc:`/explanations/workers` for start methods and the ``__main__`` guard.
   :needs: A CPU is enough: the page starts two processes that train in float16 on the
           CPU and talk through gloo. With two or more CUDA GPUs each rank takes one and
           uses NCCL, unless the ranks start by fork after the page has used CUDA. Run as
           a file, the ranks start by spawn; without a file (a notebook), by fork where
           the OS has it. The thread check at the start runs on a CUDA or Apple MPS GPU
           when there is one.

Data-parallel training runs one copy of the model in each of several processes and
averages their gradients during ``backward()``; mixed precision fits into that loop
unchanged once you know where autocast's state lives and what the scaler sees. This
page is a complete training script: it joins a process group, wraps the model in
:class:`torch.nn.parallel.DistributedDataParallel`, trains two ranks on different
shares of the data with :func:`torch.autocast` and :class:`torch.amp.GradScaler`, and
leaves the group cleanly. Then it checks that both ranks ended with the same weights
and the same loss scale.
"""

# %%
# One file, two roles
# -------------------
# This file is the script every rank runs and also the program that starts the
# ranks. ``torchrun`` starts each rank with ``RANK`` in its environment; the process
# you start with ``python`` has none, so it is the launcher. What must happen once, in
# the launcher, is guarded by ``LAUNCHER``; a rank skips it.
import os

import torch

from effpt.device import autocast_dtype, describe, pick_device

SEED = 0
LAUNCHER = __name__ == "__main__" and "RANK" not in os.environ
if LAUNCHER:
    torch.manual_seed(SEED)
    device = pick_device()
    print(describe(device))

# %%
# Autocast state belongs to a thread
# ----------------------------------
# PyTorch's "Automatic Mixed Precision examples" page makes a point worth checking
# before any process starts: an autocast region covers the thread that entered it,
# and no other. Below, the main thread is inside the region and a thread it starts is
# not, so the same product comes out in two dtypes. :class:`torch.nn.DataParallel`
# runs ``forward`` in such side threads, so with it, autocast belongs inside the
# model's ``forward``. DDP with one device per process, as on this page, runs forward
# in the thread that calls it, and the usual loop works as it is.
import threading


def product_dtype(device: torch.device) -> torch.dtype:
    a = torch.ones(4, 4, device=device)
    return (a @ a).dtype


if LAUNCHER:
    low = autocast_dtype(device)  # float16 on CUDA and MPS, bfloat16 on CPU
    seen = {}
    with torch.autocast(device.type, dtype=low):
        seen["main thread"] = product_dtype(device)
        side = threading.Thread(target=lambda: seen.update({"side thread": product_dtype(device)}))
        side.start()
        side.join()
    print(seen)

# sphinx_gallery_start_ignore
if LAUNCHER:
    assert seen == {"main thread": low, "side thread": torch.float32}, seen
# sphinx_gallery_end_ignore

# %%
# Join the process group
# ----------------------
# A rank learns who it is from its environment: ``RANK`` (its index among all ranks),
# ``LOCAL_RANK`` (its index on this machine), ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE`` and
# ``MASTER_ADDR``/``MASTER_PORT``, where the ranks meet. With a GPU for every rank the
# backend is NCCL and each rank owns one GPU; otherwise it is gloo on the CPU (NCCL
# refuses two ranks on one GPU). The timeout bounds every collective operation: a rank
# whose peer hangs or died fails within about 60 s instead of waiting for ever.
from datetime import timedelta

import torch.distributed as dist


def setup(use_cuda: bool = True) -> torch.device:
    local_rank, local_size = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    if use_cuda and torch.cuda.device_count() >= local_size:
        device, backend = torch.device("cuda", local_rank), "nccl"
        torch.cuda.set_device(device)
    else:
        device, backend = torch.device("cpu"), "gloo"
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_size))  # share the cores
    nccl_device = device if backend == "nccl" else None  # NCCL binds the group to it
    dist.init_process_group(backend, timeout=timedelta(seconds=60), device_id=nccl_device)
    return device


# %%
# Every rank trains on its own share of the data
# ----------------------------------------------
# Every rank builds the same dataset from the same seed.
# :class:`torch.utils.data.distributed.DistributedSampler` hands each rank a disjoint
# share of its indices, and ``set_epoch`` reshuffles them every epoch (the same shuffle
# on every rank, so the shares stay disjoint).
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_dataset(n: int = 512) -> TensorDataset:
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(n, 16, generator=gen)  # (n, features)
    y = x[:, :4].sin().sum(dim=1, keepdim=True)  # (n, 1)
    return TensorDataset(x, y)


# %%
# The training loop
# -----------------
# DDP wraps the model once it is on its device. It starts by copying rank 0's weights
# to every rank (each rank below seeds differently, to show it); then, during every
# ``backward()``, it averages the gradients across ranks while the backward pass runs.
#
# The mixed-precision part is the loop of the previous pages, unchanged: forward pass
# and loss under autocast, the loss scaled, ``step`` and ``update`` through the
# scaler. Each rank's scaler checks the *averaged* gradients, so all ranks skip the
# same steps and keep the same scale. The page uses float16 on every device, as
# :doc:`plot_gradscaler_loop` does, so that the scaler has work to do even on a CPU;
# its ``growth_interval`` is 8 steps instead of 2000, so that the scale moves in a
# short run.
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel


def flat_weights(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()  # (n_params,)


def train(device: torch.device, epochs: int = 4) -> dict:
    rank = dist.get_rank()
    torch.manual_seed(SEED + rank)  # different initial weights on each rank, on purpose
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    built = flat_weights(model)
    model = DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )
    data = make_dataset()
    sampler = DistributedSampler(data, shuffle=True, seed=SEED)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler(device.type, growth_interval=8)
    losses, scales = [], []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            x, y = xb.to(device), yb.to(device)  # (32, 16), (32, 1)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.float16):
                loss = F.mse_loss(model(x), y)
            scaler.scale(loss).backward()  # DDP averages the scaled gradients here
            scaler.step(optimizer)  # unscales; skips the step if a gradient is inf or nan
            scaler.update()
            losses.append(loss.item())
            scales.append(scaler.get_scale())
    return {
        "rank": rank,
        "backend": dist.get_backend(),
        "device": str(device),
        "losses": losses,
        "scales": scales,
        "built": built,
        "weights": flat_weights(model),
    }


# %%
# Leave the process group
# -----------------------
# ``main`` is what every rank runs. A rank that finishes first must not tear down its
# connections while another rank is still reading the last gradients from them, so
# every rank waits at a barrier first: past it, all of them are done communicating.
# ``destroy_process_group`` then runs however ``train`` ended, so that no rank leaves
# its connections, threads and port behind.
import gc


def main(use_cuda: bool = True) -> dict:
    device = setup(use_cuda)
    try:
        result = train(device)
        dist.barrier()
        return result
    finally:
        # A DDP model sits in reference cycles: free it now, while its group is still up,
        # rather than at interpreter exit, when gloo's threads may still hold its tensors.
        gc.collect()
        dist.destroy_process_group()


# %%
# Launch it with torchrun
# -----------------------
# ``torchrun --nproc-per-node=2 plot_autocast_ddp.py`` starts two processes that run
# this file with those variables set; each calls ``main`` and prints one line. On a
# machine with several GPUs, ``--nproc-per-node`` is usually the number of GPUs.
if __name__ == "__main__" and not LAUNCHER:
    result = main()
    line = (
        f"rank {result['rank']}: loss {result['losses'][0]:.3f} -> {result['losses'][-1]:.3f}, "
        f"scale {result['scales'][-1]:.0f}, weights' sum {result['weights'].sum():.6f}\n"
    )
    print(line, end="", flush=True)  # one write: the two ranks' lines cannot interleave

# %%
# Or let the page start its ranks
# -------------------------------
# Run with plain ``python`` (or by this site's build), the page plays torchrun's part
# with :func:`effpt.ddp.launch`: it starts two processes with the same variables, runs
# ``main`` in each and returns what each returned. Like torchrun, it stops the other
# ranks as soon as one fails; it also raises that rank's traceback here, terminates
# every rank after a deadline, and retries a port another program took.
#
# The ranks start by spawn, fresh interpreters that import ``main`` from this file.
# Without a file to import (a notebook, this site's build) they start by fork, where
# the OS has it (:doc:`/explanations/workers` says why); a forked rank cannot use CUDA
# once this process has, so then they run on the CPU.
from multiprocessing import get_all_start_methods

from effpt.ddp import launch

if LAUNCHER:
    has_file, has_fork = "__file__" in globals(), "fork" in get_all_start_methods()
    method = "spawn" if has_file or not has_fork else "fork"
    use_cuda = method == "spawn" or not torch.cuda.is_initialized()
    results = launch(main, args=(use_cuda,), world_size=2, timeout_s=120, start_method=method)
    for r in results:
        print(
            f"rank {r['rank']} ({r['backend']} on {r['device']}): {len(r['losses'])} steps, "
            f"loss {r['losses'][0]:.3f} -> {r['losses'][-1]:.3f}"
        )

# %%
# Two ranks, one model
# --------------------
# The ranks saw different batches, so their losses differ step by step. Each built
# different weights, yet they end with identical ones: DDP copied rank 0's weights to
# both before the first step, and every step applied the same averaged gradients. Their
# scalers agree at every step for the same reason.
if LAUNCHER:
    losses = [torch.tensor(r["losses"]) for r in results]  # (steps,) per rank
    scales = [r["scales"] for r in results]
    before = [2.0**16, *scales[0][:-1]]  # the scale each step started with
    skipped = [i for i, (s, b) in enumerate(zip(scales[0], before, strict=True)) if s < b]
    same_built = torch.equal(results[0]["built"], results[1]["built"])
    same_weights = torch.equal(results[0]["weights"], results[1]["weights"])
    print(f"largest loss difference between the ranks: {(losses[0] - losses[1]).abs().max():.3f}")
    print(f"identical weights as built: {same_built}; after training: {same_weights}")
    print(f"identical scale at every step: {scales[0] == scales[1]}")
    print(f"steps whose gradients overflowed (skipped on both ranks): {skipped}")

# sphinx_gallery_start_ignore
if LAUNCHER:
    assert [r["rank"] for r in results] == [0, 1]
    assert same_weights and not same_built
    assert scales[0] == scales[1]
    assert (losses[0] - losses[1]).abs().max() > 1e-3
    for curve in losses:
        assert curve[-4:].mean() < curve[:4].mean() / 2, curve
# sphinx_gallery_end_ignore

# %%
# The figure shows both halves of that: two loss curves, one for each rank's data, and
# one loss scale, drawn for each rank (the second line lies on the first).
if LAUNCHER:
    import matplotlib.pyplot as plt  # under the guard: a spawned rank need not import it

    fig, (ax_loss, ax_scale) = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
    for r, curve in enumerate(losses):
        ax_loss.semilogy(curve, linewidth=1, label=f"rank {r}")
    ax_loss.set(xlabel="step", ylabel="loss on the rank's own batch", title="Different data")
    ax_loss.legend(fontsize="small")
    ax_scale.plot(scales[0], linewidth=3, color="C0", alpha=0.5, label="rank 0")
    ax_scale.plot(scales[1], linewidth=1, color="C1", linestyle="--", label="rank 1")
    ax_scale.scatter(
        skipped, [scales[0][i] for i in skipped], color="C3", zorder=3, label="skipped"
    )
    ax_scale.set_yscale("log", base=2)
    ax_scale.set(xlabel="step", ylabel="loss scale after update()", title="One scaler state")
    ax_scale.legend(fontsize="small")
    plt.show()

# %%
# Summary
# -------
# - A rank reads ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` and ``MASTER_ADDR``/``MASTER_PORT``
#   from its environment and calls :func:`torch.distributed.init_process_group` with a
#   timeout. It leaves through :func:`torch.distributed.barrier`, so that no rank tears
#   down while another still communicates, and
#   :func:`torch.distributed.destroy_process_group` in a ``finally``.
#
# - Wrap the model in ``DistributedDataParallel`` after moving it to the rank's device;
#   give each rank its share of the data with ``DistributedSampler`` and ``set_epoch``.
#
# - With one device per process, autocast and ``GradScaler`` go in the loop exactly as
#   in a single process; the scalers stay in step because they see averaged gradients.
#
# - Autocast state is per thread: where a wrapper runs ``forward`` in side threads
#   (``DataParallel``), enter autocast inside ``forward``.
#
# - Launch with ``torchrun --nproc-per-node=N``; guard the launcher's work so that a
#   rank, which runs or imports the same file, skips it.
