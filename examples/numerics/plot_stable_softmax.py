"""
Compute softmax and cross-entropy without overflow
==================================================

.. effpt-before-you-start::
   :learn: - Write softmax and cross-entropy that do not overflow: subtract the maximum,
             use ``logsumexp``.
           - Give ``CrossEntropyLoss`` logits and ``NLLLoss`` log-probabilities.
           - Use ``BCEWithLogitsLoss``, ``log1p`` and ``expm1`` where the naive forms fail.
           - Check the backward pass for ``nan`` as well as the forward pass.
   :read-first: :doc:`plot_floating_point_formats` for float32's largest value and its
                subnormal numbers.
   :needs: A CPU is enough. Most sections run on a CUDA or Apple MPS GPU when there is
           one; the float64 references and the scan of logit gaps stay on the CPU.

A softmax written straight from its formula returns ``nan`` as soon as one logit passes
about 88.7. A cross-entropy that takes the logarithm of a softmax fails too: built on
that softmax it returns ``nan`` past the same point, and built on a softmax that
subtracts the maximum it still returns ``inf`` once two logits are about 104 apart.
Either poisons every gradient behind it. This page
breaks the textbook versions, fixes them with two rewrites (subtract the maximum, use
log-sum-exp), measures the error against float64, shows which input each of PyTorch's
two classification losses expects, and applies the same idea to binary cross-entropy,
``log1p`` and ``expm1``.

For the background, read :doc:`/explanations/floating_point`.
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


def naive_softmax(logits: torch.Tensor, dim: int = -1) -> torch.Tensor:
    exp = torch.exp(logits)
    return exp / exp.sum(dim=dim, keepdim=True)


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
# ``exp`` lies in [0, 1] and the sum lies between 1 and the number of logits. The
# maximum is :meth:`torch.Tensor.amax` along the softmax's dimension, with
# ``keepdim=True`` so that the subtraction lines up with the right axis of a batch.
# (The Effective PyTorch guide writes this step with a reduction from TensorFlow that
# PyTorch does not have.)


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
# float32 softmax with a float64 one of the same logits, computed on the CPU (not every
# device has float64). Both are probability vectors, so the relative error is simply the
# summed absolute difference. The naive version is as accurate as the stable one until its
# largest logit passes 88.72; from then on it returns ``nan``, drawn as crosses at an
# error of 1.
unit = torch.randn(10_000).to(device)  # drawn on the CPU: the same logits on every device
scales = torch.logspace(-1, 2, steps=31).tolist()
methods = {
    "naive": naive_softmax,
    "stable (max subtracted)": stable_softmax,
    "torch.softmax": lambda z: torch.softmax(z, dim=-1),
}
errors = {name: [] for name in methods}
for scale in scales:
    z = scale * unit  # float32, on the device
    reference = torch.softmax(z.cpu().double(), dim=-1)  # float64 on the CPU
    for name, fn in methods.items():
        errors[name].append((fn(z).cpu().double() - reference).abs().sum().item())

first_nan = next(s for s, e in zip(scales, errors["naive"], strict=True) if math.isnan(e))
print(
    f"largest logit at scale 1: {unit.max().item():.2f}; naive first fails at scale {first_nan:.1f}"
)
worst = {name: max(e for e in errs if not math.isnan(e)) for name, errs in errors.items()}
eps = torch.finfo(torch.float32).eps  # 1.2e-07, float32's machine epsilon
print(f"worst finite error (in units of float32's eps, {eps:.1e}):")
for name, e in worst.items():
    print(f"  {name:<24}{e:.1e} = {e / eps:.1f} eps")

# sphinx_gallery_start_ignore
assert first_nan * unit.max().item() > largest
assert all(math.isnan(e) for s, e in zip(scales, errors["naive"], strict=True) if s >= first_nan)
assert all(not math.isnan(e) for name in methods if name != "naive" for e in errors[name])
# sphinx_gallery_end_ignore

# %%
# The stable version and :func:`torch.softmax` stay finite at every scale, and their
# errors are counted in float32 roundings, printed above in units of ``eps``. How many
# roundings depends on the kernel: :func:`torch.softmax` runs code of its own for the
# exponentials and the sum, so its error need not equal the hand-written version's,
# and can be many times larger on one machine and smaller on another. The naive
# version fails beyond the dotted line, where ``scale × max(logit)`` reaches 88.72.
from effpt.expect import expect

_ = expect(
    "torch.softmax of 10,000 float32 logits stays within 1e-5 (84 eps) of float64 at every scale",
    worst["torch.softmax"],
    below=1e-5,
    unit="",
    device=device,
)

# %%
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


def naive_cross_entropy(logits, labels, dim=-1, softmax=stable_softmax):
    return -(labels * torch.log(softmax(logits, dim))).sum(dim=dim)


print("log of the stable softmax, logits [1000, 0]:", naive_cross_entropy(logits, labels).item())

# sphinx_gallery_start_ignore
assert naive_cross_entropy(logits, labels).item() == math.inf
# sphinx_gallery_end_ignore

# %%
# Where does each version break? Below, the logits are ``[z, 0]`` for every gap ``z``
# from 80 to 110 in steps of 0.01. Taking the log of the naive softmax gives ``nan``
# once ``exp(z)`` overflows, at the same 88.72 as the softmax itself. With the maximum
# subtracted, the small probability is ``exp(-z) / (1 + exp(-z))``; it rounds to 0, and
# its log to ``-inf``, once ``exp(-z)`` falls below half of float32's smallest subnormal
# (1.4e-45), a gap of ``ln(2 / 1.4e-45)`` ≈ 103.97. Later, not earlier, but still a
# failure at logits a trained classifier can reach.
#
# The scan runs on the CPU, whose float32 keeps subnormal numbers; a device that flushes
# them to zero fails sooner, as soon as ``exp(-z)`` drops below the smallest *normal*
# number (also printed).
gaps = torch.arange(8_000, 11_000) / 100  # 80.00 to 109.99, float32, on the CPU
pairs = torch.stack([gaps, torch.zeros_like(gaps)], dim=1)  # (steps, 2): logits [z, 0]
pair_labels = torch.full_like(pairs, 0.5)  # (steps, 2)


def breaking_point(losses):
    """The last gap with a finite loss and the value just past it (None if all finite)."""
    finite = torch.isfinite(losses)
    if finite.all():
        return None
    first_bad = int((~finite).nonzero()[0])
    return gaps[first_bad - 1].item(), losses[first_bad].item()


breaks = {}
for name, softmax in {"naive": naive_softmax, "max-subtracted": stable_softmax}.items():
    breaks[name] = breaking_point(naive_cross_entropy(pairs, pair_labels, softmax=softmax))
    last_finite, past = breaks[name]
    label = f"log of the {name} softmax:"
    print(f"{label:<34} finite up to a gap of {last_finite:.2f}, then {past}")
print(f"ln(2 / smallest subnormal) = {math.log(2 / 2.0**-149):.2f}")
print(f"ln(1 / smallest normal)    = {-math.log(torch.finfo(torch.float32).tiny):.2f}")

# sphinx_gallery_start_ignore
assert math.isnan(breaks["naive"][1]) and round(breaks["naive"][0], 2) == 88.72
assert breaks["max-subtracted"][1] == math.inf and round(breaks["max-subtracted"][0], 2) == 103.97
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
all_finite = breaking_point(stable_cross_entropy(pairs, pair_labels)) is None
print("logsumexp form finite at every gap from 80 to 110:", all_finite)

# sphinx_gallery_start_ignore
assert loss.item() == 500.0 and grad.tolist() == [0.5, -0.5]
assert all_finite
# sphinx_gallery_end_ignore

# %%
# PyTorch's :func:`torch.nn.functional.cross_entropy` accepts probabilities as the
# target (a float tensor the shape of the logits) and computes the same thing. So does
# :func:`effpt.numerics.cross_entropy`, this page's function hardened: it checks its
# arguments, computes float16 and bfloat16 input in float32, returns empty results for
# empty input, and is tested against float64 on logits up to 1e30. On a batch whose
# logits reach thousands, all three agree with a float64 reference computed on the CPU.
import torch.nn.functional as F

from effpt import numerics

print("F.cross_entropy:", F.cross_entropy(logits, labels).item())
print("effpt.numerics.cross_entropy:", numerics.cross_entropy(logits, labels).item())

batch_logits = 1000 * torch.randn(64, 10, device=device)  # (batch, classes)
batch_labels = torch.softmax(torch.randn(64, 10, device=device), dim=1)  # (batch, classes)
reference = stable_cross_entropy(batch_logits.cpu().double(), batch_labels.cpu().double()).mean()
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
# ``CrossEntropyLoss`` takes logits, ``NLLLoss`` takes log-probabilities
# ------------------------------------------------------------------------
# :class:`torch.nn.CrossEntropyLoss` applies :func:`torch.log_softmax` itself, so its
# input is raw logits. :class:`torch.nn.NLLLoss` only picks ``-input[target]``, so its
# input must already be log-probabilities, the output of :func:`torch.log_softmax` (or a
# :class:`torch.nn.LogSoftmax` layer). Neither checks what it is given. Below, one
# example of ten classes, predicted right with a margin of 5, goes to each loss in three
# forms; the row that matches each loss is the correct one.
classes, margin = 10, 5.0
scores = torch.zeros(1, classes, device=device)  # (batch, classes)
scores[0, 3] = margin
target = torch.tensor([3], device=device)  # a class index per example
forms = {
    "logits": scores,
    "log_softmax(logits)": torch.log_softmax(scores, dim=1),
    "softmax(logits)": torch.softmax(scores, dim=1),
}
ce_loss, nll_loss = torch.nn.CrossEntropyLoss(), torch.nn.NLLLoss()
print(f"{'input':<22}{'CrossEntropyLoss':>18}{'NLLLoss':>10}")
table = {name: (ce_loss(x, target).item(), nll_loss(x, target).item()) for name, x in forms.items()}
for name, (ce, nll) in table.items():
    print(f"{name:<22}{ce:>18.4f}{nll:>10.4f}")

# sphinx_gallery_start_ignore
assert math.isclose(table["logits"][0], table["log_softmax(logits)"][1], rel_tol=1e-5)
assert math.isclose(table["log_softmax(logits)"][0], table["logits"][0], rel_tol=1e-5)
assert table["logits"][1] == -margin and table["softmax(logits)"][1] < 0
assert table["softmax(logits)"][0] > 1.0
# sphinx_gallery_end_ignore

# %%
# ``NLLLoss`` on logits returns ``-5``, a "loss" that falls without bound as the correct
# logit grows, and on probabilities a negative number as well. ``CrossEntropyLoss`` on
# log-probabilities happens to be right, because ``log_softmax`` of log-probabilities
# changes nothing (their ``logsumexp`` is ``log 1 = 0``).
#
# ``CrossEntropyLoss`` on the *output of a softmax* is the common bug, and it fails quietly: the inputs lie in
# [0, 1], so a second softmax can never be confident. The loss cannot fall below
# ``ln(1 + (C - 1)/e)`` for ``C`` classes, and the gradient that reaches the logits is
# ``C`` times smaller at the start: at equal inputs, a softmax scales every change of its
# input by ``1/C``. The figure follows both as the margin grows: both gradients fade
# as the prediction saturates, but the loss fed a softmax stays at its floor, a number
# no amount of training can lower.
margins = torch.linspace(0, 20, 81, device=device)
on_logits, on_probs = "CrossEntropyLoss(logits)", "CrossEntropyLoss(softmax(logits))"
losses = {on_logits: [], on_probs: []}
grads = {name: [] for name in losses}
for m in margins.tolist():
    z = torch.zeros(1, classes, device=device)
    z[0, 3] = m
    z.requires_grad_(True)
    for name, x in zip(losses, (z, torch.softmax(z, dim=1)), strict=True):
        value = ce_loss(x, target)
        (g,) = torch.autograd.grad(value, z)
        losses[name].append(value.item())
        grads[name].append(g.norm().item())
floor = math.log(1 + (classes - 1) / math.e)
print(f"ln(1 + (C - 1)/e) for C = {classes}: {floor:.4f}")
print(f"{on_probs} at margin 20: {losses[on_probs][-1]:.4f}")
ratio_at_zero = grads[on_logits][0] / grads[on_probs][0]
print(f"at margin 0 the gradient on the logits is {ratio_at_zero:.1f}× smaller through the softmax")

# sphinx_gallery_start_ignore
assert min(losses[on_probs]) >= floor - 1e-5
assert abs(losses[on_probs][-1] - floor) < 1e-4
assert losses[on_logits][-1] < 1e-6
assert abs(ratio_at_zero - classes) < 0.1, ratio_at_zero
# sphinx_gallery_end_ignore

# %%
fig, (ax_loss, ax_grad) = plt.subplots(1, 2, figsize=(9, 3.5), layout="constrained")
for (name, values), color in zip(losses.items(), ("C0", "C3"), strict=True):
    ax_loss.plot(margins.tolist(), values, color=color, label=name)
    ax_grad.semilogy(margins.tolist(), grads[name], color=color, label=name)
ax_loss.axhline(floor, color="gray", linestyle=":", label=f"ln(1 + (C − 1)/e) = {floor:.2f}")
ax_loss.set(xlabel="margin of the correct logit", ylabel="loss", title="Loss, C = 10 classes")
ax_grad.set(xlabel="margin of the correct logit", ylabel="‖∂loss/∂logits‖", title="Gradient")
ax_loss.legend(fontsize=8, loc="upper right")
fig.suptitle(
    f"CrossEntropyLoss fed a softmax: a floor of {floor:.2f} and a {ratio_at_zero:.0f}× weaker start"
)
plt.show()

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
exact = F.softplus(x.detach().cpu().double())  # log(1 + exp(x)) in float64, on the CPU

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
assert torch.allclose(logit_bce.cpu().double(), exact)
assert torch.allclose(logit_grad, torch.sigmoid(x))
# sphinx_gallery_end_ignore

# %%
# Near zero the trouble is precision, not range: ``1 + 1e-8`` is 1 in float32, so
# ``log(1 + x)`` and ``exp(x) - 1`` return exactly 0 for small ``x``.
# At ``x = 1e-5`` they are already off by more than one part in a thousand.
# :func:`torch.log1p` and :func:`torch.expm1` compute them without forming ``1 + x``
# and keep float32's full precision.
small = torch.tensor([1e-8, 1e-5], device=device)


def show(values: torch.Tensor) -> str:
    return ", ".join(f"{v:.5e}" for v in values.tolist())


print(f"log(1 + x) = {show(torch.log(1 + small))}   log1p(x) = {show(torch.log1p(small))}")
print(f"exp(x) - 1 = {show(torch.exp(small) - 1)}   expm1(x) = {show(torch.expm1(small))}")

# sphinx_gallery_start_ignore
assert torch.log(1 + small)[0].item() == 0.0 and (torch.exp(small) - 1)[0].item() == 0.0
exact_small = small.cpu().double()
assert torch.allclose(torch.log1p(small).cpu().double(), torch.log1p(exact_small), rtol=1e-6)
assert torch.allclose(torch.expm1(small).cpu().double(), torch.expm1(exact_small), rtol=1e-6)
assert abs(torch.log(1 + small)[1].item() / 1e-5 - 1) > 1e-3
assert abs((torch.exp(small) - 1)[1].item() / 1e-5 - 1) > 1e-3
# sphinx_gallery_end_ignore


# %%
# Check the backward pass too
# ---------------------------
# A forward pass that returns a finite number can still send ``nan`` backwards. A
# common patch for ``log(0)`` masks it with :func:`torch.where`: the forward pass is
# finite (and drops those terms), but the backward pass still goes through ``log``,
# whose derivative ``1/q`` is infinite at ``q = 0``, and the mask's zero times it is
# ``nan``. So we check both passes, on a batch whose logits reach tens of thousands.
def masked_cross_entropy(logits, labels, dim=-1):
    q = stable_softmax(logits, dim)
    log_q = torch.where(q > 0, torch.log(q), 0.0)  # hides log(0) = -inf, forward only
    return -(labels * log_q).sum(dim=dim)


extreme = (30_000 * torch.randn(8, 10, device=device)).requires_grad_(True)  # (batch, classes)
soft = torch.softmax(torch.randn(8, 10, device=device), dim=1)  # (batch, classes)
print(f"largest |logit| in the batch: {extreme.abs().max().item():.0f}")
for name, fn in {
    "log(softmax)": lambda z: naive_cross_entropy(z, soft).mean(),
    "masked log": lambda z: masked_cross_entropy(z, soft).mean(),
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
masked_value = masked_cross_entropy(extreme, soft).mean()
(masked_grad,) = torch.autograd.grad(masked_value, extreme)
assert math.isfinite(masked_value.item()) and not torch.isfinite(masked_grad).all()
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
# - Give ``CrossEntropyLoss`` logits and ``NLLLoss`` log-probabilities; a softmax in
#   front of ``CrossEntropyLoss`` trains slowly and never reaches a loss of 0.
# - Use :func:`torch.log1p` and :func:`torch.expm1` when the argument is near 0.
# - Test the gradients as well as the loss: a clamped or finite forward pass can still
#   hide a zero or ``nan`` gradient.
