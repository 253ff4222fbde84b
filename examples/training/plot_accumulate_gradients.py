"""
Accumulate gradients so they match one large batch
==================================================

.. effpt-before-you-start::
   :learn: - Accumulate gradients over micro-batches so that they equal one large batch's,
             a ragged last micro-batch included.
           - Tell why no division makes BatchNorm match a large batch, while LayerNorm
             does.
           - Skip DDP's all-reduce on all micro-batches but the last with ``no_sync()``,
             count the all-reduces each way, and read the timing's verdict.
           - Call the GradScaler's ``unscale_`` once per step, after the last
             micro-batch.
   :read-first: :doc:`/auto_examples/amp/plot_autocast_ddp` for process groups and DDP;
                :doc:`/auto_examples/amp/plot_gradscaler_loop` for ``unscale_``;
                :doc:`/explanations/workers` for the ``__main__`` guard and start methods.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU), with float16 autocast in the last
           section on every device. The DDP section starts two processes that run on the
           CPU with gloo on every machine: run as a file, by the platform's default start
           method; without a file (a notebook), by fork where the OS has it.

When a large batch does not fit in memory, you run it as several micro-batches and add
their gradients before one optimizer step. Done right, the step is the step of the large
batch; done slightly wrong, it is a different step and nothing warns you. This page checks
accumulation against one large batch, shows three ways to break the match, counts what
``no_sync()`` saves with :class:`~torch.nn.parallel.DistributedDataParallel` over two
processes, and places the GradScaler's ``unscale_`` once per step.
"""

# %%
# One large batch, the reference
# ------------------------------
# Part of this page starts processes, and a process started by spawn or forkserver
# re-imports this file: the work sits under ``MAIN``, so such a process skips it (see
# :doc:`/explanations/workers`). The reference is the gradient of the mean loss over 64
# samples, in one batch.
import torch
import torch.nn.functional as F
from torch import nn

from effpt.device import describe, pick_device

MAIN = __name__ == "__main__"
SEED = 0


def make_model(norm: type[nn.Module] | None = None) -> nn.Module:
    torch.manual_seed(SEED)  # the same initial weights every time it is called
    middle = [norm(32)] if norm is not None else []
    return nn.Sequential(nn.Linear(8, 32), *middle, nn.ReLU(), nn.Linear(32, 1))


def flat_grad(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).cpu()  # (n_params,)


def gap(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()  # relative difference, 0 when equal


if MAIN:
    device = pick_device()
    print(describe(device))
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(64, 8, generator=gen).to(device)  # (batch, features), same data everywhere
    y = x[:, :2].sum(dim=1, keepdim=True)  # (batch, 1)
    big = make_model().to(device)
    F.mse_loss(big(x), y).backward()
    reference = flat_grad(big)
    print(f"{reference.numel()} gradient entries, norm {reference.norm():.4f}")

# %%
# Divide each micro-batch's loss by the number of micro-batches
# -------------------------------------------------------------
# ``backward()`` adds into ``.grad``. Four micro-batches of 16 whose mean losses are each
# divided by 4 add up to the mean over all 64: the same gradient, up to the rounding of a
# different order of additions. Without the division the gradient is four times too large,
# which with SGD is a four times larger learning rate.


def accumulate(model: nn.Module, xs, ys, divide: bool = True) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    for xb, yb in zip(xs, ys, strict=True):
        loss = F.mse_loss(model(xb), yb)
        (loss / len(xs) if divide else loss).backward()  # adds into .grad
    return flat_grad(model)


if MAIN:
    micro_x, micro_y = x.split(16), y.split(16)  # 4 micro-batches of (16, 8), (16, 1)
    divided = accumulate(make_model().to(device), micro_x, micro_y)
    undivided = accumulate(make_model().to(device), micro_x, micro_y, divide=False)
    gaps = {"loss / 4": gap(divided, reference), "loss not divided": gap(undivided, reference)}
    print(f"relative gap to the large batch: {gaps}")
    print(f"undivided / reference: {(undivided / reference).median():.3f}")

# sphinx_gallery_start_ignore
if MAIN:
    torch.testing.assert_close(divided, reference, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(undivided, 4 * reference, rtol=1e-4, atol=1e-6)
# sphinx_gallery_end_ignore

# %%
# A ragged last micro-batch
# -------------------------
# With 50 samples, micro-batches of 16 leave 2 in the last one. Dividing each mean by
# the number of micro-batches now weighs those 2 samples as much as each group of 16.
# Summing the per-sample losses and dividing by the number of samples in the whole step
# (known before the step starts) restores the large batch's mean.
if MAIN:
    x50, y50 = x[:50], y[:50]  # (50, 8), (50, 1)
    big = make_model().to(device)
    F.mse_loss(big(x50), y50).backward()
    reference50 = flat_grad(big)
    chunks_x, chunks_y = x50.split(16), y50.split(16)  # sizes 16, 16, 16, 2
    ragged = accumulate(make_model().to(device), chunks_x, chunks_y)
    model = make_model().to(device)
    for xb, yb in zip(chunks_x, chunks_y, strict=True):
        (F.mse_loss(model(xb), yb, reduction="sum") / len(x50)).backward()
    summed = flat_grad(model)
    print([len(c) for c in chunks_x])
    gaps["mean of a ragged last batch"] = gap(ragged, reference50)
    print(f"mean per micro-batch / 4: gap {gaps['mean of a ragged last batch']:.3f}")
    print(f"sum / 50 samples:         gap {gap(summed, reference50):.1e}")

# sphinx_gallery_start_ignore
if MAIN:
    torch.testing.assert_close(summed, reference50, rtol=1e-4, atol=1e-6)
    assert gaps["mean of a ragged last batch"] > 1e-2, gaps
# sphinx_gallery_end_ignore

# %%
# BatchNorm sees the micro-batch, not the batch
# ---------------------------------------------
# :class:`~torch.nn.BatchNorm1d` normalizes with the mean and variance of the batch it is
# given, so each micro-batch is normalized with its own statistics and the gradient
# changes; its running statistics are updated four times instead of once, too. No
# division fixes that. :class:`~torch.nn.LayerNorm` normalizes each sample on its own,
# so a model built with it matches up to float rounding (``GroupNorm`` does as well).
if MAIN:
    for norm in (nn.BatchNorm1d, nn.LayerNorm):
        big = make_model(norm).to(device)
        F.mse_loss(big(x), y).backward()
        split = accumulate(make_model(norm).to(device), micro_x, micro_y)
        gaps[f"with {norm.__name__}"] = gap(split, flat_grad(big))
        print(f"{norm.__name__:>11}: gap {gaps[f'with {norm.__name__}']:.1e}")

# sphinx_gallery_start_ignore
if MAIN:
    assert gaps["with BatchNorm1d"] > 1e-2, gaps
    assert gaps["with LayerNorm"] < 1e-4, gaps
# sphinx_gallery_end_ignore

# %%
# The figure puts the gaps side by side on a log scale, one point each: green is float
# rounding, red a mistake in the loop (the undivided loss, the ragged mean), orange a
# difference that BatchNorm's design implies, which no loop can remove. A gap of exactly
# 0 would be drawn at 1e-9.
if MAIN:
    import matplotlib.pyplot as plt  # under the guard: a spawned rank need not import it

    names = list(gaps)
    fig, ax = plt.subplots(figsize=(7, 3.2), layout="constrained")
    kind_of = {
        "loss not divided": "mistake in the loop",
        "mean of a ragged last batch": "mistake in the loop",
        "with BatchNorm1d": "BatchNorm's design",
    }
    colors = {"float rounding": "C2", "mistake in the loop": "C3", "BatchNorm's design": "C1"}
    for kind, color in colors.items():
        rows = [i for i, n in enumerate(names) if kind_of.get(n, "float rounding") == kind]
        points = [max(gaps[names[i]], 1e-9) for i in rows]
        ax.scatter(points, rows, color=color, zorder=3, label=kind)
    ax.set_yticks(range(len(names)), names)
    ax.grid(axis="x", which="both", alpha=0.3)
    ax.set_xscale("log")
    ax.legend(fontsize="small", loc="center")
    ax.invert_yaxis()
    ax.set(xlabel="relative gap to the large batch's gradient", title="Accumulated gradients")
    plt.show()

# %%
# Two processes: skip the all-reduce until the last micro-batch
# -------------------------------------------------------------
# DDP averages gradients across processes during every ``backward()``. When accumulating,
# only the sum at the step matters, so the :meth:`~torch.nn.parallel.DistributedDataParallel.no_sync`
# context skips the all-reduce for all micro-batches but the last; the gradients then
# stay local and the last ``backward()`` averages the sum. A communication hook that
# counts its calls shows how many all-reduces each way runs (one per bucket of
# gradients), and each rank times whole accumulation steps, taking turns between the two.
# Each rank joins the process group through :func:`effpt.ddp.process_group`: a timeout,
# a barrier on success and the group destroyed in any case, the block that
# :doc:`/auto_examples/amp/plot_autocast_ddp` writes out.
import os
import time
from contextlib import nullcontext
from datetime import timedelta

import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

from effpt.ddp import process_group


def accumulate_steps(steps: int, micro: int) -> dict:
    torch.manual_seed(SEED)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(256, 1024), nn.Linear(1024, 256)))
    calls = []

    def counting_hook(state, bucket):  # state: the process group (None: the default)
        calls.append(bucket.index())
        return allreduce_hook(state, bucket)

    model.register_comm_hook(None, counting_hook)
    gen = torch.Generator().manual_seed(SEED + dist.get_rank())  # each rank its own data
    batches = [torch.randn(16, 256, generator=gen) for _ in range(micro)]  # (16, 256) each
    seconds, counts, grads = {True: [], False: []}, {}, {}
    for step in range(2 * steps + 2):  # the first two steps warm up
        skip = step % 2 == 0  # take turns: with no_sync(), then without
        model.zero_grad(set_to_none=True)
        calls.clear()
        start = time.perf_counter()
        for i, xb in enumerate(batches):
            with model.no_sync() if skip and i < micro - 1 else nullcontext():
                (model(xb).square().mean() / micro).backward()
        if step >= 2:
            seconds[skip].append(time.perf_counter() - start)
        counts[skip] = len(calls)
        grads[skip] = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    return {"rank": dist.get_rank(), "counts": counts, "seconds": seconds, "grads": grads}


def ddp_rank(steps: int = 20, micro: int = 4) -> dict:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // 2))  # two ranks share the cores
    with process_group("gloo", timeout=timedelta(seconds=60)):
        return accumulate_steps(steps, micro)


# %%
# :func:`effpt.ddp.launch` starts the two ranks the way ``torchrun`` would and returns
# what each returned. Run from a file they start by the platform's method; in a notebook
# or this site's build there is no file to import, so they start by fork where the OS has
# it (:doc:`/explanations/workers` says why).
from multiprocessing import get_all_start_methods

from effpt.ddp import launch

if MAIN:
    no_file = "__file__" not in globals()
    method = "fork" if no_file and "fork" in get_all_start_methods() else None
    results = launch(ddp_rank, world_size=2, timeout_s=120, start_method=method)
    counts = results[0]["counts"]
    print(f"all-reduces per step: {counts[False]} without no_sync(), {counts[True]} with it")
    same = [torch.allclose(r["grads"][True], r["grads"][False], atol=1e-6) for r in results]
    print(f"same averaged gradients either way, on each rank: {same}")

# sphinx_gallery_start_ignore
if MAIN:
    assert counts[False] == 4 * counts[True] and counts[True] >= 1, counts
    assert all(same)
    assert torch.equal(results[0]["grads"][True], results[1]["grads"][True])
# sphinx_gallery_end_ignore

# %%
# Every all-reduce it skips saves a round trip between the processes and the copy of
# the gradients into and out of the buckets. How much time that is depends on the size
# of the gradients against the compute of a micro-batch, and on the link: the two
# processes here talk through the machine's loopback interface, with no network in
# between. Predict first: does skipping it save time on your machine? The measurement
# and its verdict:
from effpt.bench import Timing
from effpt.expect import expect
from effpt.records import speedup

if MAIN:
    timed = {k: Timing(per_call=tuple(results[0]["seconds"][k]), number=1) for k in (False, True)}
    print(f"step without no_sync(): {timed[False].median * 1e3:.2f} ms (median, rank 0)")
    print(f"step with no_sync():    {timed[True].median * 1e3:.2f} ms")
    expect(
        "no_sync() on 3 of 4 micro-batches makes an accumulation step of two gloo ranks faster",
        speedup(timed[False], timed[True]),
        above=1.0,
        device="cpu",
    )

# %%
# With a GradScaler, unscale once per optimizer step
# --------------------------------------------------
# A scaled loss leaves scaled gradients in ``.grad``. Accumulate them scaled, and call
# ``unscale_`` (to clip or inspect them) only once all micro-batches are in, right before
# ``step``: the scaler records that this optimizer's gradients are unscaled and refuses
# a second call before ``update()``. The recipes page :doc:`/auto_examples/amp/plot_gradscaler_recipes`
# checks this loop against an unscaled reference; here, the one mistake it forbids.
if MAIN:
    model = make_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device.type)
    for xb, yb in zip(micro_x, micro_y, strict=True):
        with torch.autocast(device.type, dtype=torch.float16):
            loss = F.mse_loss(model(xb), yb) / len(micro_x)
        scaler.scale(loss).backward()
    scaler.unscale_(optimizer)  # once: the gradients are now true gradients
    norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    try:
        scaler.unscale_(optimizer)  # a second time, before update()
    except RuntimeError as exc:
        error = str(exc)
        print(f"RuntimeError: {error}")
    scaler.step(optimizer)
    scaler.update()
    print(f"gradient norm before clipping {norm:.4f}, scale now {scaler.get_scale():.0f}")

# sphinx_gallery_start_ignore
if MAIN:
    assert "unscale_() has already been called" in error, error
    torch.testing.assert_close(norm.cpu(), reference.norm(), rtol=2e-2, atol=1e-3)
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Divide each micro-batch's mean loss by the number of micro-batches, and the
#   accumulated gradient is the large batch's gradient up to float rounding.
#
# - With a ragged last micro-batch, sum the per-sample losses and divide by the number of
#   samples in the step instead.
#
# - BatchNorm normalizes each micro-batch with its own statistics, so no division makes
#   accumulation match a large batch; LayerNorm and GroupNorm do not depend on the batch.
#
# - Under DDP, wrap all micro-batches but the last in ``no_sync()``: one all-reduce per
#   bucket per step instead of one per bucket per micro-batch, the same averaged
#   gradients. Whether that saves noticeable time depends on the link and the model;
#   measure it.
#
# - With a GradScaler, accumulate scaled gradients and call ``unscale_`` once, after the
#   last micro-batch and before ``step``.
