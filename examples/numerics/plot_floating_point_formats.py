"""
Predict where a floating-point format overflows, underflows and rounds
======================================================================

.. effpt-before-you-start::
   :learn: - Read a format's range and precision from :class:`torch.finfo`.
           - Predict where float16, bfloat16 and float32 overflow, underflow and round.
           - Measure the rounding error of a running float32 total and of ``torch.sum``.
   :read-first: :doc:`/explanations/floating_point` for exponent, mantissa and epsilon.
   :needs: A CPU is enough. The ``torch.sum`` runs of the last section use a CUDA or
           Apple MPS GPU when there is one; everything else runs on the CPU.

Every tensor's dtype fixes how large, how small and how finely spaced its numbers can
be, and mixed precision puts float16, bfloat16 and even 8-bit floats in the middle of
training. This page reads those limits from :class:`torch.finfo`, then shows what happens
just past them: ``nan`` from an identity, sums that stop growing, and accumulated
rounding error that depends on how you add.

For the background, read :doc:`/explanations/floating_point`.
"""

# %%
# Five numbers that describe a format
# -----------------------------------
# :class:`torch.finfo` gives the largest value, the smallest *normal* value (below it
# precision drops bit by bit) and machine epsilon, the gap between 1 and the next
# number; ``-log2(eps) + 1`` is the number of significant bits. The smallest
# *subnormal* value is the bit pattern ``0…01``: we reinterpret an integer 1 of the
# same width with :meth:`torch.Tensor.view`. The last column counts the powers of ten
# between the smallest and the largest magnitude.
import math

import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

FORMATS = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
FORMATS += [torch.float8_e4m3fn, torch.float8_e5m2]
SAME_WIDTH_INT = {64: torch.int64, 32: torch.int32, 16: torch.int16, 8: torch.uint8}


def smallest_subnormal(dtype: torch.dtype) -> float:
    one = torch.ones(1, dtype=SAME_WIDTH_INT[torch.finfo(dtype).bits])
    return one.view(dtype).item()


def decades(dtype: torch.dtype) -> float:
    return math.log10(torch.finfo(dtype).max) - math.log10(smallest_subnormal(dtype))


print(
    f"{'format':<14}{'bits':>6}{'signif.':>9}{'largest':>13}{'min normal':>12}"
    f"{'min subnormal':>15}{'eps':>10}{'decades':>9}"
)
for dtype in FORMATS:
    fi = torch.finfo(dtype)
    name = str(dtype).removeprefix("torch.")
    significant = round(-math.log2(fi.eps)) + 1
    sub = smallest_subnormal(dtype)
    print(
        f"{name:<14}{fi.bits:>6}{significant:>9}{fi.max:>13.5g}{fi.tiny:>12.4g}"
        f"{sub:>15.4g}{fi.eps:>10.3g}{decades(dtype):>9.0f}"
    )

# sphinx_gallery_start_ignore
f32 = torch.finfo(torch.float32)
assert (
    f"{f32.max:.5g}" == "3.4028e+38" and f"{smallest_subnormal(torch.float32):.4g}" == "1.401e-45"
)
assert torch.finfo(torch.float16).max == 65504.0
assert all(smallest_subnormal(d) == torch.finfo(d).tiny * torch.finfo(d).eps for d in FORMATS)
assert [round(decades(d)) for d in FORMATS] == [632, 83, 12, 79, 5, 10]
# sphinx_gallery_end_ignore

# %%
# float32 spans 1.4e-45 to 3.4e+38, 83 decades. bfloat16 keeps float32's normal range (the
# same smallest normal number, nearly the same largest) with 8 significant bits instead
# of 24 (eps 0.00781 against 1.19e-07). float16 trades range
# for precision: nothing above 65504, no normal number below 6.1e-05, which is why
# float16 training scales its loss. The two float8 formats, made for matrix multiplies
# on recent GPUs, cover 5 and 10 decades. The bars below draw each range; the pale part
# is the subnormal stretch, where every halving loses one more bit.
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(8, 3.6), layout="constrained")
for row, dtype in enumerate(FORMATS):
    fi = torch.finfo(dtype)
    sub = smallest_subnormal(dtype)
    # float64 does not fit: cut its bar at the axis limits
    lo, mid, hi = (min(max(v, 1e-46), 1e44) for v in (sub, fi.tiny, fi.max))
    ax.barh(row, mid - lo, left=lo, color="C0", alpha=0.3, height=0.6)
    ax.barh(row, hi - mid, left=mid, color="C0", height=0.6)
    label = f"{decades(dtype):.0f} decades"
    if dtype == torch.float64:
        label += f": {sub:.2g} to {fi.max:.2g}, cut off here"
    if fi.max > 1e30:  # a long bar: write inside it
        ax.text(1e-30, row, label, va="center", color="white", fontsize=9)
    else:
        ax.text(fi.max * 5, row, label, va="center", fontsize=9)
ax.set_xscale("log")
ax.set_xlim(1e-46, 1e44)
ax.set_yticks(range(len(FORMATS)), [str(d).removeprefix("torch.") for d in FORMATS])
ax.invert_yaxis()
ax.set(xlabel="magnitude |x| (log scale)", title="Representable magnitudes (pale: subnormal)")
plt.show()

# %%
# ``x * y / y`` is not always ``x``
# ---------------------------------
# In exact arithmetic ``x * y / y == x`` for any non-zero ``y``. In float32, ``1e-50``
# is below the smallest subnormal and is stored as 0, and ``1e39`` is above the largest
# value and is stored as ``inf``; either way ``x * y / y`` is ``0/0`` or ``inf/inf``,
# that is ``nan``. PyTorch does this silently.
x = torch.tensor(1.0)
for value in (1e-50, 1e39):
    y = torch.tensor(value)  # float32, PyTorch's default dtype
    print(f"y = {value:g} is stored as {y.item()};  x * y / y = {(x * y / y).item()}")

# sphinx_gallery_start_ignore
assert torch.tensor(1e-50).item() == 0.0 and torch.tensor(1e39).item() == math.inf
assert torch.isnan(x * torch.tensor(1e-50) / torch.tensor(1e-50))
assert torch.isnan(x * torch.tensor(1e39) / torch.tensor(1e39))
# sphinx_gallery_end_ignore

# %%
# NumPy computes the same ``nan`` but says so with a :class:`RuntimeWarning`. Python
# shows each warning once per line by default, and a filter can hide it altogether, so
# we record every warning and print it: it shows here whatever your filters are. Note
# which one is missing: by default NumPy ignores *underflow*, so ``1e-50`` becomes 0
# without a word.
import warnings

import numpy as np

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    x_np = np.float32(1)
    for value in (1e-50, 1e39):
        y_np = np.float32(value)
        print(f"y = {value:g} is stored as {y_np};  x * y / y = {x_np * y_np / y_np}")
for w in caught:
    print(f"  {w.category.__name__}: {w.message}")

# sphinx_gallery_start_ignore
# NumPy's wording varies between versions; what counts is which events it reports
messages = [str(w.message) for w in caught]
assert all(w.category is RuntimeWarning for w in caught), messages
assert [m.split()[0] for m in messages] == ["invalid", "overflow", "invalid"], messages
# sphinx_gallery_end_ignore

# %%
# Rounding: numbers that do not change
# ------------------------------------
# Between 1 and 2, float32 numbers are ``eps`` apart, so ``1 + eps/2`` lies exactly
# halfway and rounds to the even neighbour, 1. Near float16's largest value, 65504, the
# gap is 32: ``65504 + 15`` rounds back down, but ``65504 + 16``, halfway to a number
# the format does not have, becomes ``inf``, and so does everything above it, such as
# 70000. float16 overflows from 65520 on, not from just above 65504.
eps = torch.finfo(torch.float32).eps
one = torch.tensor(1.0)
print(f"float32: 1 + eps/2 == 1 is {(one + eps / 2 == one).item()}")
print(f"float32: 1 + eps   == 1 is {(one + eps == one).item()}")

big = torch.tensor(65504.0, dtype=torch.float16)
print(f"float16: 65504 + 15 = {(big + 15).item()}, 65504 + 16 = {(big + 16).item()}")
print(f"float16: 70000 is stored as {torch.tensor(70000.0, dtype=torch.float16).item()}")

# sphinx_gallery_start_ignore
assert (one + eps / 2 == one).item() and not (one + eps == one).item()
assert (big + 15).item() == 65504.0 and (big + 16).item() == math.inf
assert torch.tensor(70000.0, dtype=torch.float16).item() == math.inf
# sphinx_gallery_end_ignore

# %%
# bfloat16 has float32's range: ``1e38`` survives where float16 gives ``inf``. It pays
# with precision: 8 significant bits put the numbers between 256 and 512 two apart, so
# ``256 + 1`` lands halfway and rounds back to 256. That is why sums and running
# statistics are kept in float32 even when the inputs are bfloat16.
for dtype in (torch.float16, torch.bfloat16):
    huge = torch.tensor(1e38, dtype=dtype).item()
    step = (torch.tensor(256.0, dtype=dtype) + 1).item()
    print(f"{str(dtype).removeprefix('torch.'):<9} 1e38 -> {huge:.4g},  256 + 1 -> {step}")

# sphinx_gallery_start_ignore
assert torch.tensor(1e38, dtype=torch.float16).item() == math.inf
assert math.isfinite(torch.tensor(1e38, dtype=torch.bfloat16).item())
assert (torch.tensor(256.0, dtype=torch.bfloat16) + 1).item() == 256.0
assert (torch.tensor(256.0, dtype=torch.float16) + 1).item() == 257.0
# sphinx_gallery_end_ignore

# %%
# Accumulation error: how you add matters
# ---------------------------------------
# Add 0.1 to a float32 total 2¹⁴ times in a Python loop, as a training loop does that
# keeps ``running_loss += loss`` in a float32 tensor. Each addition rounds the total;
# the value added never changes and the total stays between the same two powers of two
# for long stretches, so the rounding errors push the same way. :func:`torch.sum` adds
# in a tree (a pairwise, blocked reduction), so each value meets only about log₂ n
# roundings. The reference is the float64 sum of the same float32 values.
n_loop = 2**14
tenths = torch.full((n_loop,), 0.1)  # float32

total = torch.zeros(())  # float32
for value in tenths:
    total += value

reference = tenths.double().sum().item()
loop_error = abs(total.item() - reference) / reference
sum_error = abs(tenths.sum().item() - reference) / reference
print(f"float64 reference: {reference:.6f}")
print(f"Python loop      : {total.item():.6f}   relative error {loop_error:.1e}")
print(f"torch.sum        : {tenths.sum().item():.6f}   relative error {sum_error:.1e}")
print(f"in float32 roundings (eps): loop {loop_error / eps:.0f}, torch.sum {sum_error / eps:.1f}")

# sphinx_gallery_start_ignore
assert loop_error > 100 * sum_error, (loop_error, sum_error)
# sphinx_gallery_end_ignore

# %%
# To see the trend we need the running total after every addition, for up to
# 2²⁴ values. A Python loop that long would take minutes, but NumPy's
# :func:`numpy.cumsum` on float32 makes the same additions in the same order, and its
# last value matches our loop's total bit for bit. We compare constant values
# (0.1) with random ones (uniform in [0, 1)), whose rounding errors partly cancel, and
# run :func:`torch.sum` on this page's device.
same = float(np.cumsum(tenths.numpy())[-1]) == total.item()
print(f"np.cumsum of the 2^14 tenths equals the Python loop's total: {same}")

n_max = 2**24  # 64 MiB per float32 copy: fine on any machine
sizes = [2**k for k in range(10, 25)]
data = {"0.1 each": torch.full((n_max,), 0.1), "uniform [0, 1)": torch.rand(n_max)}

errors = {}
for label, values in data.items():
    running = np.cumsum(values.numpy())  # float32 running totals, in order
    on_device = values.to(device)
    loop, tree = [], []
    for n in sizes:
        ref = values[:n].double().sum().item()
        loop.append(abs(float(running[n - 1]) - ref) / ref)
        tree.append(abs(on_device[:n].sum().item() - ref) / ref)
    errors[label] = (loop, tree)
    print(
        f"{label:<15} n = 2^24: loop {loop[-1]:.1e}, torch.sum {tree[-1]:.1e} "
        f"(ratio {loop[-1] / tree[-1]:.0f});  torch.sum worst: {max(tree) / eps:.1f} eps"
    )

# sphinx_gallery_start_ignore
assert same
const_loop, const_tree = errors["0.1 each"]
assert const_loop[-1] > 0.1, const_loop
rand_loop, rand_tree = errors["uniform [0, 1)"]
assert rand_loop[-1] > 10 * rand_tree[-1], (rand_loop[-1], rand_tree[-1])
# sphinx_gallery_end_ignore

# %%
# The order in which :func:`torch.sum` adds depends on the machine: the vector width,
# the number of threads that split the work, the device. So does its exact error, and
# a bound on it is an expectation, not a fact.
from effpt.expect import expect

_ = expect(
    f"torch.sum's relative error stays below 8 eps at every size up to 2^24 ({device.type})",
    max(max(tree) for _, tree in errors.values()) / eps,
    below=8.0,
    unit="eps",
    device=device,
)

# %%
# With a constant value the loop's error grows in proportion to ``n`` and passes 10%
# at 2²⁴ values. Once the total is in the hundreds of thousands, float32
# numbers near it lie 1/64, 1/32, 1/16 or 1/8 apart, and every added 0.1 rounds to the
# same multiple of that gap, so the error never averages out. Random values fare
# better, yet the loop still loses more than ten times as much as :func:`torch.sum`,
# whose worst error over all sizes is printed above in units of ``eps``.
fig, ax = plt.subplots(figsize=(9, 4), layout="constrained")
for color, (label, (loop, tree)) in zip(("C3", "C0"), errors.items(), strict=True):
    ax.loglog(sizes, loop, "o-", color=color, label=f"running loop, {label}")
    ax.loglog(sizes, tree, "s--", color=color, label=f"torch.sum, {label}")
ax.axhline(eps, color="gray", linestyle=":", label="float32 eps")
ax.set(xlabel="number of float32 values summed", ylabel="relative error vs float64")
ax.set_title("Summing in float32: running total vs torch.sum")
fig.legend(fontsize=8, loc="outside right upper")
plt.show()

# %%
# Summary
# -------
# - Read a format's limits from :class:`torch.finfo`: ``max``, ``tiny`` (smallest
#   normal) and ``eps``; below ``tiny`` lie subnormals, down to ``tiny * eps``.
# - Out-of-range values become 0 or ``inf`` silently in PyTorch, and ``nan`` follows
#   one operation later; NumPy warns about overflow and ``nan`` but not underflow.
# - float16's largest number is 65504 and everything from 65520 up becomes ``inf``;
#   bfloat16 keeps float32's range but cannot tell 256 from 257.
# - Accumulate in a tree (:func:`torch.sum`) or in a wider dtype, never in a
#   running float32 total.
