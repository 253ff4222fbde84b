"""
Compute softmax and cross-entropy without overflow
==================================================

A softmax written straight from its formula returns ``nan`` as soon as one logit passes
about 88, and a cross-entropy built on it returns ``inf`` even earlier; both poison
every gradient behind them. This page breaks the textbook versions, fixes them with two
rewrites (subtract the maximum, use log-sum-exp), measures the error against float64,
and applies the same idea to binary cross-entropy, ``log1p`` and ``expm1``.

For the background, read :doc:`/explanations/floating_point`.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_stable_softmax.py``.
"""

# %%
# The naive softmax overflows
# ---------------------------
# ``softmax(z)_i = exp(z_i) / Σ_j exp(z_j)``. In float32, ``exp(1000)`` is ``inf``,
# and ``inf / inf`` is ``nan``. The largest logit that survives is ``ln`` of float32's
# largest value, about 88.72: one step past it, :func:`torch.exp` overflows.
import math

import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))


def naive_softmax(logits: torch.Tensor) -> torch.Tensor:
    exp = torch.exp(logits)
    return exp / exp.sum()


logits = torch.tensor([1000.0, 0.0], device=device)
print("naive softmax([1000, 0]) =", naive_softmax(logits).tolist())

largest = math.log(torch.finfo(torch.float32).max)
print(f"ln(max float32) = {largest:.2f}")
print("exp([88.72, 88.73]) =", torch.exp(torch.tensor([88.72, 88.73])).tolist())

# sphinx_gallery_start_ignore
assert torch.isnan(naive_softmax(logits)[0]) and naive_softmax(logits)[1].item() == 0.0
assert round(largest, 2) == 88.72
assert math.isfinite(math.exp(88.72)) and torch.exp(torch.tensor(88.73)).item() == math.inf
# sphinx_gallery_end_ignore

# %%
# Subtract the maximum
# --------------------
# ``exp(z_i - c) / Σ_j exp(z_j - c)`` equals the softmax for any constant ``c``: the
# factor ``exp(-c)`` cancels. With ``c = max(z)`` every exponent is at most 0, so every
# ``exp`` lies in [0, 1] and the sum lies between 1 and the number of logits. (The
# source this lesson comes from calls ``torch.reduce_max``, which does not exist; the
# PyTorch spelling is :meth:`torch.Tensor.amax`, with ``keepdim=True`` so that the
# subtraction lines up with the right axis of a batch.)


def stable_softmax(logits: torch.Tensor, dim: int = -1) -> torch.Tensor:
    exp = torch.exp(logits - logits.amax(dim=dim, keepdim=True))
    return exp / exp.sum(dim=dim, keepdim=True)


print("stable softmax([1000, 0]) =", stable_softmax(logits).tolist())
print("torch.softmax([1000, 0])  =", torch.softmax(logits, dim=-1).tolist())

# sphinx_gallery_start_ignore
assert stable_softmax(logits).tolist() == [1.0, 0.0]
assert torch.softmax(logits, dim=-1).tolist() == [1.0, 0.0]
# sphinx_gallery_end_ignore

# %%
# How large can the logits get?
# -----------------------------
# We scale 10 000 standard-normal logits by a growing factor and compare each
# float32 softmax with a float64 one of the same logits. Both are probability vectors,
# so the relative error is simply the summed absolute difference. The naive version is
# as accurate as the others until its largest logit passes 88.72; from then on it
# returns ``nan``, drawn as crosses on the top edge.
unit = torch.randn(10_000, device=device)
scales = torch.logspace(-1, 2, steps=31).tolist()
methods = {
    "naive": naive_softmax,
    "stable (max subtracted)": stable_softmax,
    "torch.softmax": lambda z: torch.softmax(z, dim=-1),
}
errors = {name: [] for name in methods}
for scale in scales:
    z = scale * unit  # float32
    reference = torch.softmax(z.double(), dim=-1)
    for name, fn in methods.items():
        errors[name].append((fn(z).double() - reference).abs().sum().item())

first_nan = next(s for s, e in zip(scales, errors["naive"], strict=True) if math.isnan(e))
print(
    f"largest logit at scale 1: {unit.max().item():.2f}; naive first fails at scale {first_nan:.1f}"
)
worst = {name: max(e for e in errs if not math.isnan(e)) for name, errs in errors.items()}
print("worst finite error:", {name: f"{e:.1e}" for name, e in worst.items()})

# sphinx_gallery_start_ignore
assert first_nan * unit.max().item() > largest
assert all(math.isnan(e) for s, e in zip(scales, errors["naive"], strict=True) if s >= first_nan)
assert all(
    not math.isnan(e) and e < 1e-5 for name in methods if name != "naive" for e in errors[name]
)
# sphinx_gallery_end_ignore

# %%
# The stable version and :func:`torch.softmax` stay at the level of float32 rounding,
# below ``1e-5`` at every scale (the worst values this machine measured are printed
# above); the naive one fails beyond the dotted line, where ``scale × max(logit)``
# reaches 88.72.
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
styles = {
    "naive": ("C3", "o"),
    "stable (max subtracted)": ("C0", "s"),
    "torch.softmax": ("C2", "."),
}
for name, errs in errors.items():
    color, marker = styles[name]
    ax.loglog(scales, errs, marker=marker, color=color, label=name)
nan_scales = [s for s, e in zip(scales, errors["naive"], strict=True) if math.isnan(e)]
ax.plot(nan_scales, [1.0] * len(nan_scales), "x", color="C3", label="naive: nan")
ax.axvline(largest / unit.max().item(), color="gray", linestyle=":", label="max logit = 88.72")
ax.set(xlabel="logit scale (standard deviation)", ylabel="relative error ‖p − p₆₄‖₁")
ax.set(title="float32 softmax of 10 000 logits vs float64", ylim=(1e-9, 3))
ax.legend(fontsize=8, loc="center left")
plt.show()

# %%
# Cross-entropy: ``log(softmax)`` is not ``log_softmax``
# ------------------------------------------------------
# With soft labels ``p``, cross-entropy is ``-Σ_i p_i log q_i`` where ``q`` is the
# softmax. Even with the *stable* softmax, ``q_2 = exp(-1000)`` rounds to 0 and
# ``log(0) = -inf``, so the loss is ``inf``. The true loss is finite: half of the label
# sits on a class 1000 nats below the other.
labels = torch.tensor([0.5, 0.5], device=device)


def naive_cross_entropy(logits, labels, dim=-1):
    return -(labels * torch.log(stable_softmax(logits, dim))).sum(dim=dim)


print("naive cross-entropy:", naive_cross_entropy(logits, labels).item())

# sphinx_gallery_start_ignore
assert naive_cross_entropy(logits, labels).item() == math.inf
# sphinx_gallery_end_ignore

# %%
# Take the logarithm before dividing: ``log q_i = z_i - log Σ_j exp(z_j)``. The second
# term is :func:`torch.logsumexp`, which subtracts the maximum internally, so nothing
# overflows and nothing is rounded to 0 before its logarithm is taken. The gradient
# with respect to the logits is ``q - p``: ``[1, 0] - [0.5, 0.5]``.


def stable_cross_entropy(logits, labels, dim=-1):
    log_q = logits - torch.logsumexp(logits, dim=dim, keepdim=True)
    return -(labels * log_q).sum(dim=dim)


logits.requires_grad_(True)
loss = stable_cross_entropy(logits, labels)
(grad,) = torch.autograd.grad(loss, logits)
print(f"stable cross-entropy: {loss.item()}, gradient: {grad.tolist()}")

# sphinx_gallery_start_ignore
assert loss.item() == 500.0 and grad.tolist() == [0.5, -0.5]
# sphinx_gallery_end_ignore

# %%
# PyTorch's :func:`torch.nn.functional.cross_entropy` accepts probabilities as the
# target (a float tensor the shape of the logits) and computes the same thing, as does
# :func:`effpt.numerics.cross_entropy`, the doctested version of this page's function.
# On a batch whose logits reach thousands, all three agree with float64.
import torch.nn.functional as F

from effpt import numerics

print("F.cross_entropy:", F.cross_entropy(logits, labels).item())
print("effpt.numerics.cross_entropy:", numerics.cross_entropy(logits, labels).item())

batch_logits = 1000 * torch.randn(64, 10, device=device)  # (batch, classes)
batch_labels = torch.softmax(torch.randn(64, 10, device=device), dim=1)  # (batch, classes)
reference = stable_cross_entropy(batch_logits.double(), batch_labels.double()).mean()
print(f"batch of 64: largest |logit| {batch_logits.abs().max().item():.0f}")
for name, value in {
    "this page": stable_cross_entropy(batch_logits, batch_labels).mean(),
    "F.cross_entropy": F.cross_entropy(batch_logits, batch_labels),
    "effpt.numerics": numerics.cross_entropy(batch_logits, batch_labels),
}.items():
    print(f"batch of 64, {name:<16} relative error {abs(value.item() / reference.item() - 1):.1e}")

# sphinx_gallery_start_ignore
assert F.cross_entropy(logits, labels).item() == 500.0
assert numerics.cross_entropy(logits, labels).item() == 500.0
for value in (
    stable_cross_entropy(batch_logits, batch_labels).mean(),
    F.cross_entropy(batch_logits, batch_labels),
    numerics.cross_entropy(batch_logits, batch_labels),
):
    assert abs(value.item() / reference.item() - 1) < 1e-5
# sphinx_gallery_end_ignore

# %%
# The same pattern elsewhere
# --------------------------
# Binary cross-entropy on probabilities has the same flaw. For a logit of 20 or more,
# :func:`torch.sigmoid` rounds to exactly 1.0 in float32, so ``log(1 - 1)`` is ``-inf``.
# :class:`torch.nn.BCELoss` hides this by clamping the logarithm at -100: the loss comes
# out as 100 instead of ``x``, and the gradient as 0 instead of 1, so a confidently wrong
# model stops learning. :class:`torch.nn.BCEWithLogitsLoss` takes the logit itself and
# computes ``log(1 + exp(x))`` stably.
x = torch.tensor([5.0, 20.0, 60.0], device=device, requires_grad=True)
target = torch.zeros(3, device=device)  # the confidently wrong case

bce = torch.nn.BCELoss(reduction="none")(torch.sigmoid(x), target)
(bce_grad,) = torch.autograd.grad(bce.sum(), x)
logit_bce = torch.nn.BCEWithLogitsLoss(reduction="none")(x, target)
(logit_grad,) = torch.autograd.grad(logit_bce.sum(), x)
exact = F.softplus(x.detach().double())  # log(1 + exp(x)) in float64

print(
    f"{'x':>5}{'exact loss':>12}{'BCELoss':>10}{'its grad':>10}{'WithLogits':>12}{'its grad':>10}"
)
columns = (x, exact, bce, bce_grad, logit_bce, logit_grad)
for xi, ex, b, bg, lb, lg in zip(*(c.tolist() for c in columns), strict=True):
    print(f"{xi:>5.0f}{ex:>12.4f}{b:>10.4f}{bg:>10.4f}{lb:>12.4f}{lg:>10.4f}")

# sphinx_gallery_start_ignore
assert torch.sigmoid(x[1:]).tolist() == [1.0, 1.0]
assert bce[1].item() == 100.0 and bce_grad[1].item() == 0.0
assert bce[2].item() == 100.0 and bce_grad[2].item() == 0.0
assert torch.allclose(logit_bce.double(), exact) and torch.allclose(logit_grad, torch.sigmoid(x))
# sphinx_gallery_end_ignore

# %%
# Near zero the trouble is precision, not range: ``1 + 1e-8`` is 1 in float32, so
# ``log(1 + x)`` and ``exp(x) - 1`` return exactly 0 for small ``x``.
# At ``x = 1e-5`` they are already wrong in the third digit.
# :func:`torch.log1p` and :func:`torch.expm1` compute them without forming ``1 + x``
# and keep float32's full precision.
small = torch.tensor([1e-8, 1e-5], device=device)


def show(values: torch.Tensor) -> str:
    return ", ".join(f"{v:.5e}" for v in values.tolist())


print(f"log(1 + x) = {show(torch.log(1 + small))}   log1p(x) = {show(torch.log1p(small))}")
print(f"exp(x) - 1 = {show(torch.exp(small) - 1)}   expm1(x) = {show(torch.expm1(small))}")

# sphinx_gallery_start_ignore
assert torch.log(1 + small)[0].item() == 0.0 and (torch.exp(small) - 1)[0].item() == 0.0
exact_small = small.double()
assert torch.allclose(torch.log1p(small).double(), torch.log1p(exact_small), rtol=1e-6)
assert torch.allclose(torch.expm1(small).double(), torch.expm1(exact_small), rtol=1e-6)
assert abs(torch.log(1 + small)[1].item() / 1e-5 - 1) > 1e-3
# sphinx_gallery_end_ignore

# %%
# Check the backward pass too
# ---------------------------
# A forward pass that returns a finite number can still send ``nan`` backwards: the
# derivative of ``log(q)`` at ``q = 0`` is infinite, and ``inf × 0`` is ``nan``. So we
# check both passes, on a batch whose logits reach tens of thousands.
extreme = (30_000 * torch.randn(8, 10, device=device)).requires_grad_(True)  # (batch, classes)
soft = torch.softmax(torch.randn(8, 10, device=device), dim=1)  # (batch, classes)
print(f"largest |logit| in the batch: {extreme.abs().max().item():.0f}")
for name, fn in {
    "log(softmax)": lambda z: naive_cross_entropy(z, soft).mean(),
    "logsumexp form": lambda z: stable_cross_entropy(z, soft).mean(),
    "F.cross_entropy": lambda z: F.cross_entropy(z, soft),
    "effpt.numerics": lambda z: numerics.cross_entropy(z, soft),
}.items():
    value = fn(extreme)
    (g,) = torch.autograd.grad(value, extreme)
    finite_g = torch.isfinite(g).all().item()
    print(
        f"{name:<16} forward finite: {math.isfinite(value.item())!s:<5}  backward finite: {finite_g}"
    )

# sphinx_gallery_start_ignore
naive_value = naive_cross_entropy(extreme, soft).mean()
assert not math.isfinite(naive_value.item())
stable_value = numerics.cross_entropy(extreme, soft)
(stable_grad,) = torch.autograd.grad(stable_value, extreme)
assert math.isfinite(stable_value.item()) and torch.isfinite(stable_grad).all()
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Subtract the maximum before :func:`torch.exp`: softmax is unchanged and nothing
#   overflows. :func:`torch.softmax` does this for you.
# - Never take ``log`` of a softmax; use :func:`torch.log_softmax`,
#   :func:`torch.logsumexp`, or a loss that takes logits
#   (:func:`torch.nn.functional.cross_entropy`, :class:`torch.nn.BCEWithLogitsLoss`).
# - Use :func:`torch.log1p` and :func:`torch.expm1` when the argument is near 0.
# - Test the gradients as well as the loss: a clamped or finite forward pass can still
#   hide a zero or ``nan`` gradient.
