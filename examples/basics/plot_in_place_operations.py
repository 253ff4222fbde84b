"""
Use in-place operations without breaking autograd
=================================================

.. effpt-before-you-start::
   :learn: - Spot in-place operations and read a tensor's version counter.
           - Tell which in-place writes autograd refuses, and trace one with
             ``detect_anomaly``.
           - Replace the old ``.data`` idiom with ``detach()`` or ``no_grad``.
           - Build a tensor by writing pieces into a preallocated one, with gradients
             flowing back to the pieces.
   :read-first: :doc:`plot_autograd` for leaves, ``grad_fn``, ``detach()`` and ``no_grad``.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU).

An in-place operation overwrites a tensor's memory instead of allocating a new one. That
saves memory, and it can destroy a value the backward pass still needs; autograd keeps a
version counter on every tensor to catch that. This page shows how to spot in-place
operations, what autograd refuses and why, the old ``.data`` idiom that slips past the
check, and a pattern where in-place pays off: copying into a preallocated tensor.
"""

# %%
# A trailing underscore means "in place"
# --------------------------------------
# ``z.tanh()`` returns a new tensor; ``z.tanh_()`` overwrites ``z`` and returns ``z``
# itself. Every in-place write adds one to the tensor's version counter, ``_version``.
# ``+=``, indexed assignment (``z[0] = 0``) and ``out=z`` write in place too.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

z = torch.randn(3, device=device)
new = z.tanh()
print("tanh():  a new tensor:", new is not z, "| z's version:", z._version)
same = z.tanh_()
print("tanh_(): returns z itself:", same is z, "| z's version:", z._version)
z += 1
z[0] = 0.0
torch.mul(z, 2, out=z)
print("after +=, an indexed write and out=z, z's version:", z._version)

# sphinx_gallery_start_ignore
assert new is not z and same is z and z._version == 4
# sphinx_gallery_end_ignore

# %%
# Overwriting a value that backward does not need
# -----------------------------------------------
# Adding 1 to ``b1`` in place is fine when nothing saved ``b1`` for the backward pass:
# ``b2 = b1 + 1`` needs no inputs to differentiate, and the gradient is all ones.
a = torch.randn(5, device=device, requires_grad=True)
b1 = a + 1
b2 = b1 + 1
b1 += 1
(grad,) = torch.autograd.grad(b2.sum(), a)
print("gradient:", grad, "| b1's version:", b1._version)

# sphinx_gallery_start_ignore
assert torch.equal(grad, torch.ones_like(a)) and b1._version == 1
# sphinx_gallery_end_ignore

# %%
# Overwriting a value that backward needs
# ---------------------------------------
# ``b2 = b1 ** 2`` does save ``b1``: its derivative is ``2·b1``. After the in-place write,
# the saved ``b1`` is at version 1 where version 0 was recorded, and backward refuses to
# compute a wrong gradient. Whether an operation saves its input or its output is not
# visible from outside, which is why in-place writes on tensors you did not create (a
# module's input, say) are risky.
b1 = a + 1
b2 = b1**2
b1 += 1
try:
    torch.autograd.grad(b2.sum(), a)
except RuntimeError as err:
    version_error = str(err)
print("RuntimeError:", version_error.split(" Hint:", maxsplit=1)[0])

# sphinx_gallery_start_ignore
assert "modified by an inplace operation" in version_error
# sphinx_gallery_end_ignore

# %%
# The message names the tensor, not the line that needed it. Under
# :func:`torch.autograd.detect_anomaly` (slow: for debugging only) autograd records where
# each operation was created, and the failing backward warns with that place. Here is
# the warning's first line and the frames from this script, without the rest of the stack.
import contextlib
import warnings
from pathlib import Path


def failing_backward():
    a = torch.randn(5, device=device, requires_grad=True)
    shifted = a + 1
    squared = shifted**2  # saves shifted for the backward pass
    shifted += 1  # bumps shifted's version past the saved one
    torch.autograd.grad(squared.sum(), a)


this_file = failing_backward.__code__.co_filename
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with torch.autograd.detect_anomaly(), contextlib.suppress(RuntimeError):
        failing_backward()
report = next(str(w.message) for w in caught if "Error detected" in str(w.message))
lines = report.splitlines()
frames = [i for i, line in enumerate(lines) if line.strip().startswith("File ")]
excerpt = [lines[0]] + [text for i in frames if this_file in lines[i] for text in lines[i : i + 2]]
print("\n".join(excerpt).replace(this_file, Path(this_file).name))  # the file name, not its folder

# sphinx_gallery_start_ignore
assert "PowBackward0" in lines[0] and any("failing_backward" in line for line in excerpt)
# sphinx_gallery_end_ignore

# %%
# A leaf refuses in-place writes, except under ``no_grad``
# --------------------------------------------------------
# A leaf that requires gradients is where ``backward()`` delivers them. An in-place
# operation on it would have to be recorded in its history, turning the leaf into a
# computed tensor and leaving no tensor to receive the gradient, so PyTorch refuses.
# Under :class:`torch.no_grad` nothing is recorded and the write is allowed: that is how
# an optimizer updates weights.
weight = torch.ones(3, device=device, requires_grad=True)
try:
    weight.add_(1)
except RuntimeError as err:
    print("RuntimeError:", err)
with torch.no_grad():
    weight -= 0.1 * torch.ones(3, device=device)  # one hand-written SGD step
print("after the update:", weight, "| still a leaf:", weight.is_leaf)

# sphinx_gallery_start_ignore
assert weight.is_leaf and torch.allclose(weight, torch.full_like(weight, 0.9))
# sphinx_gallery_end_ignore

# %%
# Don't use ``.data`` from old code
# ---------------------------------
# Old code reaches for ``.data`` to get at a tensor without its history, for instance
# ``p.data -= lr * p.grad``. It works, but ``.data`` also hides writes from the version
# counter, so the check above never fires and backward computes a wrong gradient
# silently. ``exp`` saves its output (the derivative of ``exp`` is ``exp``); doubling that
# output through ``.data`` doubles the gradient. :meth:`~torch.Tensor.detach` shares the
# version counter, so the same write through it is caught. Use ``detach()`` or
# ``no_grad`` instead.
x = torch.tensor([0.0, 1.0, 2.0], device=device, requires_grad=True)
y = x.exp()
y.data.mul_(2)
(wrong,) = torch.autograd.grad(y.sum(), x)
print("gradient after a write through .data:", wrong)
print("the right gradient, exp(x):          ", x.detach().exp())

y = x.exp()
y.detach().mul_(2)
try:
    torch.autograd.grad(y.sum(), x)
except RuntimeError as err:
    detach_error = str(err)
print("through detach(): RuntimeError:", detach_error.split(":", maxsplit=1)[0])

# sphinx_gallery_start_ignore
assert torch.allclose(wrong, 2 * x.detach().exp())
assert "modified by an inplace operation" in detach_error
# sphinx_gallery_end_ignore

# %%
# Where in-place helps: copy into a preallocated tensor
# -----------------------------------------------------
# Assembling pieces into one tensor, here two vectors into a zero-padded 4 × 7 block, is
# often clearest as writes into a preallocated result: one allocation of the final size,
# each piece copied once, instead of stacking and then padding. Autograd records each
# write as a ``CopySlices`` node, and gradients flow back to the pieces. (A Thomas
# Viehmann favourite, from his "Introduction to PyTorch" notebook.)
a = torch.randn(5, device=device, requires_grad=True)
b = torch.randn(5, device=device, requires_grad=True)
padded = torch.zeros(4, 7, device=device)  # (rows, columns): a and b with a zero border
padded[1, 1:-1] = a
padded[2, 1:-1] = b
print("grad_fn:", type(padded.grad_fn).__name__)
grad_a, grad_b = torch.autograd.grad((padded * 3).sum(), [a, b])
print("gradient for a:", grad_a, "\ngradient for b:", grad_b)

# sphinx_gallery_start_ignore
assert type(padded.grad_fn).__name__ == "CopySlices"
assert torch.equal(grad_a, torch.full_like(a, 3.0)) and torch.equal(grad_b, torch.full_like(b, 3.0))
# sphinx_gallery_end_ignore

# %%
# The block, and the graph autograd recorded for it (drawn with the site's plotting
# helper :func:`effpt.viz.autograd_graph`): the zeros never required gradients, so the
# graph starts at the leaves ``a`` and ``b``. Each write is one ``CopySlices`` node, and
# the second takes the first one's result as its input.
import matplotlib.pyplot as plt

from effpt.viz import autograd_graph

fig, (ax_block, ax_graph) = plt.subplots(
    1, 2, figsize=(9, 3.6), width_ratios=[1.3, 1], layout="constrained"
)
image = ax_block.imshow(padded.detach().cpu().numpy(), cmap="coolwarm", vmin=-2.5, vmax=2.5)
ax_block.set(
    title="padded: zeros, with a in row 1 and b in row 2",
    xticks=range(7),
    yticks=range(4),
    xlabel="column",
    ylabel="row",
)
fig.colorbar(image, ax=ax_block, shrink=0.8, label="value")
autograd_graph(padded, names={"a": a, "b": b}, ax=ax_graph, title="its backward graph")
plt.show()

# %%
# Summary
# -------
# - A trailing underscore, ``+=``, indexed assignment and ``out=`` write in place; each
#   write bumps the tensor's version counter.
# - Backward refuses a tensor that changed after it was saved; ``detect_anomaly`` points
#   at the line that saved it. Leaves refuse in-place writes outside ``no_grad``.
# - ``.data`` hides writes from that check and gives wrong gradients silently: use
#   ``detach()`` or ``no_grad``.
# - Writing pieces into a preallocated tensor is an in-place pattern that pays off;
#   autograd records it as ``CopySlices``.
