"""
Broadcast tensors without copies and without silent bugs
========================================================

.. effpt-before-you-start::
   :learn: - Predict the shape two tensors broadcast to, and check it with
             ``torch.broadcast_shapes`` before any tensor exists.
           - Tell ``expand``, a stride-0 view that stores nothing new, from ``repeat``,
             which stores every copy.
           - Catch a sum that broadcasts and a ``squeeze()`` that drops a batch of one.
           - Name every dimension with ``einsum``, and know where it still broadcasts.
   :read-first: :doc:`/auto_examples/basics/plot_tensors_are_views` for storage and strides.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU); on CUDA the memory section uses a
           larger matrix.

Broadcasting lets two tensors of different shapes meet in one operation without
copying either of them. It saves the memory and the work of a tiled copy, as well as
lines of code, and it hides bugs that no error message will point at. This page shows
the rules and what a broadcast operand costs in memory, then the two classic bugs and
the habits that catch them.
:doc:`plot_broadcast_merge` puts the rules to work in a layer and measures the gain.
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
# wider vector per sequence, is the case :doc:`plot_broadcast_merge` solves.
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
# while ``einsum`` refuses the column. It does not switch broadcasting off, though: a
# dimension of size 1 still stretches to match another operand's dimension with the
# same letter, so a one-element ``b[:1]`` against ``b`` gives 3, not an error.
print("(a * b).sum()          =", (a * b).sum())
print("einsum('i,i->', b, b)  =", torch.einsum("i,i->", b, b))
try:
    torch.einsum("i,i->", a, b)
except RuntimeError as err:
    print("einsum('i,i->', a, b) -> RuntimeError:", str(err).split(" and no ")[0])
print("einsum('i,i->', b[:1], b) =", torch.einsum("i,i->", b[:1], b))  # (1,) with (2,)

# sphinx_gallery_start_ignore
assert (a * b).sum().item() == 9.0
assert torch.einsum("i,i->", b, b).item() == 5.0
try:
    torch.einsum("i,i->", a, b)
except RuntimeError:
    pass
else:
    raise AssertionError("einsum should refuse a (2, 1) operand for subscript 'i'")
assert torch.einsum("i,i->", b[:1], b).item() == 3.0
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Broadcasting aligns shapes from the right and stretches size-1 dimensions; check a
#   combination ahead of time with :func:`torch.broadcast_shapes`.
# - ``expand`` and broadcasting give stride-0 views that cost no memory; ``repeat``
#   stores every copy, and the result of an operation is always full size.
#   :doc:`plot_broadcast_merge` turns this into a layer that never tiles.
# - Always name the dimension in reductions and in ``squeeze``; use ``einsum`` when
#   naming every dimension makes the code clearer.
