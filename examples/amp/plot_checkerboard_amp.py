"""
Train a network in mixed precision and measure the speed-up
===========================================================

Mixed precision is a few extra lines in a training loop, and on hardware with fast
16-bit units it can cut the time of a step by half or more. This page trains the same
network twice on a toy task, learning a checkerboard from pixel coordinates, once in
float32 and once under :func:`torch.autocast`, then compares time per step, final loss,
and how close each run gets to this machine's measured matrix-multiply peak.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_checkerboard_amp.py``.
"""

# %%
# The task
# --------
# The inputs are the (x, y) coordinates of every pixel of an image; the target is a
# checkerboard. :func:`effpt.amp.checkerboard_task` builds both, shaped like one image
# for a convolution. The size fits the device: a 512 × 512 board on a GPU, a small one
# on a CPU so that this page stays within the gallery's time budget.
import torch

from effpt.amp import checkerboard_task
from effpt.device import autocast_dtype, describe, pick_device

torch.manual_seed(0)
device = pick_device()
low = autocast_dtype(device)  # float16 on CUDA, bfloat16 on CPU
size, squares, steps = (512, 8, 500) if device.type == "cuda" else (32, 4, 200)

inputs, targets = checkerboard_task(size, squares=squares, device=device)
print(describe(device))
print(f"inputs {tuple(inputs.shape)}, targets {tuple(targets.shape)}, {steps} steps")

# %%
# The network
# -----------
# A stack of 1×1 convolutions with batch normalization: every pixel goes through the
# same 2 → 256 → 256 → 256 → 1 network, so one step is a few large matrix products,
# exactly the work autocast runs in 16 bits.
from torch import nn


class CheckerNet(nn.Module):
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
# One training step, with or without mixed precision
# --------------------------------------------------
# Mixed precision adds two things to the loop: the forward pass and the loss run inside
# :func:`torch.autocast`, and a :class:`torch.amp.GradScaler` scales the loss before
# ``backward()``. The scaler is only needed for float16 (see the previous page); with
# ``enabled=False`` it passes everything through, so one function serves every variant.
# The step returns the loss without ``.item()``, which would wait for the GPU.
import torch.nn.functional as F


def make_step(model: nn.Module, dtype: torch.dtype | None):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype or low, enabled=dtype is not None):
            loss = F.mse_loss(model(inputs).float(), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    return step


# %%
# Train every variant
# -------------------
# Each variant starts from the same weights. On a GPU there are four: float32, float16
# with a scaler, bfloat16, and :func:`torch.compile` on top of float16. On a CPU the
# 16-bit type is bfloat16 and compilation is left out: it would take longer than the
# whole page may.
low_name = str(low).removeprefix("torch.")
variants = {"float32": (None, False), f"{low_name} autocast": (low, False)}
if device.type == "cuda":
    variants["bfloat16 autocast"] = (torch.bfloat16, False)
    variants["compile + float16 autocast"] = (torch.float16, True)
else:
    print("GPU only, not run here: bfloat16 next to float16, and torch.compile + autocast")

steps_fn, losses, predictions = {}, {}, {}
for name, (dtype, compiled) in variants.items():
    torch.manual_seed(0)
    model = CheckerNet().to(device)
    steps_fn[name] = make_step(torch.compile(model) if compiled else model, dtype)
    losses[name] = torch.stack([steps_fn[name]() for _ in range(steps)]).cpu()
    with torch.no_grad():
        predictions[name] = model(inputs).float().squeeze().cpu().numpy()  # (size, size)
    print(f"{name:<28} final loss {losses[name][-20:].mean():.4f} (mean of the last 20 steps)")

# sphinx_gallery_start_ignore
for name, curve in losses.items():
    assert curve[-20:].mean() < 0.125, (name, curve[-20:].mean())
    assert torch.isfinite(curve).all(), name
final = [curve[-20:].mean().item() for curve in losses.values()]
assert max(final) < 2 * min(final), final
# sphinx_gallery_end_ignore

# %%
# Both runs learn: predicting 0.5 everywhere would score 0.25, and both end well below
# half of that. The 16-bit run reaches a similar loss; its curve is not identical,
# because every product is rounded differently.
#
# Time per step
# -------------
# :func:`effpt.bench.compare` times the steps themselves (they keep training the
# models, which does not change their cost): warm-up first, the device synchronized
# around every timed block, the median of several repeats.
from effpt.bench import compare

records = compare(f"checkerboard step, {size}×{size}", steps_fn, device=device, repeats=7)
by_name = {r.variant: r.median_s for r in records}
ratio = by_name["float32"] / by_name[f"{low_name} autocast"]
print(f"\n{low_name} autocast vs float32: {ratio:.2f}× on {describe(device)}")
print("seed 000 promises 'up to half' the time on modern GPUs, i.e. up to 2×")

# %%
# Read the ratio for what it is. On a GPU, float16 products run on tensor cores, which
# is where the promise of half the time comes from. On a CPU the gain depends on the
# instruction set: processors with native bfloat16 instructions (AVX512-BF16, AMX) can
# speed up, older ones can even slow down. The figure above is what this machine did.
#
# How close to the peak
# ---------------------
# :class:`torch.utils.flop_counter.FlopCounterMode` counts the floating-point operations
# of one step (forward and backward convolutions), and
# :func:`effpt.bench.matmul_throughput` measures the best a large matrix product reaches
# on this device in each dtype. Their ratio says how much of the machine the step uses.
from torch.utils.flop_counter import FlopCounterMode

from effpt.bench import matmul_throughput

with FlopCounterMode(display=False) as counter:
    make_step(CheckerNet().to(device), None)()
flops = counter.get_total_flops()
n = 8192 if device.type == "cuda" else 512
peaks = {}
print(f"{flops / 1e9:.2f} GFLOP per step")
for name, (dtype, _) in variants.items():
    kind = dtype or torch.float32
    if kind not in peaks:
        peaks[kind] = matmul_throughput(device, n=n, dtype=kind)
    achieved = flops / by_name[name]
    print(
        f"{name:<28}{achieved / 1e12:8.3f} TFLOP/s = {achieved / peaks[kind]:5.1%} of "
        f"the {str(kind).removeprefix('torch.')} matmul peak ({peaks[kind] / 1e12:.3f} TFLOP/s)"
    )

# sphinx_gallery_start_ignore
assert flops > 0
# sphinx_gallery_end_ignore

# %%
# Whatever the step does not spend in matrix products goes to batch normalization, ReLU
# and Adam's update. Those are memory-bound, and their share of the time does not shrink
# with 16-bit products, which is why a larger model usually gains more from autocast
# than a toy one.
#
# What the networks learned
# -------------------------
import matplotlib.pyplot as plt

names = list(predictions)[:2]
fig, axes = plt.subplots(1, 3, figsize=(9, 3.4), layout="constrained")
panels = [("target", targets.squeeze().cpu().numpy())] + [
    (name, predictions[name]) for name in names
]
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
ax.set(
    xlabel="step", ylabel="mean squared error", title=f"Checkerboard {size}×{size} on {device.type}"
)
ax.legend()
plt.show()

# %%
# Summary
# -------
# - Autocast the forward pass and the loss, and (for float16) scale the loss with
#   :class:`torch.amp.GradScaler`; the rest of the loop is unchanged.
# - Time steps with warm-up and synchronization; one ``.item()`` per step would add a
#   wait for the GPU to every step.
# - The speed-up depends on the hardware: trust the ratio measured on your machine
#   over any promise, including the one quoted above.
# - Compare the achieved FLOP/s with the measured matmul peak to see how much of a
#   step is arithmetic and how much is memory traffic.
