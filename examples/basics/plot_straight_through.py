"""
Train through rounding with a straight-through estimator
========================================================

.. effpt-before-you-start::
   :learn: - Pass a gradient through rounding with ``a + (a.round() - a).detach()``.
           - Fake-quantise a network's weights to a grid and train through the rounding.
           - Compare rounding after training with fine-tuning through the rounding, and
             read the verdicts.
   :read-first: :doc:`plot_fitting_a_curve` for the training loop; :doc:`plot_autograd`
                for ``detach()``.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU).

Rounding has a zero derivative almost everywhere, so a network whose weights are
rounded cannot learn by gradient descent, unless the backward pass pretends the
rounding was not there. That trick, the straight-through estimator, takes one line in
PyTorch. This page builds it, checks its gradient, and uses it to train a tiny network
whose weights live on a coarse grid.
"""

# %%
# Rounding blocks the gradient
# ----------------------------
# :func:`torch.round` is flat between its jumps, so autograd reports a zero gradient
# everywhere.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

a = torch.randn(5, device=device, requires_grad=True)
(grad_round,) = torch.autograd.grad(a.round().sum(), a)
print("a:", a.detach(), "\ngradient of round:", grad_round)

# sphinx_gallery_start_ignore
assert torch.equal(grad_round, torch.zeros_like(a))
# sphinx_gallery_end_ignore

# %%
# A round that lets the gradient through
# --------------------------------------
# Write the rounded value as ``a + (round(a) − a)`` and
# :meth:`detach <torch.Tensor.detach>` the correction. The forward value is exactly
# ``round(a)``; autograd sees only ``a + constant``, whose derivative is 1. The same idea
# rounds to any grid: divide by the step, round, multiply back.


def differentiable_round(a: torch.Tensor) -> torch.Tensor:
    return a + (a.round() - a).detach()


def fake_quantize(a: torch.Tensor, step: float) -> torch.Tensor:
    """Round ``a`` to the nearest multiple of ``step``; the gradient passes straight through."""
    return a + (step * torch.round(a / step) - a).detach()


rounded = differentiable_round(a)
(grad_ste,) = torch.autograd.grad(rounded.sum(), a)
print("same values as round:", torch.equal(rounded, a.round()), "| gradient:", grad_ste)
print("fake_quantize(a, 0.25):", fake_quantize(a, 0.25).detach())

# sphinx_gallery_start_ignore
assert torch.equal(rounded, a.round()) and torch.equal(grad_ste, torch.ones_like(a))
assert torch.equal(fake_quantize(a, 0.25) * 4, (fake_quantize(a, 0.25) * 4).round())
# sphinx_gallery_end_ignore

# %%
# A tiny network to quantise
# --------------------------
# One input, ten ``tanh`` units, one output, fit to ``sin(2x)`` on ``[−2, 2]``. With
# ``step`` set, every weight and bias is fake-quantised in the forward pass, so the
# network computes with grid values while the optimizer updates the float "shadow"
# weights underneath. The starting weights and the batches are drawn on the CPU and then
# moved to the device, so every device trains from the same sample.
STEP = 0.25  # the weight grid: multiples of 1/4


def init_params() -> list[torch.Tensor]:
    shapes = [(1, 10), (10,), (10, 1), (1,)]  # w1, b1, w2, b2
    return [torch.randn(s).to(device).requires_grad_() for s in shapes]  # drawn on the CPU


def net(x: torch.Tensor, params: list[torch.Tensor], step: float | None = None) -> torch.Tensor:
    if step is not None:
        params = [fake_quantize(p, step) for p in params]
    w1, b1, w2, b2 = params
    return torch.tanh(x @ w1 + b1) @ w2 + b2  # (batch, 1)


def train(params: list[torch.Tensor], steps: int, lr: float, step: float | None = None) -> None:
    optimizer = torch.optim.Adam(params, lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    for _ in range(steps):
        x = (4 * torch.rand(64, 1) - 2).to(device)  # (batch, 1), drawn on the CPU
        loss = ((net(x, params, step) - torch.sin(2 * x)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()


# %%
# Train in float, then quantise, then fine-tune through the rounding
# ------------------------------------------------------------------
# First a float network. Rounding its weights after training ("post-training
# quantisation") moves each by up to 1/8, and each error that rounding makes passes
# through the network. Fine-tuning a copy with the fake-quantised forward pass lets
# the weights settle on grid points that work together. How far that brings the error
# down depends on the run, its random start and batches and the device's arithmetic
# over 2,500 steps, so the page states it as expectations and prints their verdicts.
# Predict first: does training through the rounding at least halve the error?
x_eval = torch.linspace(-2.0, 2.0, steps=200, device=device)[:, None]  # (points, 1)
truth = torch.sin(2 * x_eval)


def mse(params, step=None) -> float:
    with torch.no_grad():
        return ((net(x_eval, params, step) - truth) ** 2).mean().item()


float_params = init_params()
train(float_params, steps=1500, lr=1e-2)
qat_params = [p.detach().clone().requires_grad_() for p in float_params]
train(qat_params, steps=1000, lr=3e-3, step=STEP)

errors = {
    "float weights": mse(float_params),
    "rounded after training": mse(float_params, STEP),
    "trained through rounding": mse(qat_params, STEP),
}
for name, value in errors.items():
    print(f"{name:>25}: mean squared error {value:.4f}")
shift = max((p - STEP * torch.round(p / STEP)).abs().max().item() for p in float_params)
print(f"largest change made by rounding the float weights: {shift:.3f}")

from effpt.expect import expect

expect(
    "training through rounding at least halves the error of rounding after training",
    errors["rounded after training"] / errors["trained through rounding"],
    above=2.0,
    device=device,
)
_ = expect(
    "training through rounding fits sin(2x) to a mean squared error below 0.05",
    errors["trained through rounding"],
    below=0.05,
    unit="",
    device=device,
)

# sphinx_gallery_start_ignore
assert shift <= STEP / 2
# sphinx_gallery_end_ignore

# %%
# The deployed weights really are on the grid: multiplying by 4 gives whole numbers.
# Weights can land on the same grid point, so the 31 weights and biases may take fewer
# distinct values than there are parameters: the count is printed.
deployed = [(STEP * torch.round(p / STEP)).detach() for p in qat_params]
values = torch.cat([p.flatten() for p in deployed])
print("all multiples of 1/4:", torch.equal(values * 4, (values * 4).round()))
print("parameters:", values.numel(), "| distinct values:", values.unique().numel())

# sphinx_gallery_start_ignore
assert torch.equal(values * 4, (values * 4).round()) and values.numel() == 31
# sphinx_gallery_end_ignore

# %%
# The fits against the truth
# --------------------------
# The left panel shows how far each network's curve lies from ``sin(2x)``: the float
# network, the same network rounded after training, and the one trained through the
# rounding, which computes with grid weights. The right panel shows each network's
# error, ``output − sin(2x)``, where the differences are easier to see.
import matplotlib.pyplot as plt

with torch.no_grad():
    curves = {
        "float weights": net(x_eval, float_params),
        "rounded after training": net(x_eval, float_params, STEP),
        "trained through rounding": net(x_eval, qat_params, STEP),
    }
xs = x_eval.squeeze(1).cpu().numpy()
truth_np = truth.squeeze(1).cpu().numpy()
styles = {"float weights": ":", "rounded after training": "--", "trained through rounding": "-"}
fig, (ax_fit, ax_err) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
ax_fit.plot(xs, truth_np, color="black", linewidth=3, alpha=0.4, label="truth: sin(2x)")
for name, curve in curves.items():
    output = curve.squeeze(1).cpu().numpy()
    label = f"{name} (MSE {errors[name]:.4f})"
    ax_fit.plot(xs, output, styles[name], label=label)
    ax_err.plot(xs, output - truth_np, styles[name])
ax_err.axhline(0.0, color="black", linewidth=3, alpha=0.4)
ax_fit.set(xlabel="x", ylabel="network output", title=f"Fits of sin(2x); weight grid step {STEP}")
ax_err.set(xlabel="x", ylabel="output − sin(2x)", title="Error of each network")
fig.legend(loc="outside lower center", ncols=4, fontsize=9)
plt.show()

# %%
# Summary
# -------
# - ``a + (f(a) − a).detach()`` computes ``f(a)`` forwards and passes the gradient through
#   unchanged backwards: a straight-through estimator in one line.
# - Fake quantisation keeps float weights for the optimizer and uses their rounded
#   values in the forward pass, so training sees the error rounding will cause.
# - Whether fine-tuning through the rounding beats rounding after training, at the same
#   grid, depends on the run: the verdicts above are this build's.
