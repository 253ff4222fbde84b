"""
Memory format for convolutions: channels_last
=============================================

.. effpt-before-you-start::
   :learn: - Read a memory format from the strides, and convert a model and its input to
             ``torch.channels_last``.
           - Tell which operations keep the layout and which hand back NCHW, and flatten
             without ``view``.
           - Check that both layouts compute the same function, up to rounding.
           - Measure whether the layout pays on your device, and what a conversion costs
             against a convolution.
   :read-first: :doc:`/auto_examples/basics/plot_tensors_are_views` for strides and for
                when ``.to()`` copies.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU); on CUDA it times in float16 under
           autocast, and the one-thread timing runs on a CPU only.

A convolution reads, for every pixel, the values of all its channels. In PyTorch's
default layout those values lie far apart in memory; in the ``channels_last`` layout they
sit side by side, which is what many CPU and GPU convolution kernels want. This page
shows what ``channels_last`` changes in a tensor (the strides, not the shape), converts a
small CNN and its input, checks which operations keep the layout and that the results
agree, then measures on this build's device whether the layout pays and what a conversion
costs. Some facts come from PyTorch's tutorial
`Channels Last Memory Format in PyTorch <https://pytorch.org/tutorials/intermediate/memory_format_tutorial.html>`__.
"""

# %%
# Sizes and the device
# --------------------
# One line chooses the sizes: a wider network on larger images with larger batches on a
# CUDA GPU, a small one elsewhere so that the page stays within its time budget on a CPU.
import torch
from torch import nn

from effpt.device import autocast_dtype, describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))
cl = torch.channels_last
on_cuda = device.type == "cuda"
channels, size, batches = (64, 64, (16, 64, 256)) if on_cuda else (16, 32, (4, 16, 64))
print(f"{channels} channels in the first layer, {size}×{size} images, batches {batches}")

# %%
# Same shape, other strides
# -------------------------
# A memory format is a choice of strides (:doc:`/auto_examples/basics/plot_tensors_are_views`
# explains strides). Take a tensor of 2 images, 3 channels, 4 rows and 5 columns. In the
# default layout (NCHW) the next channel of the same pixel is 4 × 5 = 20 elements away;
# under ``torch.channels_last`` (NHWC) it is the next element, and the next column is 3
# elements away. Shape and values stay the same; only the order in storage changes. The
# last line reads the first six numbers of each storage (permuted to NHWC, the
# channels_last tensor is an ordinary contiguous one, so ``flatten`` reads it in order).
x = torch.arange(2 * 3 * 4 * 5.0).reshape(2, 3, 4, 5)  # (batch, channels, height, width)
x_cl = x.to(memory_format=cl)  # a copy with channels innermost
print("shape:  ", tuple(x.shape), tuple(x_cl.shape))
print("strides:", x.stride(), x_cl.stride())
print("is_contiguous():                ", x.is_contiguous(), x_cl.is_contiguous())
print("is_contiguous(memory_format=cl):", *(t.is_contiguous(memory_format=cl) for t in (x, x_cl)))
nhwc_view = x_cl.permute(0, 2, 3, 1)  # (batch, height, width, channels): contiguous
print("first six numbers in storage:", x.flatten()[:6].tolist(), nhwc_view.flatten()[:6].tolist())

# sphinx_gallery_start_ignore
assert x.stride() == (60, 20, 5, 1) and x_cl.stride() == (60, 1, 15, 3)
assert x.is_contiguous() and not x.is_contiguous(memory_format=cl)
assert x_cl.is_contiguous(memory_format=cl) and not x_cl.is_contiguous()
assert torch.equal(x, x_cl) and nhwc_view.is_contiguous()
assert nhwc_view.flatten()[:6].tolist() == [0.0, 20.0, 40.0, 1.0, 21.0, 41.0]
# sphinx_gallery_end_ignore

# %%
# A ``channels_last`` tensor is an NHWC tensor permuted to look like NCHW, so every
# indexing, shape and broadcasting rule is unchanged. Asking a tensor for the layout it
# already has returns the tensor itself, without a copy (first two lines);
# ``contiguous()`` on a channels_last tensor copies it back to NCHW (last line).
print("x_cl.to(memory_format=cl) is x_cl:", x_cl.to(memory_format=cl) is x_cl)
print("x.contiguous() is x:              ", x.contiguous() is x)
print("x_cl.contiguous() strides:        ", x_cl.contiguous().stride())

# sphinx_gallery_start_ignore
assert x_cl.to(memory_format=cl) is x_cl and x.contiguous() is x
assert x_cl.contiguous().stride() == (60, 20, 5, 1)
# sphinx_gallery_end_ignore

# %%
# Convert the model and its input
# -------------------------------
# ``model.to(memory_format=torch.channels_last)`` converts the 4-D parameters in place:
# the convolutions' weights. One-dimensional parameters (batch norm's scale and shift) and
# the linear layer's matrix have no channels_last layout and stay as they are. The input
# needs its own ``x.to(memory_format=torch.channels_last)``. Both models start from the
# same weights. (For the 5-D tensors of 3-D convolutions, ``torch.channels_last_3d``
# plays the same part.)


def make_model(channels: int) -> nn.Sequential:
    torch.manual_seed(0)  # the same initial weights on every call
    c = channels
    return nn.Sequential(
        nn.Conv2d(3, c, 3, padding=1),
        nn.BatchNorm2d(c),
        nn.ReLU(),
        nn.Conv2d(c, 2 * c, 3, padding=1),
        nn.BatchNorm2d(2 * c),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(2 * c, 2 * c, 3, padding=1),
        nn.BatchNorm2d(2 * c),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(2 * c, 10),
    )


nchw = make_model(channels).to(device)
nhwc = make_model(channels).to(device, memory_format=cl)
print("first conv weight strides:", nchw[0].weight.stride(), "->", nhwc[0].weight.stride())
print("batch norm weight strides:", nchw[1].weight.stride(), "->", nhwc[1].weight.stride())
print("linear weight strides:    ", nchw[-1].weight.stride(), "->", nhwc[-1].weight.stride())

# sphinx_gallery_start_ignore
convs = [m for m in nhwc if isinstance(m, nn.Conv2d)]
assert all(m.weight.is_contiguous(memory_format=cl) and not m.weight.is_contiguous() for m in convs)
assert nhwc[1].weight.stride() == (1,) and nhwc[-1].weight.is_contiguous()
# sphinx_gallery_end_ignore

# %%
# Which operations keep the format
# --------------------------------
# The layout spares conversions only while it survives from one convolution to the
# next. Each operation below gets a ``channels_last`` activation; the table says in
# which layout its output comes back, on this device and this torch. On a CPU,
# convolution, batch norm, ReLU, max-pooling and an addition (a residual connection)
# keep it, while a softmax over the channels and a layer norm return a contiguous
# (NCHW) tensor: the next convolution then pays a conversion back.
#
# On CUDA the page asserts that the first five keep it too, but an assertion checks only
# the device a run has: the line under the table names the one this run checked. Apple's MPS kernels
# have changed their support for this layout from one torch release to the next (some
# fixes concerned wrong results), so on MPS the table shows what that build does and
# the page asserts nothing.
import torch.nn.functional as F

act = torch.randn(2, channels, 8, 8, device=device).to(memory_format=cl)  # (batch, channels, h, w)
ops = {
    "conv2d": nn.Conv2d(channels, channels, 3, padding=1).to(device, memory_format=cl),
    "batch_norm": nn.BatchNorm2d(channels).to(device),
    "relu": nn.ReLU(),
    "max_pool2d": nn.MaxPool2d(2),
    "add (residual)": lambda t: t + act,
    "softmax over channels": lambda t: t.softmax(dim=1),
    "layer_norm over (C, H, W)": lambda t: F.layer_norm(t, t.shape[1:]),
}
kept = {}
for name, op in ops.items():
    out = op(act)
    kept[name] = out.is_contiguous(memory_format=cl)
    layout = "channels_last" if kept[name] else "NCHW" if out.is_contiguous() else "other"
    print(f"{name:26} -> {layout}")
if device.type == "mps":
    print("on MPS this table is printed, not asserted: support differs between releases")
else:
    print(f"checked on this run's device only: {device.type}")

# sphinx_gallery_start_ignore
keepers = ("conv2d", "batch_norm", "relu", "max_pool2d", "add (residual)")
if device.type in ("cpu", "cuda"):
    assert all(kept[k] for k in keepers), kept
if device.type == "cpu":
    assert not kept["softmax over channels"] and not kept["layer_norm over (C, H, W)"], kept
# sphinx_gallery_end_ignore

# %%
# Code that flattens with ``view`` breaks on the new layout: an image still fills one block
# of memory, but not in the order (channels, rows, columns) that the flattened dimension
# reads it in, so no strides can describe the result. ``flatten`` and ``reshape`` copy when
# they must and give the same values as on the NCHW tensor.
try:
    act.view(2, -1)
except RuntimeError as exc:
    view_error = str(exc)
    print("RuntimeError:", view_error)
flat = act.flatten(1)  # (batch, channels * h * w), in NCHW order
print("flatten(1) equals the NCHW tensor's view:", torch.equal(flat, act.contiguous().view(2, -1)))

# sphinx_gallery_start_ignore
assert "view size is not compatible with input tensor's size and stride" in view_error
assert torch.equal(flat, act.contiguous().view(2, -1))
# sphinx_gallery_end_ignore

# %%
# Both layouts compute the same function
# --------------------------------------
# The two models run one training-mode forward and backward on the same batch, in
# float32. The kernels for the two layouts add products in different orders, so the
# results need not be equal bit for bit. The longest sums are in the weight gradients
# of the two convolutions before the pooling, one product per pixel of the batch
# (``n`` below); the check reads the first one's. Reordering a float32 sum of ``n``
# terms typically moves it by a few times √n roundings of 1.2e-7 relative to its scale
# (√n × 1.2e-7 is printed).
#
# The check allows 1e-3 of the largest value: far above that, and far below the gap of
# order one that mixed-up channels would leave. On CUDA, cuDNN may run float32
# convolutions in TF32 (10 bits of mantissa; ``torch.backends.cudnn.allow_tf32`` is on
# by default), so there the check allows 1e-2.
x = torch.randn(batches[1], 3, size, size, device=device)  # (batch, channels, height, width)
out, out_cl = nchw(x), nhwc(x.to(memory_format=cl))
out.sum().backward()
out_cl.sum().backward()


def rel_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()  # 0 when equal


tol = 1e-3 if device.type == "cpu" else 1e-2
grads = (nhwc[0].weight.grad, nchw[0].weight.grad)
gaps = {"output": rel_gap(out_cl, out), "first conv's weight gradient": rel_gap(*grads)}
n = x.shape[0] * size * size
print(f"n = {n} products per weight-gradient entry; √n × 1.2e-7 = {n**0.5 * 1.2e-7:.1e}")
print({k: f"{v:.1e}" for k, v in gaps.items()}, f"allowed {tol:.0e}")
print("bit for bit equal:", torch.equal(out, out_cl))

# sphinx_gallery_start_ignore
assert all(v < tol for v in gaps.values()), gaps
# sphinx_gallery_end_ignore

# %%
# When the layout pays
# --------------------
# On a CPU, PyTorch hands most float32 convolutions to oneDNN, Intel's kernel library
# (where ``torch.backends.mkldnn.is_available()``). Its fast kernels load the channels
# of one pixel into a vector register: adjacent in NHWC; H × W elements apart in NCHW,
# where they must be gathered, or the tensor reordered and the result reordered back.
# So the difference depends on the vector instructions oneDNN may use (SSE4.1, AVX2,
# AVX-512) and on the threads.
#
# On an NVIDIA GPU, half-precision convolutions run on tensor cores, whose fastest
# cuDNN kernels work in NHWC, so CUDA is timed under float16 autocast, other devices
# in float32. The lines below say what this machine offers and what caps apply.
import os
from pathlib import Path

cpuinfo = Path("/proc/cpuinfo")
flags = set(cpuinfo.read_text().split()) if cpuinfo.is_file() else set()
isa = sorted(flags & {"sse4_1", "avx2", "avx512f", "avx512_bf16", "amx_tile"}) or "not known"
print(f"CPU flags: {isa}; ATen's CPU kernels: {torch.backends.cpu.get_cpu_capability()}")
cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "not set")
print(f"oneDNN available: {torch.backends.mkldnn.is_available()}; ONEDNN_MAX_CPU_ISA: {cap}")
use_amp = on_cuda  # tensor cores need a 16-bit type
low = autocast_dtype(device)
print(f"timed in {low if use_amp else torch.float32} on {device.type}")

# %%
# The forward pass of both models (inference: ``eval()``, no autograd), at each batch
# size. The channels_last call includes converting its input, as it would in use; with
# 3 channels that copy is small. :func:`~effpt.bench.compare` takes turns between the
# two and reports the median with its spread (:doc:`/explanations/timing` says how).
# Predict first: will channels_last be faster on your machine? On a GPU under float16?
from effpt.bench import compare, format_seconds
from effpt.expect import expect
from effpt.records import speedup

nchw.eval()
nhwc.eval()


def forward(model: nn.Module, inp: torch.Tensor) -> torch.Tensor:
    with torch.no_grad(), torch.autocast(device.type, dtype=low, enabled=use_amp):
        return model(inp)


def time_forward(batch: int, label: str = "") -> list:
    x = torch.randn(batch, 3, size, size, device=device)  # (batch, channels, height, width)
    variants = {
        "NCHW": lambda: forward(nchw, x),
        "channels_last": lambda: forward(nhwc, x.to(memory_format=cl)),
    }
    return compare(f"forward, batch {batch}{label}", variants, device=device, show=False)


records = {b: time_forward(b) for b in batches}
ratios = {b: speedup(*records[b]) for b in batches}
for b in batches:
    t_nchw, t_cl = (format_seconds(r.median_s) for r in records[b])
    print(f"batch {b:3}: NCHW {t_nchw:>9}, channels_last {t_cl:>9}, speed-up {ratios[b]}")
_ = expect(
    f"channels_last makes the small CNN's forward faster at batch {batches[-1]}",
    ratios[batches[-1]],
    above=1.0,
    device=device,
)

# %%
# On a CPU, these verdicts turn on the vector instructions the convolutions may use:
# where torch's kernels and oneDNN may use AVX2 or wider, channels_last can come out
# ahead; limited to torch's portable kernels and oneDNN's SSE4.1 code, NCHW can. The
# same instructions set a convolution's time, against which the layout round trip
# further down is measured. This machine's capability:
print(f"torch's CPU kernels: {torch.backends.cpu.get_cpu_capability()}")

# %%
# The figure shows the same timings per image (left) and the speed-up with its interval
# (right). Points above the dashed line at 1× mean channels_last was faster on this
# machine; an interval that crosses it means the two could not be told apart. Where
# oneDNN may use only narrow vectors (SSE4.1 holds 4 float32 numbers, AVX-512 holds 16),
# the kernels that read NHWC directly lose much of their edge over the NCHW path, and
# NCHW can come out ahead: the lines printed above the timings say which applies here.
import matplotlib.pyplot as plt

fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(8, 3.2), layout="constrained")
for i, name in enumerate(("NCHW", "channels_last")):
    med = [records[b][i].median_s / b * 1e3 for b in batches]
    err = [
        [(records[b][i].median_s - records[b][i].q1_s) / b * 1e3 for b in batches],
        [(records[b][i].q3_s - records[b][i].median_s) / b * 1e3 for b in batches],
    ]
    ax_t.errorbar(batches, med, yerr=err, marker="o", capsize=3, label=name)
ax_t.set(xlabel="batch size", ylabel="ms per image", title="Forward time", ylim=(0, None))
ax_t.legend()
centres = [ratios[b].value for b in batches]
spans = [
    [ratios[b].value - ratios[b].low for b in batches],
    [ratios[b].high - ratios[b].value for b in batches],
]
ax_r.errorbar(batches, centres, yerr=spans, marker="o", capsize=3, color="C2")
ax_r.axhline(1.0, color="grey", linestyle="--")
ax_r.set(xlabel="batch size", ylabel="NCHW time / channels_last time", title="Speed-up")
for ax in (ax_t, ax_r):
    ax.set_xscale("log")
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.minorticks_off()
fig.suptitle(describe(device), fontsize=9)
plt.show()

# %%
# On a CPU both paths split their convolutions and layout copies over the intra-op
# threads, and not equally well (:doc:`/explanations/timing`), so the largest batch is
# timed again on one thread (restored afterwards). Differing verdicts mean the
# threads, or other work on the machine, changed the outcome.
from effpt.bench import on_one_thread

one = on_one_thread(lambda: time_forward(batches[-1], ", 1 thread"), device)
if one is not None:  # None: a GPU, or one thread already; it printed which
    timed, one_thread = one
    _ = expect(
        f"channels_last makes the small CNN's forward faster at batch {batches[-1]} on one thread",
        speedup(*timed),
        above=1.0,
        device=one_thread,  # the machine as it ran: one thread
    )

# %%
# Training: forward and backward
# ------------------------------
# The backward pass adds two convolutions per layer, for the gradients of its input and
# of its weight (the first layer needs only the second), and batch norm in training mode
# computes the batch's statistics. The step below is timed at the middle batch size.
nchw.train()
nhwc.train()


def train_step(model: nn.Module, inp: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=low, enabled=use_amp):
        loss = model(inp).float().square().mean()
    loss.backward()


xb = torch.randn(batches[1], 3, size, size, device=device)  # (batch, channels, height, width)
steps = {
    "NCHW": lambda: train_step(nchw, xb),
    "channels_last": lambda: train_step(nhwc, xb.to(memory_format=cl)),
}
step_records = compare(f"forward + backward, batch {batches[1]}", steps, device=device)
_ = expect(
    f"channels_last makes the small CNN's training step faster at batch {batches[1]}",
    speedup(*step_records),
    above=1.0,
    device=device,
)

# %%
# The cost of converting back and forth
# -------------------------------------
# An operation that drops the layout (the softmax and layer norm above, on a CPU)
# sends the next convolution an NCHW tensor, and only a full copy brings the layout
# back. A copy reads and writes every byte of the activation once, so each direction
# moves twice its size (printed below). Its time is set by memory access, the
# convolution's by arithmetic, so their ratio depends on the machine: faster
# convolution kernels make the same copy weigh more.
#
# Below, at the largest batch, a round trip (to NCHW and back) of an activation shaped
# like the second convolution's output is timed against a 3 × 3 convolution on it that
# keeps the number of channels. The expectation reads the round trip as a fraction of
# the convolution's time, with a bar at one half: over it, an operation that drops the
# layout costs more than the layout saves whenever it makes that convolution less than
# 1.5× faster. The table states the same two timings the other way round, as the round
# trip's speed-up over the convolution.
act_dtype = low if use_amp else torch.float32
act = torch.randn(batches[-1], 2 * channels, size, size, device=device, dtype=act_dtype)
act = act.to(memory_format=cl)  # (batch, channels, height, width), channels innermost
conv = nn.Conv2d(2 * channels, 2 * channels, 3, padding=1).to(device, act_dtype, memory_format=cl)
back = act.contiguous()  # NCHW: a new block of memory
moved = 2 * back.untyped_storage().nbytes()  # read once, written once
print(f"activation {tuple(act.shape)} in {act.dtype}: one conversion moves {moved / 2**20:.1f} MiB")

# sphinx_gallery_start_ignore
assert back.is_contiguous() and back.data_ptr() != act.data_ptr() and torch.equal(back, act)
assert moved == 2 * act.numel() * act.element_size()
# sphinx_gallery_end_ignore

with torch.no_grad():
    convert = compare(
        f"convolution vs layout round trip, batch {batches[-1]}",
        {
            "3×3 convolution": lambda: conv(act),
            "round trip": lambda: act.contiguous().contiguous(memory_format=cl),
        },
        device=device,
    )
_ = expect(
    "a round trip of a convolution's input through NCHW takes under half the convolution's time",
    speedup(convert[1], convert[0]),  # round trip time / convolution time
    below=0.5,
    device=device,
)

# %%
# Summary
# -------
# - ``torch.channels_last`` keeps a tensor's shape and changes its strides: channels
#   become the innermost dimension. Check it with
#   ``x.is_contiguous(memory_format=torch.channels_last)``.
#
# - Convert the model once (``model.to(memory_format=torch.channels_last)``, which
#   converts the convolutions' weights) and each input batch
#   (``x.to(memory_format=torch.channels_last)``).
#
# - Convolution, batch norm, ReLU, max-pooling and additions keep the layout (on a
#   CPU; the table says which device this build checked); a softmax over channels and
#   layer norm on a CPU return NCHW, and ``view`` across channels and pixels fails:
#   use ``flatten`` or ``reshape``.
#
# - Results agree with the NCHW model up to the rounding of a different order of sums.
#
# - Whether the layout is faster depends on the kernels the device runs: oneDNN's on a
#   CPU (its instruction set and threads), cuDNN's tensor-core kernels in half precision
#   on a GPU. The verdicts above say what happened on this build's machine; measure on
#   yours, including what a conversion costs against your convolutions.
