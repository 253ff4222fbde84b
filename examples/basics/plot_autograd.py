"""
Compute gradients with autograd, and know where it bites
========================================================

Autograd records the operations on tensors that require gradients and replays them
backwards to get derivatives. Most of the time it just works; the rest of the time a
leaf goes missing, an in-place write breaks the backward pass, or a gradient is
silently accumulated. This page shows the machinery, draws the graphs it records, and
walks through each of those traps with its error message and its fix.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_autograd.py``.
"""

# %%
# A first derivative
# ------------------
# Take ``u(x) = x²`` and ``g(u) = -u``. By the chain rule ``d g(u(x)) / dx = -2x``, which
# is -2 at ``x = 1``. :func:`torch.autograd.grad` returns one gradient per input, as a tuple.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))


def u(x):
    return x * x


def g(u):
    return -u


x = torch.tensor(1.0, device=device, requires_grad=True)
(dgdx,) = torch.autograd.grad(g(u(x)), x)
print(dgdx)

# sphinx_gallery_start_ignore
assert dgdx.item() == -2.0
# sphinx_gallery_end_ignore

# %%
# The derivative of a whole curve at once
# ---------------------------------------
# For ``f(x) = 10·sin²x + tanh x`` evaluated at 100 points, each ``f[i]`` depends only on
# ``x[i]``, so the gradient of ``f.sum()`` holds the 100 derivatives ``f'(x[i])``. It
# matches the formula ``20·sin x·cos x + 1 − tanh²x`` to float32 precision.
xs = torch.linspace(-3.0, 3.0, steps=100, device=device, requires_grad=True)
f = 10 * torch.sin(xs) ** 2 + torch.tanh(xs)
(df,) = torch.autograd.grad(f.sum(), xs)

with torch.no_grad():
    exact = 20 * torch.sin(xs) * torch.cos(xs) + 1 - torch.tanh(xs) ** 2
print(f"largest difference from the formula: {(df - exact).abs().max().item():.1e}")

# sphinx_gallery_start_ignore
assert torch.allclose(df, exact, atol=1e-4)
# sphinx_gallery_end_ignore

# %%
# Each gradient is the slope of a tangent; drawing one at every tenth point shows them
# touching the curve.
import matplotlib.pyplot as plt

x_np, f_np, df_np = (v.detach().cpu().numpy() for v in (xs, f, df))
fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
ax.plot(x_np, f_np, "--", color="0.3", label="f(x) = 10 sin²x + tanh x")
for xi, fi, gi in zip(x_np[::10], f_np[::10], df_np[::10], strict=True):
    half = 0.4 / (1 + (gi / 4) ** 2) ** 0.5  # about the same drawn length for every tangent
    ax.plot([xi - half, xi + half], [fi - half * gi, fi + half * gi], color="C3", linewidth=2)
ax.plot([], [], color="C3", linewidth=2, label="tangent from autograd's f'(x)")
ax.set(xlabel="x", ylabel="f(x)", title="Tangents at every tenth point")
ax.legend(loc="upper center")
plt.show()

# %%
# Leaves and computed tensors
# ---------------------------
# A *leaf* is a tensor you created with ``requires_grad=True``: it has no ``grad_fn``,
# and ``backward()`` stores its gradient in ``.grad``. A tensor computed from a leaf has a
# ``grad_fn``, the backward function of the operation that made it. Only floating-point
# and complex tensors can require gradients.
a = torch.randn(5, device=device, requires_grad=True)
b = torch.randn(5, device=device, requires_grad=True)
c = (a + 1) * b
for name, tensor in [("a", a), ("c", c)]:
    print(f"{name}: is_leaf={tensor.is_leaf}, grad_fn={tensor.grad_fn}")
try:
    torch.arange(3, device=device).requires_grad_()
except RuntimeError as err:
    print("RuntimeError:", err)

# sphinx_gallery_start_ignore
assert a.is_leaf and not c.is_leaf and type(c.grad_fn).__name__ == "MulBackward0"
# sphinx_gallery_end_ignore

# %%
# The lost leaf
# -------------
# ``torch.randn(5, requires_grad=True).to(device)`` creates a leaf on the CPU and then
# *copies* it: the name now points at the copy, which is not a leaf, and its ``.grad``
# stays ``None`` (PyTorch warns when you read it). On a CPU-only machine ``.to("cpu")``
# has nothing to do and returns the leaf itself, so the line below prints ``True`` when
# this page runs on a CPU and ``False`` on a GPU. A dtype change copies everywhere, so it shows the trap on any
# machine.
import warnings

moved = torch.randn(5, requires_grad=True).to(device)
print(f"randn(5, requires_grad=True).to({device.type!r}) is a leaf: {moved.is_leaf}")

lost = torch.randn(5, requires_grad=True).to(device, torch.float64)
(lost * 2).sum().backward()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    lost_grad = lost.grad
    print("lost.is_leaf:", lost.is_leaf, "| lost.grad:", lost_grad)
print("UserWarning:", str(caught[0].message).split(". ")[0])

# sphinx_gallery_start_ignore
assert moved.is_leaf == (device.type == "cpu")
assert not lost.is_leaf and lost_grad is None and "not a leaf" in str(caught[0].message)
del lost  # sphinx-gallery reads ``lost.grad`` again when it scans names; spare its warning
# sphinx_gallery_end_ignore

# %%
# The fix is to create the tensor where and as it will be used, so that the leaf is
# the tensor you hold. (``.to(...).requires_grad_()`` also works, but allocates twice.)
kept = torch.randn(5, device=device, dtype=torch.float64, requires_grad=True)
(kept * 2).sum().backward()
print("kept.is_leaf:", kept.is_leaf, "| kept.grad:", kept.grad)

# sphinx_gallery_start_ignore
assert kept.is_leaf and torch.equal(kept.grad, torch.full_like(kept, 2.0))
# sphinx_gallery_end_ignore

# %%
# Drawing the graph
# -----------------
# :func:`effpt.viz.autograd_graph` draws what autograd recorded: leaves in blue, backward
# functions in grey, the output's in green. ``detach()`` returns a tensor that shares the
# data but not the history, so everything behind it disappears from the graph. With the
# lost leaf, ``a`` names a ``ToCopyBackward0`` node and the real leaf has no name at all.
from effpt.viz import autograd_graph

lost_a = torch.randn(5, requires_grad=True).to(device, torch.float64)
b64 = torch.randn(5, device=device, dtype=torch.float64, requires_grad=True)
fig, axes = plt.subplots(1, 3, figsize=(10, 3.6), layout="constrained")
autograd_graph(c, names={"a": a, "b": b}, ax=axes[0], title="c = (a + 1) * b")
autograd_graph(
    (a + 1).detach() * b, names={"a": a, "b": b}, ax=axes[1], title="c = (a + 1).detach() * b"
)
autograd_graph(
    (lost_a + 1) * b64,
    names={"a": lost_a, "b": b64},
    ax=axes[2],
    title="a = randn(5, requires_grad=True).to(...)",
)
plt.show()

# %%
# With ``detach``, ``a`` takes no part in the gradient: :func:`torch.autograd.grad` with
# ``allow_unused=True`` returns ``None`` for it.
grad_a, grad_b = torch.autograd.grad(((a + 1).detach() * b).sum(), [a, b], allow_unused=True)
print("gradient for a:", grad_a, "| for b equals a + 1:", torch.equal(grad_b, (a + 1).detach()))

# sphinx_gallery_start_ignore
assert grad_a is None and torch.equal(grad_b, (a + 1).detach())
# sphinx_gallery_end_ignore

# %%
# In-place operations and the version counter
# -------------------------------------------
# Every tensor counts the in-place writes made to it. Adding 1 to ``b1`` in place is fine
# when nothing saved ``b1`` for the backward pass: ``b2 = b1 + 1`` needs no inputs to
# differentiate, and the gradient is all ones.
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
# ``b2 = b1 ** 2`` does save ``b1``: its derivative is ``2·b1``. After the in-place write,
# the saved ``b1`` is at version 1 where version 0 was recorded, and backward refuses to
# compute a wrong gradient.
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


def failing_backward():
    a = torch.randn(5, device=device, requires_grad=True)
    b1 = a + 1
    b2 = b1**2
    b1 += 1
    torch.autograd.grad(b2.sum(), a)


this_file = failing_backward.__code__.co_filename
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with torch.autograd.detect_anomaly(), contextlib.suppress(RuntimeError):
        failing_backward()
report = next(str(w.message) for w in caught if "Error detected" in str(w.message))
lines = report.splitlines()
frames = [i for i, line in enumerate(lines) if line.strip().startswith("File ")]
excerpt = [lines[0]] + [text for i in frames if this_file in lines[i] for text in lines[i : i + 2]]
print("\n".join(excerpt))

# sphinx_gallery_start_ignore
assert "PowBackward0" in lines[0] and any("failing_backward" in line for line in excerpt)
# sphinx_gallery_end_ignore

# %%
# ``no_grad``, and the exception for views
# ----------------------------------------
# Inside :class:`torch.no_grad` nothing is recorded, so results do not require gradients,
# which is what you want for evaluation. A view is different: ``a[:2, :2]`` shares
# ``a``'s memory, and it still reports ``requires_grad=True`` even when taken under
# ``no_grad``.
a = torch.randn(5, 5, device=device, requires_grad=True)
with torch.no_grad():
    doubled = a * 2
    corner = a[:2, :2]
print(
    "a * 2 requires grad:",
    doubled.requires_grad,
    "| a[:2, :2] requires grad:",
    corner.requires_grad,
)

# sphinx_gallery_start_ignore
assert not doubled.requires_grad and corner.requires_grad
# sphinx_gallery_end_ignore

# %%
# Second derivatives
# ------------------
# ``create_graph=True`` records the backward pass itself, so the gradient can be
# differentiated again. For ``b = a⁴`` the gradient is ``4a³``; differentiating its sum
# gives ``12a²``: the Hessian-vector product with a vector of ones (the Hessian is
# diagonal here). At ``a = [0, 1, 2, 3, 4]`` that is ``[0, 12, 48, 108, 192]``.
a = torch.arange(5.0, device=device, requires_grad=True)
(grad,) = torch.autograd.grad((a**4).sum(), a, create_graph=True)
(hvp,) = torch.autograd.grad(grad.sum(), a)
print("gradient:", grad.detach(), "\nHessian · ones:", hvp)

# sphinx_gallery_start_ignore
assert torch.allclose(hvp.cpu(), torch.tensor([0.0, 12.0, 48.0, 108.0, 192.0]))
# sphinx_gallery_end_ignore

# %%
# ``backward`` versus ``autograd.grad``
# -------------------------------------
# :meth:`~torch.Tensor.backward` is the convenience the optimizers rely on: it *adds* the
# gradient into ``.grad`` of every leaf, so two calls without zeroing give twice the
# gradient. Intermediate tensors keep no ``.grad`` unless you ask with
# :meth:`~torch.Tensor.retain_grad`. The graph is freed after one backward pass, unless
# ``retain_graph=True``. ``torch.autograd.grad`` returns gradients and touches no ``.grad``.
w = torch.tensor([1.0, 2.0], device=device, requires_grad=True)
hidden = w * 3
hidden.retain_grad()
loss = (hidden**2).sum()
loss.backward(retain_graph=True)
first_w, first_hidden = w.grad.tolist(), hidden.grad.tolist()
print("w.grad after one backward:", first_w, "| hidden.grad:", first_hidden)
loss.backward()
print("w.grad after two:", w.grad)
try:
    loss.backward()
except RuntimeError as err:
    print("RuntimeError:", str(err).split(" (")[0])

# sphinx_gallery_start_ignore
assert first_w == [18.0, 36.0] and first_hidden == [6.0, 12.0]
assert w.grad.tolist() == [36.0, 72.0]
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Create tensors that need gradients on their device and in their dtype; a
#   ``.to(...)`` afterwards hands you a copy that is not a leaf and never gets ``.grad``.
# - ``detach()`` cuts history; ``no_grad`` records nothing, except that views still
#   report ``requires_grad``.
# - An in-place write to a tensor that backward saved fails with a version-counter error;
#   ``detect_anomaly`` points at the forward line that saved it.
# - ``backward()`` accumulates into ``.grad``; ``autograd.grad`` returns gradients, and
#   with ``create_graph=True`` gives second derivatives.
