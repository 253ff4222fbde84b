"""
Compute gradients with autograd, and know where it bites
========================================================

.. effpt-before-you-start::
   :learn: - Compute gradients with ``torch.autograd.grad`` and ``backward()``, and second
             derivatives with ``create_graph=True``.
           - Draw the graph autograd records, and cut it with ``detach()``.
           - Spot a lost leaf, an accumulated gradient and a leaking graph, and fix each.
           - Choose between ``no_grad``, ``inference_mode``, ``detach()`` and ``eval()``.
   :read-first: :doc:`plot_tensors_are_views` for views, and for when ``.to()`` copies.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU); the lost-leaf section then prints
           ``False`` where a CPU prints ``True``.

Autograd records the operations on tensors that require gradients and replays them
backwards to get derivatives. Most of the time it just works; this page shows the
machinery, draws the graphs it records, and walks through the traps (a leaf that goes
missing, a gradient silently accumulated, a graph that outlives its use), each with its
message and its fix. In-place writes, the other classic trap, have :doc:`a page of their
own <plot_in_place_operations>`, the next one.
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
# A *leaf* is a tensor that no recorded operation produced, such as one you created with
# ``requires_grad=True``: it has no ``grad_fn``, and if it requires gradients,
# ``backward()`` stores its gradient in ``.grad``. A tensor computed from a leaf that
# requires gradients has a ``grad_fn``, the backward function of the operation that made
# it. Only floating-point and complex tensors can require gradients.
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
# has nothing to do and returns the leaf itself, so the first line below prints ``True``
# when this page runs on a CPU and ``False`` on a GPU. A dtype change copies everywhere,
# so a leaf made in float64 and converted to float32 shows the trap on any machine.
import warnings

moved = torch.randn(5, requires_grad=True).to(device)
print(f"randn(5, requires_grad=True).to({device.type!r}) is a leaf: {moved.is_leaf}")

lost = torch.randn(5, dtype=torch.float64, requires_grad=True).to(device, torch.float32)
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
# the tensor you hold. (``.to(...).requires_grad_()`` also works, but allocates twice
# whenever ``.to`` copies.)
kept = torch.randn(5, device=device, requires_grad=True)
(kept * 2).sum().backward()
print("kept.is_leaf:", kept.is_leaf, "| kept.grad:", kept.grad)

# sphinx_gallery_start_ignore
assert kept.is_leaf and torch.equal(kept.grad, torch.full_like(kept, 2.0))
# sphinx_gallery_end_ignore

# %%
# Drawing the graph
# -----------------
# Every computed tensor's ``grad_fn`` lists the nodes it came from in ``next_functions``;
# following them from the output reaches every leaf, as an ``AccumulateGrad`` node (the
# one that writes its ``.grad``). :func:`effpt.viz.autograd_graph`, a plotting helper of
# this site, walks them and draws what it finds with matplotlib: leaves in blue, backward
# functions in grey, the output's in green. :meth:`~torch.Tensor.detach` returns a tensor
# that shares the data but not the history, so everything behind it disappears from the
# graph. With the lost leaf, ``a`` names a ``ToCopyBackward0`` node and the real leaf has
# no name at all.
from effpt.viz import autograd_graph

print("c.grad_fn.next_functions:", c.grad_fn.next_functions)
lost_a = torch.randn(5, dtype=torch.float64, requires_grad=True).to(device, torch.float32)
fig, axes = plt.subplots(1, 3, figsize=(10, 3.6), layout="constrained")
autograd_graph(c, names={"a": a, "b": b}, ax=axes[0], title="c = (a + 1) * b")
autograd_graph(
    (a + 1).detach() * b, names={"a": a, "b": b}, ax=axes[1], title="c = (a + 1).detach() * b"
)
autograd_graph(
    (lost_a + 1) * b,
    names={"a": lost_a, "b": b},
    ax=axes[2],
    title="a = randn(5, float64, requires_grad=True)\n.to(device, float32)",
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
# When ``no_grad`` is the wrong tool
# ----------------------------------
# ``no_grad`` belongs where nobody wants gradients: evaluating a model written for
# training, or updating weights by hand. Three places it gets used by mistake:
#
# - It does not put a model in evaluation mode: dropout keeps dropping (two calls below
#   differ) until :meth:`~torch.nn.Module.eval` switches it off.
# - For inference only, :class:`torch.inference_mode` also skips autograd's bookkeeping
#   (version counters, view tracking), but its tensors can never join a graph later: the
#   error below. Keep ``no_grad`` where results may feed a computation that needs gradients.
# - To stop the gradient through one value while the rest still needs its graph, use
#   ``detach()`` on that value, as above; a ``no_grad`` block around the computation
#   records nothing at all. Thomas Viehmann's "Introduction to PyTorch" notebook (ACDL
#   2020) puts it bluntly: needing ``no_grad`` anywhere else hints that you are doing it
#   wrong.
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Dropout(p=0.5)).to(device)
inputs = torch.ones(1, 16, device=device)
with torch.no_grad():
    same_in_train_mode = torch.equal(model(inputs), model(inputs))
    model.eval()
    same_in_eval_mode = torch.equal(model(inputs), model(inputs))
print("no_grad, two calls equal:", same_in_train_mode, "| after eval():", same_in_eval_mode)

with torch.inference_mode():
    features = model(inputs)
head = torch.nn.Linear(16, 1).to(device)
try:
    head(features).sum().backward()
except RuntimeError as err:
    inference_error = str(err)
print("RuntimeError:", inference_error.split(". ", maxsplit=1)[0])

# sphinx_gallery_start_ignore
assert not same_in_train_mode and same_in_eval_mode
assert "Inference tensors cannot be saved for backward" in inference_error
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
# Don't call ``backward(create_graph=True)``
# ------------------------------------------
# ``create_graph=True`` keeps the graph of the backward pass alive: that is the point for
# higher derivatives, and memory spent for nothing otherwise. With ``backward()`` it also
# leaks: the gradient stored in ``w.grad`` has a graph that leads back to ``w``, and ``w``
# holds ``w.grad``, a reference cycle through autograd's C++ objects that Python's garbage
# collector cannot see. PyTorch warns; below, ``w`` survives ``del`` and ``gc.collect()``
# (a weak reference to a tag on it tells), unless its ``.grad`` is cleared first.
# ``torch.autograd.grad`` returns the gradient instead of storing it, and makes no cycle.
# Thomas Viehmann's advice: use ``backward()`` only to feed an optimizer, and never with
# ``create_graph``.
import gc
import weakref


class Tag:
    """A plain object to hang on a tensor, so that a weak reference can watch it."""


def watched_leaf(n):
    t = torch.randn(n, device=device, requires_grad=True)
    t.tag = Tag()  # lives exactly as long as the tensor's Python object
    return t, weakref.ref(t.tag)


w, w_alive = watched_leaf(1000)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    (w**3).sum().backward(create_graph=True)
print("UserWarning:", str(caught[0].message).split(". ")[0])
print("w.grad has a graph:", w.grad.grad_fn is not None)
del w
gc.collect()
print("w still alive after del and gc.collect():", w_alive() is not None, "(leaked for good)")

w, w_alive_cleared = watched_leaf(1000)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the same warning again
    (w**3).sum().backward(create_graph=True)
w.grad = None  # break the cycle before letting go of w
del w
gc.collect()
print("alive when its .grad was cleared first:", w_alive_cleared() is not None)

v, v_alive = watched_leaf(1000)
(grad_v,) = torch.autograd.grad((v**3).sum(), v, create_graph=True)
del v, grad_v
gc.collect()
print("with autograd.grad, alive after del:", v_alive() is not None)

# sphinx_gallery_start_ignore
assert "reference cycle" in str(caught[0].message)
assert w_alive() is not None and w_alive_cleared() is None and v_alive() is None
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Create tensors that need gradients on their device and in their dtype; a
#   ``.to(...)`` afterwards hands you a copy that is not a leaf and never gets ``.grad``.
# - ``detach()`` cuts history where you choose; ``no_grad`` records nothing (views still
#   report ``requires_grad``), does not replace ``model.eval()``, and for pure inference
#   ``inference_mode`` is the stricter choice.
# - ``backward()`` accumulates into ``.grad``; ``autograd.grad`` returns gradients, and
#   with ``create_graph=True`` gives second derivatives without the leak that
#   ``backward(create_graph=True)`` creates.
