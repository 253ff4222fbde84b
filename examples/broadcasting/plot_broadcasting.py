"""
Broadcast tensors without copies and without silent bugs
========================================================

Broadcasting lets two tensors of different shapes meet in one operation without
copying either of them. It saves memory, time and lines of code, and it hides bugs
that no error message will point at. This page measures the savings on the machine
that built it, then shows the two classic bugs and the habits that catch them.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_broadcasting.py``.
"""

# %%
# The rules
# ---------
# Line the two shapes up from the right. Each pair of sizes must be equal, or one of
# them must be 1; a dimension missing on the left counts as size 1. Every size-1
# dimension is stretched to the other operand's size. Below, ``a`` is a column of
# shape ``(3, 1)`` and ``b`` a row of shape ``(4,)``: ``b`` is read as ``(1, 4)``,
# both stretch, and the sum has shape ``(3, 4)``.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

a = torch.tensor([[0.0], [10.0], [20.0]], device=device)  # (3, 1)
b = torch.tensor([0.0, 1.0, 2.0, 3.0], device=device)  # (4,)
c = a + b  # (3, 4)
print("a + b has shape", tuple(c.shape))
print(c)

# sphinx_gallery_start_ignore
assert c.shape == (3, 4)
assert c[2, 3].item() == 23.0
# sphinx_gallery_end_ignore

# %%
# :func:`torch.broadcast_shapes` applies the rules to shapes alone, so you can check
# a combination before any tensor exists. The last two pairs fail: 64 and 256, 2 and 4
# are different and none of them is 1. The third pair, features per position and one
# wider vector per sequence, comes back in a section below.
pairs = [((3, 1), (4,)), ((8, 100, 64), (8, 1, 64)), ((8, 100, 64), (8, 1, 256)), ((3, 2), (3, 4))]
for left, right in pairs:
    try:
        result = tuple(torch.broadcast_shapes(left, right))
    except RuntimeError as err:
        result = f"RuntimeError: {err}"
    print(f"{left!s:>12} with {right!s:<12} -> {result}")

# sphinx_gallery_start_ignore
assert torch.broadcast_shapes((8, 100, 64), (8, 1, 64)) == (8, 100, 64)
for left, right in pairs[2:]:
    try:
        torch.broadcast_shapes(left, right)
    except RuntimeError:
        continue
    raise AssertionError(f"{left} and {right} should not broadcast")
# sphinx_gallery_end_ignore

# %%
# :func:`torch.broadcast_tensors` returns the stretched operands themselves. They are
# views: along a stretched dimension the stride is 0, so every step in that direction
# reads the same stored number again. The figure draws stored numbers as filled cells
# and the re-read ones as dashed cells.
import matplotlib.pyplot as plt
from matplotlib.patches import Patch, Rectangle

a_wide, b_wide = torch.broadcast_tensors(a, b)  # both (3, 4), both views
print("strides of the stretched views:", a_wide.stride(), b_wide.stride())


def draw_grid(ax, t, title):
    """Draw a 2-D tensor cell by cell; cells reached through a 0 stride are dashed."""
    rows, cols = t.shape
    values = t.cpu()
    for i in range(rows):
        for j in range(cols):
            stored = (i == 0 or t.stride(0) != 0) and (j == 0 or t.stride(1) != 0)
            ax.add_patch(
                Rectangle(
                    (j, rows - 1 - i), 1, 1, edgecolor="black", facecolor="C0" if stored else "white",
                    linestyle="-" if stored else "--", alpha=0.8 if stored else 1.0,
                )
            )  # fmt: skip
            ax.text(
                j + 0.5, rows - 0.5 - i, f"{values[i, j].item():g}", ha="center", va="center",
                color="white" if stored else "gray", fontsize=12,
            )  # fmt: skip
    ax.set(xlim=(-0.1, cols + 0.1), ylim=(-0.1, rows + 0.1), aspect="equal", title=title)
    ax.axis("off")


fig, axes = plt.subplots(1, 3, figsize=(9, 3), layout="constrained")
draw_grid(axes[0], a_wide, "a: (3, 1) stretched to (3, 4)")
draw_grid(axes[1], b_wide, "b: (4,) read as (1, 4), stretched")
draw_grid(axes[2], c, "a + b: (3, 4), a new tensor")
handles = [
    Patch(facecolor="C0", edgecolor="black", alpha=0.8, label="stored in memory"),
    Patch(facecolor="white", edgecolor="black", linestyle="--", label="re-read (stride 0)"),
]
fig.legend(handles=handles, loc="outside lower center", ncols=2)
fig.suptitle("Broadcasting aligns shapes from the right and stretches size-1 dimensions")
plt.show()

# sphinx_gallery_start_ignore
assert a_wide.stride() == (1, 0) and b_wide.stride() == (0, 1)
# sphinx_gallery_end_ignore

# %%
# Implicit tiling costs no memory
# -------------------------------
# :meth:`torch.Tensor.repeat` tiles by copying: ``n`` columns cost ``n`` times the
# bytes. :meth:`torch.Tensor.expand`, which broadcasting uses under the hood, returns
# a view of the same storage with stride 0. Compare the bytes each tensor's storage
# holds (:meth:`torch.Tensor.untyped_storage`).
n = 4096 if device.type == "cuda" else 1024
col = torch.rand(n, 1, device=device)  # (n, 1)
tiled = col.repeat(1, n)  # (n, n), n copies of col
stretched = col.expand(n, n)  # (n, n), a view of col
for name, t in [("col", col), ("col.repeat(1, n)", tiled), ("col.expand(n, n)", stretched)]:
    nbytes = t.untyped_storage().nbytes()
    print(f"{name:<17} shape {tuple(t.shape)!s:<13} stride {t.stride()!s:<8} {nbytes:>11,} bytes")
print("expand shares col's memory:", stretched.data_ptr() == col.data_ptr())

# sphinx_gallery_start_ignore
assert stretched.untyped_storage().nbytes() == col.untyped_storage().nbytes() == 4 * n
assert tiled.untyped_storage().nbytes() == 4 * n * n
assert stretched.stride() == (1, 0) and stretched.data_ptr() == col.data_ptr()
# sphinx_gallery_end_ignore

# %%
# Two limits to keep in mind. The *result* of an operation on broadcast operands is a
# full-size tensor: broadcasting saves the tiled copy of the input, not the output. And
# a stretched view is read-only in practice: writing into it would write many elements
# into one memory cell, so PyTorch refuses.
row = torch.rand(1, n, device=device)  # (1, n)
outer_sum = col + row  # (n, n), allocated
print(f"col + row stores {outer_sum.untyped_storage().nbytes():,} bytes")
try:
    stretched.add_(1.0)
except RuntimeError as err:
    print("in-place write into the view -> RuntimeError:", str(err).splitlines()[0])

# sphinx_gallery_start_ignore
assert outer_sum.untyped_storage().nbytes() == 4 * n * n
# sphinx_gallery_end_ignore

# %%
# Combining features of different lengths
# ---------------------------------------
# A common layer combines per-position features ``a`` of shape ``(batch, n, fa)`` with
# one vector per sequence ``b`` of shape ``(batch, 1, fb)``: tile ``b`` along the
# sequence, concatenate, apply a linear layer and an activation. Even with ``expand``,
# :func:`torch.cat` has to write the tiled copy into a new tensor.
batch, fa, fb, out = 8, 64, 256, 64
linear = torch.nn.Linear(fa + fb, out, device=device)


def tile_and_concat(a, b):
    tiled_b = b.expand(-1, a.shape[1], -1)  # (batch, n, fb), a view
    ab = torch.cat([a, tiled_b], dim=2)  # (batch, n, fa + fb), a copy
    return torch.relu(linear(ab))  # (batch, n, out)


# %%
# A linear layer applied to a concatenation is the sum of two linear layers, one per
# part: with the weight split by columns as ``W = [Wa | Wb]``,
# ``W @ cat(a, b) + c = Wa @ a + Wb @ b + c``. (The guide writes this as
# ``f(m(x + y)) = f(mx + my)``, where the ``+`` inside ``m`` means concatenation.) So
# project each part on its own and let broadcasting add the projections: ``b`` is
# projected once per sequence, not once per position. The ``Merge`` module below does
# this for any two shapes whose projections broadcast; it keeps a single bias, since
# two biases would only add up to one.


class Merge(torch.nn.Module):
    """Combine two feature tensors whose shapes broadcast: ``act(A a + B b + bias)``."""

    def __init__(self, in_a, in_b, out_features, activation=None):
        super().__init__()
        self.proj_a = torch.nn.Linear(in_a, out_features)
        self.proj_b = torch.nn.Linear(in_b, out_features, bias=False)
        self.activation = torch.nn.Identity() if activation is None else activation

    def forward(self, a, b):
        return self.activation(self.proj_a(a) + self.proj_b(b))


# %%
# Give ``Merge`` the concatenated layer's weights, split by columns, and both paths
# compute the same function. Only the order of the float32 sums differs, so the outputs
# agree to rounding error.
merge = Merge(fa, fb, out, activation=torch.nn.ReLU()).to(device)
with torch.no_grad():
    merge.proj_a.weight.copy_(linear.weight[:, :fa])
    merge.proj_b.weight.copy_(linear.weight[:, fa:])
    merge.proj_a.bias.copy_(linear.bias)

    a = torch.randn(batch, 100, fa, device=device)  # (batch, n, fa)
    b = torch.randn(batch, 1, fb, device=device)  # (batch, 1, fb)
    difference = (merge(a, b) - tile_and_concat(a, b)).abs().max().item()
print(f"largest difference between the two outputs: {difference:.1e}")

# sphinx_gallery_start_ignore
with torch.no_grad():
    assert torch.allclose(merge(a, b), tile_and_concat(a, b), atol=1e-5, rtol=1e-5), difference
# sphinx_gallery_end_ignore

# %%
# The same module serves any pair of shapes that broadcast after projection: a single
# context vector for every sequence, or per-pixel features of images with one vector
# per image.
with torch.no_grad():
    print(tuple(merge(a, torch.randn(fb, device=device)).shape))  # b: (fb,)
    pixels = torch.randn(batch, 16, 16, fa, device=device)  # (batch, height, width, fa)
    per_image = torch.randn(batch, 1, 1, fb, device=device)  # (batch, 1, 1, fb)
    print(tuple(merge(pixels, per_image).shape))

# sphinx_gallery_start_ignore
with torch.no_grad():
    assert merge(pixels, per_image).shape == (batch, 16, 16, out)
# sphinx_gallery_end_ignore

# %%
# Time and peak memory
# --------------------
# :func:`effpt.bench.compare` times both forward passes (no autograd) at a few
# sequence lengths. Peak memory is measured differently per device, and the output
# says which: on CUDA it is :func:`torch.cuda.max_memory_allocated` above what was
# allocated before the call; on CPU it is the peak of the "Total Allocated" counter
# that :mod:`torch.profiler` keeps for PyTorch's CPU allocator when
# ``profile_memory=True``. That counter sees every tensor, but not scratch memory that
# BLAS libraries allocate for themselves. Other devices have no peak counter, so the
# page prints that memory was not measured there.
import json
import tempfile
from pathlib import Path

from torch.profiler import ProfilerActivity, profile

from effpt.bench import compare, format_seconds


def peak_bytes(fn):
    """Peak bytes of tensor memory that ``fn()`` allocates on top of what already exists."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    if device.type != "cpu":
        return float("nan")
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text(encoding="utf-8"))["traceEvents"]
    return max(e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]")


memory_method = {
    "cuda": "torch.cuda.max_memory_allocated",
    "cpu": "torch.profiler's count of PyTorch's CPU allocator",
}.get(device.type, f"not measured: {device.type} has no peak-memory counter")
print("peak memory:", memory_method)

# %%
# For each length: fresh inputs, one :func:`~effpt.bench.compare` of the two variants
# and one peak-memory reading per variant, all without autograd.
lengths = [256, 1024, 4096, 16384] if device.type == "cuda" else [16, 64, 256, 1024]


def measure(n):
    a = torch.randn(batch, n, fa, device=device)  # (batch, n, fa)
    b = torch.randn(batch, 1, fb, device=device)  # (batch, 1, fb)
    variants = {"tile + concat": lambda: tile_and_concat(a, b), "Merge": lambda: merge(a, b)}
    with torch.no_grad():
        records = compare(f"combine features, n={n}", variants, device=device, show=False)
        memory = [peak_bytes(fn) for fn in variants.values()]
    return records, memory


results = {n: measure(n) for n in lengths}
print(f"{'n':>6} {'tile + concat':>14} {'Merge':>10} {'speed-up':>9}   peak MiB: concat  Merge")
for n, ((cat, mrg), (m_cat, m_mrg)) in results.items():
    print(
        f"{n:>6} {format_seconds(cat.median_s):>14} {format_seconds(mrg.median_s):>10}"
        f" {cat.median_s / mrg.median_s:>8.2f}×   {m_cat / 2**20:>16.2f} {m_mrg / 2**20:>6.2f}"
    )

# sphinx_gallery_start_ignore
if device.type in ("cuda", "cpu"):
    assert all(m_mrg < m_cat for _, (m_cat, m_mrg) in results.values()), results
# sphinx_gallery_end_ignore

# %%
# Per position, the concatenated path multiplies ``fa + fb = 320`` inputs by the
# weight and ``Merge`` only ``fa = 64`` (plus ``fb`` once per sequence), so at long
# lengths ``Merge`` does up to ``(fa + fb) / fa = 5`` times less arithmetic. It needs
# less memory too. At its peak ``tile_and_concat`` holds the concatenation, the linear
# output and the activation, 320 + 64 + 64 numbers per position; ``Merge`` never holds
# more than two ``(batch, n, out)`` tensors, 128 numbers per position. On CPU, where
# the count is exact, that is a ratio of 448 / 128 = 3.5.
n = lengths[-1]
(cat, mrg), (m_cat, m_mrg) = results[n]
print(f"arithmetic ratio (fa + fb) / fa = {(fa + fb) / fa:.1f}")
print(f"at n={n}: Merge ran {cat.median_s / mrg.median_s:.2f}× as fast as tile + concat")
print(f"at n={n}: tile + concat needed {m_cat / m_mrg:.2f}× the peak memory of Merge")
print(f"peak memory: {memory_method}; machine: {describe(device)}")

# sphinx_gallery_start_ignore
if device.type == "cpu":
    assert abs(m_cat / m_mrg - 3.5) < 0.1, (m_cat, m_mrg)
elif device.type == "cuda":
    assert m_cat / m_mrg > 2.0, (m_cat, m_mrg)
# sphinx_gallery_end_ignore

# %%
# Both measurements against the sequence length. The error bars on the times span
# half the interquartile range on each side of the median: wide bars mean the machine
# was busy with something else while it measured.
fig, (ax_time, ax_mem) = plt.subplots(1, 2, figsize=(9, 3.5), layout="constrained")
for k, label in enumerate(["tile + concat", "Merge"]):
    medians = [records[k].median_s * 1e3 for records, _ in results.values()]
    spreads = [records[k].iqr_s * 1e3 / 2 for records, _ in results.values()]
    ax_time.errorbar(lengths, medians, yerr=spreads, marker="o", capsize=3, label=label)
    ax_mem.plot(lengths, [memory[k] / 2**20 for _, memory in results.values()], "o-", label=label)
ax_time.set(xlabel="sequence length n", ylabel="forward time (ms)", title="Median time")
ax_mem.set(xlabel="sequence length n", ylabel="peak memory (MiB)", title="Peak tensor memory")
for ax in (ax_time, ax_mem):
    ax.set(xscale="log", yscale="log")
    ax.legend()
fig.suptitle(f"batch={batch}, fa={fa}, fb={fb}, out={out} · {describe(device)}", fontsize=9)
plt.show()

# %%
# The ugly: a sum that broadcasts
# -------------------------------
# Broadcasting never complains when shapes *happen* to fit. Here ``a`` was meant to be
# a vector of two numbers but is a column, shape ``(2, 1)``. ``a + b`` silently becomes
# a ``(2, 2)`` table and the sum is 12, not the 6 that the author expected.
a = torch.tensor([[1.0], [2.0]], device=device)  # (2, 1), meant to be (2,)
b = torch.tensor([1.0, 2.0], device=device)  # (2,)
total = torch.sum(a + b)
print("a + b =", (a + b).tolist())
print("sum of everything:", total)

# sphinx_gallery_start_ignore
assert total.item() == 12.0
# sphinx_gallery_end_ignore

# %%
# Name the dimension you reduce over and the shape of the result gives the bug away:
# a sum over ``dim=0`` of two vectors added element by element would be a single
# number, yet here it has two entries, ``[5, 7]``.
per_column = torch.sum(a + b, dim=0)
print("sum over dim 0:", per_column, "shape", tuple(per_column.shape))

# sphinx_gallery_start_ignore
assert per_column.tolist() == [5.0, 7.0]
# sphinx_gallery_end_ignore


# %%
# The ugly: ``squeeze()`` drops a batch of one
# --------------------------------------------
# :meth:`torch.Tensor.squeeze` without an argument removes *every* size-1 dimension,
# including a batch dimension that happens to be 1 (the last, short batch of an epoch).
# Centring features over the batch then broadcasts in a new way and quietly computes
# something else: for one sample the centred features should all be 0.
def centre_over_batch(features, squeeze_dim=None):
    x = features.squeeze() if squeeze_dim is None else features.squeeze(squeeze_dim)
    return x - x.mean(dim=0)  # meant: (batch, f) minus the per-feature mean (f,)


one_sample = torch.tensor([[[1.0, 2.0, 6.0]]], device=device)  # (batch=1, 1, f=3)
print("squeeze()  ->", centre_over_batch(one_sample))
print("squeeze(1) ->", centre_over_batch(one_sample, squeeze_dim=1))

# sphinx_gallery_start_ignore
assert centre_over_batch(one_sample).tolist() == [-2.0, -1.0, 3.0]
assert centre_over_batch(one_sample, squeeze_dim=1).abs().sum().item() == 0.0
# sphinx_gallery_end_ignore

# %%
# With ``squeeze()`` the single sample became shape ``(3,)``, ``mean(dim=0)`` averaged
# its three features, and the subtraction broadcast a scalar: no error, wrong numbers.
# ``squeeze(1)`` keeps the batch dimension and gives the zeros we expected.
#
# :func:`torch.einsum` is the explicit alternative where it reads better: every
# dimension gets a letter, and a tensor with more dimensions than letters is an error,
# not a broadcast. A dot product of the column ``a`` from the first bug with ``b``
# shows the difference: ``(a * b).sum()`` broadcasts and returns 9 instead of 5,
# while ``einsum`` refuses the column.
print("(a * b).sum()          =", (a * b).sum())
print("einsum('i,i->', b, b)  =", torch.einsum("i,i->", b, b))
try:
    torch.einsum("i,i->", a, b)
except RuntimeError as err:
    print("einsum('i,i->', a, b) -> RuntimeError:", str(err).split(" and no ")[0])

# sphinx_gallery_start_ignore
assert (a * b).sum().item() == 9.0
assert torch.einsum("i,i->", b, b).item() == 5.0
try:
    torch.einsum("i,i->", a, b)
except RuntimeError:
    pass
else:
    raise AssertionError("einsum should refuse a (2, 1) operand for subscript 'i'")
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Broadcasting aligns shapes from the right and stretches size-1 dimensions; check a
#   combination ahead of time with :func:`torch.broadcast_shapes`.
# - ``expand`` and broadcasting give stride-0 views that cost no memory; ``repeat`` and
#   :func:`torch.cat` store every copy.
# - Project parts separately and let the projections broadcast (``Merge``) instead of
#   tiling and concatenating: less arithmetic and less memory, as measured above.
# - Always name the dimension in reductions and in ``squeeze``; use ``einsum`` when
#   naming every dimension makes the code clearer.
