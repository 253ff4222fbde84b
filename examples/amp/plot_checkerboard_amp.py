"""
Train a network in mixed precision and see where its time goes
==============================================================

.. effpt-before-you-start::
   :learn: - Add autocast and a :class:`torch.amp.GradScaler` to a training step, with a
             fused Adam so that the scaler's overflow check does not wait for a GPU.
           - Set the TF32 switches, so that a float32 baseline is float32 on an NVIDIA GPU.
           - Time a float32 and a 16-bit step with their spread, on a CPU at its threads
             and at one, and read the verdicts.
           - Profile where the time of a step goes, and compare the step with the
             device's matrix-multiply rate.
   :read-first: :doc:`plot_gradscaler_loop` for the scaler's loop;
                :doc:`/explanations/timing` for how the steps are timed.
   :needs: A CPU is enough: there the page trains a 32 × 32 board in float32 and
           bfloat16, and times and profiles the steps at one thread as well. On Apple MPS
           it trains the same board in float32 and float16. On a CUDA GPU it trains a
           512 × 512 board in float32, TF32, float16, bfloat16 and float16 under
           :func:`torch.compile`. ``EFFPT_DEVICE=cpu`` keeps it on the CPU. Where a probe
           finds slow bfloat16 kernels on a CPU, the page trains a smaller board with a
           narrower network.

Mixed precision is a few extra lines in a training loop. Whether they make a step
faster depends on the machine: the 16-bit matrix products must run faster there than
float32 ones (tensor cores on recent NVIDIA GPUs, AMX on recent Intel CPUs), and they
must be a large enough part of the step to repay the casts that autocast adds. This
page trains the same network on a toy task, learning a checkerboard from pixel
coordinates, in float32 and under :func:`torch.autocast` (on a CUDA GPU also in TF32,
in a second 16-bit type and compiled), then times a step of each, profiles where the
time of a step goes, and compares it with this machine's matrix-multiply rate.
"""

# %%
# The task
# --------
# The inputs are the (x, y) coordinates of every pixel of an image; the target is a
# checkerboard. :func:`effpt.amp.checkerboard_task` builds both, shaped like one image
# for a convolution. The size fits the device: a 512 × 512 board on a GPU, a small one
# elsewhere so that this page stays within the gallery's time budget. The 16-bit type
# is the one autocast uses by default on this device, from
# :func:`effpt.device.autocast_dtype`: float16 on CUDA and MPS, bfloat16 on a CPU.
import torch

from effpt.amp import checkerboard_task
from effpt.device import autocast_dtype, describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))
low = autocast_dtype(device)  # float16 on CUDA and MPS, bfloat16 on CPU
# sphinx_gallery_start_ignore
assert torch.get_autocast_dtype(device.type) == low  # autocast's own default here
# sphinx_gallery_end_ignore
size, squares, steps = (512, 8, 500) if device.type == "cuda" else (32, 4, 100)

inputs, targets = checkerboard_task(size, squares=squares, device=device)
print(f"inputs {tuple(inputs.shape)}, targets {tuple(targets.shape)}, {steps} steps")

# %%
# The network
# -----------
# A stack of 1×1 convolutions with batch normalization: every pixel goes through the
# same 2 → 256 → 256 → 256 → 1 network, so one step is a few matrix products of
# (pixels × 256) by (256 × 256), the work autocast runs in 16 bits, plus batch
# normalization, ReLU and the optimizer's update.
from torch import nn


class CheckerNet(nn.Module):  # 256 channels unless the probe below narrows it
    def __init__(self, channels: int = 256, depth: int = 3) -> None:
        super().__init__()
        layers, width = [], 2
        for _ in range(depth):
            layers += [nn.Conv2d(width, channels, 1), nn.BatchNorm2d(channels), nn.ReLU()]
            width = channels
        self.net = nn.Sequential(*layers, nn.Conv2d(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # (batch, 1, height, width)


# %%
# Float32 means float32
# ---------------------
# On NVIDIA GPUs since Ampere, cuDNN may run float32 convolutions in TF32 (float32's
# range, 10 bits of mantissa) on the tensor cores: ``torch.backends.cudnn.allow_tf32``
# is on by default, ``torch.backends.cuda.matmul.allow_tf32`` off, so a "float32" step
# would be partly TF32. Every step below sets both switches for itself (off for
# float32 and 16 bits, on for a TF32 variant on a GPU) and puts them back afterwards.
# PyTorch is replacing this pair with per-backend ``fp32_precision`` settings
# (:doc:`/auto_examples/performance/plot_gpu_rules` shows them); the page keeps the
# pair, which torch 2.6 has.
from contextlib import contextmanager

defaults = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
print(f"defaults here: cudnn.allow_tf32={defaults[0]}, cuda.matmul.allow_tf32={defaults[1]}")


@contextmanager
def tf32(enabled: bool):
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


# %%
# One training step, with or without mixed precision
# --------------------------------------------------
# Mixed precision adds two things to the loop: the forward pass and the loss run
# inside :func:`torch.autocast`, and a :class:`torch.amp.GradScaler` scales the loss
# before ``backward()``. The scaler is only needed for float16
# (:doc:`plot_why_scale_gradients`); with ``enabled=False`` it passes everything
# through, so one function serves every variant.
#
# Nothing in the step makes the host wait for a GPU: it returns the loss without
# ``.item()``, and the optimizer is a *fused* Adam, which takes the scaler's
# "gradients overflowed" flag as a tensor and skips its update on the device. With the
# default Adam, ``scaler.step`` reads that flag with ``.item()``, so every float16
# step would wait for the GPU and no float32 one would. Fused Adam runs on CUDA, MPS
# and CPU alike.
import torch.nn.functional as F


def make_step(model: nn.Module, dtype: torch.dtype | None, use_tf32: bool = False):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)

    def step() -> torch.Tensor:
        with tf32(use_tf32):
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=dtype or low, enabled=dtype is not None):
                loss = F.mse_loss(model(inputs).float(), targets)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        return loss.detach()

    return step


# %%
# A probe before training
# -----------------------
# A probe comes first on a CPU: two warm float32 steps at this machine's threads and
# on one (busy cores make small parallel operations wait), then two 16-bit steps on
# the faster count, which trains. Without fast bfloat16 kernels
# a hundred steps could take minutes, so where the 16-bit step takes over four times
# as long, a narrower network trains on a smaller board. The first line is
# :func:`effpt.machine.bfloat16_support`.
import time

from effpt.machine import bfloat16_support
from effpt.records import format_seconds

low_name = str(low).removeprefix("torch.")
channels = 256
threads = train_threads = torch.get_num_threads()


def fastest_of_two(step) -> float:
    """The faster of two warm steps, so that one preempted step cannot decide."""
    step()  # warm-up
    calls = []
    for _ in range(2):
        began = time.perf_counter()
        step()
        calls.append(time.perf_counter() - began)
    return min(calls)


if device.type == "cpu":
    print(bfloat16_support())
    probe = {None: fastest_of_two(make_step(CheckerNet(channels).to(device), None))}
    if threads > 1:  # float32 again, on one thread
        torch.set_num_threads(1)
        one_thread_step = fastest_of_two(make_step(CheckerNet(channels).to(device), None))
        print(
            f"probe: a float32 step took {format_seconds(one_thread_step)} on one thread, "
            f"{format_seconds(probe[None])} on {threads}"
        )
        if one_thread_step < probe[None]:
            train_threads, probe[None] = 1, one_thread_step
        torch.set_num_threads(threads)
    torch.set_num_threads(train_threads)  # the 16-bit step on the count training will use
    probe[low] = fastest_of_two(make_step(CheckerNet(channels).to(device), low))
    torch.set_num_threads(threads)
    slower = probe[low] / probe[None]
    print(
        f"probe on {train_threads} thread{'s' * (train_threads > 1)} (training's count): "
        f"a float32 step took {format_seconds(probe[None])}, a {low_name} step "
        f"{format_seconds(probe[low])}: {slower:.3g}× float32's"
    )
    if slower > 4:
        size, channels = 16, 128
        inputs, targets = checkerboard_task(size, squares=squares, device=device)
        print(f"over 4×: every variant trains a {size}×{size} board, {channels} channels")
    else:
        print(f"4× or less: the page keeps the {size}×{size} board and {channels} channels")
else:
    print(f"probe: CPU only; on {device.type} the page trains the {size}×{size} board")

# %%
# Train every variant
# -------------------
# Each variant starts from the same weights. On a CUDA GPU there are five: float32,
# TF32, float16 with a scaler, bfloat16, and :func:`torch.compile` on top of float16.
# Elsewhere there are two, float32 and the 16-bit type chosen above: TF32 is an NVIDIA
# format, and compilation would take longer than the whole page may.
import copy

variants = {"float32": (None, False, False)}  # name: (autocast dtype, TF32, compiled)
if device.type == "cuda":
    variants["TF32"] = (None, True, False)
variants[f"{low_name} autocast"] = (low, False, False)
if device.type == "cuda":
    variants["bfloat16 autocast"] = (torch.bfloat16, False, False)
    variants["compile + float16 autocast"] = (torch.float16, False, True)
else:
    print("CUDA only, not run here: TF32, a second 16-bit type, torch.compile + autocast")

initial = CheckerNet(channels).to(device)  # every variant trains a copy of these weights
steps_fn, losses, predictions = {}, {}, {}
torch.set_num_threads(train_threads)  # the probe's choice; restored after training
for name, (dtype, use_tf32, compiled) in variants.items():
    model = copy.deepcopy(initial)
    steps_fn[name] = make_step(torch.compile(model) if compiled else model, dtype, use_tf32)
    losses[name] = torch.stack([steps_fn[name]() for _ in range(steps)]).cpu()
    with torch.no_grad(), tf32(False):
        predictions[name] = model(inputs).float().squeeze().cpu().numpy()  # (size, size)
    print(f"{name:<28} final loss {losses[name][-20:].mean():.4f} (mean of the last 20 steps)")
torch.set_num_threads(threads)

# sphinx_gallery_start_ignore
assert all(torch.isfinite(curve).all() for curve in losses.values()), losses
assert (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) == defaults
# sphinx_gallery_end_ignore

# %%
# Predicting 0.5 everywhere would score 0.25. The expectations below are that every
# run ends below half of that, and that the runs end within a factor of two of each
# other. They are expectations, not facts: each dtype rounds every product its own way,
# so the curves can part (the first line below prints their widest gap), and how far
# a run gets in its steps depends on the device's arithmetic and on the board's size,
# which differ between machines.
from effpt.expect import expect

curves = torch.stack(list(losses.values()))  # (variants, steps)
gap = (curves.max(dim=0).values - curves.min(dim=0).values).max().item()
print(f"widest gap between the loss curves at any step: {gap:.2e}")
final = {name: curve[-20:].mean().item() for name, curve in losses.items()}
expect(
    "every variant ends below half the loss of predicting 0.5",
    max(final.values()),
    below=0.125,
    unit="",
    device=device,
)
_ = expect(
    "the final losses of the variants lie within a factor of two",
    max(final.values()) / min(final.values()),
    below=2.0,
    device=device,
)

# %%
# What the networks learned
# -------------------------
import matplotlib.pyplot as plt

names = ["float32", f"{low_name} autocast"]
fig, axes = plt.subplots(1, 3, figsize=(9, 3.4), layout="constrained")
panels = [("target", targets.squeeze().cpu().numpy())] + [(n, predictions[n]) for n in names]
for ax, (title, image) in zip(axes, panels, strict=True):
    shown = ax.imshow(image, cmap="gray", vmin=0, vmax=1)
    ax.set(title=title, xlabel="x (pixels)", ylabel="y (pixels)")
fig.colorbar(shown, ax=axes, shrink=0.8, label="value")
plt.show()

# %%
# And the loss curves, step by step, on a log scale.
fig, ax = plt.subplots(figsize=(8, 3.5), layout="constrained")
for name, curve in losses.items():
    ax.semilogy(curve, label=name, linewidth=1)
ax.axhline(0.25, color="0.5", linestyle=":", label="predict 0.5 everywhere")
ax.set(xlabel="step", ylabel="mean squared error", title=f"Checkerboard {size}×{size}")
fig.legend(loc="outside right center")
plt.show()

# %%
# Time per step
# -------------
# :func:`effpt.bench.compare` times the steps themselves (they keep training the
# models, which does not change their cost); :doc:`/explanations/timing` says how it
# measures and when it calls a difference inconclusive. The `Effective PyTorch guide
# <https://github.com/vahidk/EffectivePyTorch>`__ says that autocast alone "can reduce
# your training up to half on modern hardware", a claim about GPUs, where float16
# products run on tensor cores. The expectation here is only that autocast makes the
# step faster at all. Predict before you run it: will it, on your machine? On a GPU
# with tensor cores?
from effpt.bench import compare
from effpt.records import speedup

records = compare(f"checkerboard step, {size}×{size}", steps_fn, device=device, budget_s=0.5)
by_name = {r.variant: r for r in records}
ratio = speedup(by_name["float32"], by_name[f"{low_name} autocast"])
_ = expect(
    f"{low_name} autocast makes a checkerboard step faster than float32",
    ratio,
    above=1.0,
    device=device,
)

# %%
# On a CPU the intra-op thread pool splits each large operation over the cores, above
# a size that differs per operator, dtype and machine (:doc:`/explanations/timing`
# explains the pool and the load average). So with several threads the same two steps
# are timed again on one thread (restored afterwards): if one verdict holds and the
# other does not, the thread pool decided the first; on a loaded machine, an
# inconclusive one can be other work's doing, so the first line prints the load
# average where the OS reports it.
import os

from effpt.bench import on_one_thread

if hasattr(os, "getloadavg"):
    print(f"load average, last minute: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
one = on_one_thread(
    lambda: compare(f"checkerboard step, {size}×{size}, 1 thread", steps_fn, device=device),
    device,
)
if one is not None:  # None: a GPU, or one thread already; it printed which
    timed, one_thread = one
    _ = expect(
        f"{low_name} autocast makes a checkerboard step faster than float32 on one thread",
        speedup(timed[0], timed[1]),
        above=1.0,
        device=one_thread,  # the machine as it ran: one thread
    )

# %%
# On a CPU, the bfloat16 verdict turns on whether torch uses oneDNN's bfloat16 kernels
# (AVX-512 or native bfloat16 instructions). Where its kernels stop at AVX2, a
# convolution falls back to ``aten::_slow_conv2d_forward`` (the profile below names
# it there), many times slower than float32; on busy cores the verdict can be inconclusive.
# This machine's side (on a GPU run, the host's CPU):
print(f"torch's CPU kernels: {torch.backends.cpu.get_cpu_capability()}")
print(bfloat16_support())


# %%
# The figure puts each variant's time per step next to the others, with its
# interquartile range as an error bar and its speed-up over float32 beside its name.
def label(r) -> str:
    if r.variant == "float32":
        return "float32\n(baseline)"
    ratio = speedup(by_name["float32"], r)
    return f"{r.variant}\n{ratio}, {ratio.verdict}"


medians = [r.median_s * 1e3 for r in records]  # ms
low_err = [(r.median_s - r.q1_s) * 1e3 for r in records]
high_err = [(r.q3_s - r.median_s) * 1e3 for r in records]
fig, ax = plt.subplots(figsize=(8, 0.8 * len(records) + 1.2), layout="constrained")
ax.barh(range(len(records)), medians, xerr=[low_err, high_err], color="C0", capsize=4)
ax.set_yticks(range(len(records)), [label(r) for r in records])
ax.invert_yaxis()
ax.set_xlim(0, 1.05 * max(r.q3_s for r in records) * 1e3)
ax.set(xlabel="time per step (ms): median, error bar from first to third quartile")
ax.set_title(f"Checkerboard {size}×{size} on {device.type}: time per step (speed-ups in labels)")
plt.show()

# %%
# Where the time of a step goes
# -----------------------------
# :func:`torch.profiler.profile` records every operator a few steps run, and
# ``key_averages()`` adds up each operator's *self* time (its own, without the
# operators it calls). ``where_time_goes`` profiles one variant and sorts its
# operators into a few kinds of work, in milliseconds per step.
#
# On a CUDA GPU the time is the device's (on Apple's MPS the profiler sees only the
# host queueing the work). On a CPU it is each operator's time on the calling thread,
# waiting for the pool's other threads included, so the CPU is profiled at this
# machine's threads and at one (restored afterwards). The sums take the rows recorded
# on the CPU thread (:func:`effpt.profiling.profiler_rows`): on a GPU a kernel's own
# row is already counted in its operator's.
from torch.profiler import ProfilerActivity, profile

from effpt.profiling import profiler_rows

on_gpu = device.type == "cuda"
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
key = "self_device_time_total" if on_gpu else "self_cpu_time_total"  # µs
KINDS = {  # a kind of work: substrings of the names of the operators that do it
    "conv backward": ("convolution_backward", "conv2d_backward"),
    "conv forward": ("convolution", "conv2d"),
    "copies and casts": ("aten::copy_", "aten::to", "aten::_to_copy"),
    "batch norm": ("batch_norm",),
    "ReLU": ("clamp_min", "threshold_backward", "relu"),
    "optimizer": ("adam", "AccumulateGrad"),
}


def where_time_goes(step, steps: int = 2):
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        if on_gpu:
            torch.cuda.synchronize()
    events = prof.key_averages()
    kinds = dict.fromkeys([*KINDS, "other"], 0.0)
    for e in profiler_rows(events, "host").values():  # operators and labels, each kernel once
        kind = next((k for k, parts in KINDS.items() if any(p in e.key for p in parts)), "other")
        kinds[kind] += getattr(e, key) / steps / 1e3  # ms per step
    return kinds, events


threads = torch.get_num_threads()
counts = sorted({threads, 1}, reverse=True) if device.type == "cpu" else [threads]
per_kind = {}
for n in counts:
    torch.set_num_threads(n)
    try:
        for name in ("float32", f"{low_name} autocast"):
            label = f"{name.split()[0]}, {n} thr" if len(counts) > 1 else name
            per_kind[label], events = where_time_goes(steps_fn[name])
            if n == threads and name != "float32":
                table = events.table(sort_by=key, row_limit=8, max_name_column_width=34)
    finally:
        torch.set_num_threads(threads)
print(f"{low_name} autocast, 2 steps on {describe(device)}:")
print(table)

# %%
# The kinds side by side, in milliseconds per step (the profiler adds a little time of
# its own to every operator); on a CPU, at this machine's threads and at one:
print(f"{'':<17}" + "".join(f"{n:>19}" for n in per_kind))
for kind in [*KINDS, "other"]:
    print(f"{kind:<17}" + "".join(f"{k[kind]:>19.2f}" for k in per_kind.values()))
print(f"{'total':<17}" + "".join(f"{sum(k.values()):>19.2f}" for k in per_kind.values()))

# sphinx_gallery_start_ignore
assert all(sum(k.values()) > 0 for k in per_kind.values()), per_kind
assert all(k["conv forward"] > 0 for k in per_kind.values()), per_kind
# sphinx_gallery_end_ignore

# %%
# Read the rows against the mechanisms. Autocast adds *copies and casts*: each
# convolution's float32 weights (and the first one's float32 input) are converted to
# 16 bits in the forward pass, and their gradients back to float32 in the backward
# pass; the float32 columns hold only the copies that the step makes in any dtype.
# Those move half the bytes in 16 bits, so where copies dominate, the 16-bit column's
# copies and casts can take less time despite the casts it adds.
#
# The two *conv* rows are where 16-bit products can win, if this build of PyTorch has
# a fast 16-bit kernel for these shapes and it splits over the threads as well as the
# float32 one. *Batch norm* and *ReLU* work in whatever dtype the convolutions hand
# them; the *optimizer* updates float32 weights in every variant. Whichever total is
# larger, the rows say which kind of work made it so, and on a CPU the one-thread
# columns say whether the thread pool had a hand in it.

# %%
# How close to the matrix-multiply rate
# -------------------------------------
# :class:`torch.utils.flop_counter.FlopCounterMode` counts the floating-point operations
# of one step (forward and backward convolutions), and
# :func:`effpt.bench.matmul_throughput` measures what a large matrix product reaches on
# this device in each dtype (the better of two sizes; TF32 with its switches on). Their
# ratio says how much of that rate the step achieves.
from torch.utils.flop_counter import FlopCounterMode

from effpt.bench import matmul_throughput

with FlopCounterMode(display=False) as counter:
    make_step(CheckerNet(channels).to(device), None)()
flops = counter.get_total_flops()
sizes = (4096, 8192) if device.type == "cuda" else (512, 1024)
if channels != 256:  # the probe found slow 16-bit kernels: smaller products for the rate
    sizes = (256, 512)
print(f"matrix products timed for the rate: {sizes[0]} and {sizes[1]} wide")
peaks = {}
print(f"{flops / 1e9:.2f} GFLOP per step")
for name, (dtype, use_tf32, _) in variants.items():
    kind = "TF32" if use_tf32 else str(dtype or torch.float32).removeprefix("torch.")
    if kind not in peaks:
        with tf32(use_tf32):
            rates = [matmul_throughput(device, n=n, dtype=dtype or torch.float32) for n in sizes]
        peaks[kind] = max(rates)
    achieved = flops / by_name[name].median_s
    print(
        f"{name:<28}{achieved / 1e12:9.3g} TFLOP/s = {achieved / peaks[kind]:6.1%} of "
        f"the {kind} matmul rate ({peaks[kind] / 1e12:.3g} TFLOP/s)"
    )

# sphinx_gallery_start_ignore
assert flops > 0
# sphinx_gallery_end_ignore

# %%
# The step and the matrix products are timed separately, each with its own noise, so
# read the shares as rough: one near 100 % says that the step runs as fast as a plain
# matrix product. One far above 100 % says that the large product ran slowly when
# timed: other work took the cores, or bfloat16 on a CPU without native bfloat16 took
# its generic path, far below float32's rate. Then the rate, not the step, is the
# outlier.
#
# A share well below 100 % means that the step spends its time outside the products
# (the casts, batch norm, ReLU and optimizer rows above) or that its products run far
# below a large product's rate (small shapes, a kernel that splits badly over the
# threads): the *conv* rows say which. The larger a model's products, the more
# autocast has to gain.

# %%
# Summary
# -------
# - Autocast the forward pass and the loss, and (for float16) scale the loss with
#   :class:`torch.amp.GradScaler`; the rest of the loop is unchanged. A fused optimizer
#   lets the scaler skip overflowed steps without waiting for the GPU.
# - On NVIDIA GPUs since Ampere, "float32" convolutions run in TF32 unless
#   ``torch.backends.cudnn.allow_tf32`` is off: say which one a baseline is.
# - Whether autocast makes a step faster is a property of the machine and the model:
#   time it, with its interval, and on a CPU at one thread and at all of them.
# - Profile a step to see where its time goes: the casts autocast adds, the products
#   it may speed up, and the work it leaves alone.
