"""
Fit a curve with autograd
=========================

.. effpt-before-you-start::
   :learn: - Fit a quadratic to noisy samples by gradient descent, with autograd computing
             the gradient.
           - Write the loop every training step repeats: ``zero_grad()``, the loss,
             ``backward()``, ``step()``.
           - See why the loss stops falling at the variance of the noise.
   :read-first: Nothing: this page starts the family.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU).

Gradient descent needs only two ingredients: a loss you can compute and its gradient
with respect to the parameters. PyTorch's autograd supplies the second for free. This
page recovers the coefficients of a quadratic from noisy samples, in about twenty lines.
"""

# %%
# Noisy samples of an unknown function
# ------------------------------------
# Pretend we do not know ``f(x) = 5x² + 3`` and only see noisy samples of it. We will
# model it as ``g(x, w) = w0·x² + w1·x + w2`` and look for the ``w`` that makes ``g``
# match the samples. :func:`effpt.device.pick_device` picks a GPU when there is one (set
# ``EFFPT_DEVICE=cpu`` to choose yourself), and the first line printed says what ran.
# The noise is drawn on the CPU and then moved, so every device fits the same samples.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

x = torch.linspace(-1.0, 1.0, steps=200, device=device)  # (200,)
y = 5 * x**2 + 3 + 0.1 * torch.randn(x.shape).to(device)  # (200,), noise drawn on the CPU
print(f"{x.numel()} samples, x from {x.min().item():.0f} to {x.max().item():.0f}")

# %%
# The model and the loss
# ----------------------
# The parameters are a tensor with ``requires_grad=True``: autograd records every
# operation on it so that :meth:`loss.backward() <torch.Tensor.backward>` can fill
# ``w.grad``. Create it on the device directly: moving it there afterwards would give a
# copy that is not a leaf and never gets a ``.grad`` (:doc:`the autograd page
# <plot_autograd>` shows this trap).
w = torch.zeros(3, device=device, requires_grad=True)


def g(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    features = torch.stack([x**2, x, torch.ones_like(x)], dim=1)  # (samples, 3)
    return features @ w  # (samples,)


def mse(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((prediction - target) ** 2).mean()


# %%
# Training with Adam
# ------------------
# Each step computes the loss, back-propagates, and lets the optimizer,
# :class:`torch.optim.Adam` here, update ``w``. ``backward()`` *adds* into ``w.grad``, so
# each step first clears the last step's gradient with
# :meth:`optimizer.zero_grad() <torch.optim.Optimizer.zero_grad>`. It sets ``w.grad`` to
# ``None`` rather than filling it with zeros (``set_to_none=True`` is the default): the
# next ``backward()`` then stores its gradient instead of adding it to zeros, which saves
# a pass over the memory.
optimizer = torch.optim.Adam([w], lr=0.1)
losses = []
for _ in range(500):
    optimizer.zero_grad()
    loss = mse(g(x, w), y)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())

print(f"loss: {losses[0]:.2f} at the start, {losses[-1]:.4f} after {len(losses)} steps")
print("learnt w =", [round(v, 2) for v in w.tolist()], " (true: [5, 0, 3])")
optimizer.zero_grad()
print("w.grad after zero_grad():", w.grad)

# sphinx_gallery_start_ignore
assert torch.allclose(w.detach().cpu(), torch.tensor([5.0, 0.0, 3.0]), atol=0.1), w
assert losses[0] / losses[-1] > 1000, losses
assert losses[-1] < 0.015, losses[-1]
assert w.grad is None
# sphinx_gallery_end_ignore

# %%
# The loss falls by more than three orders of magnitude, and it stops at the noise:
# samples with a standard deviation of 0.1 leave a mean squared error of about 0.01 that
# no choice of ``w`` can remove. On a GPU, reading :meth:`loss.item() <torch.Tensor.item>`
# every step makes Python wait for the device each time, which is fine for a toy but
# costly in a real training loop.
import matplotlib.pyplot as plt

fig, (ax_loss, ax_fit) = plt.subplots(1, 2, figsize=(9, 3.5), layout="constrained")
ax_loss.semilogy(losses)
ax_loss.axhline(0.01, color="gray", linestyle=":", label="noise variance")
ax_loss.set(xlabel="step", ylabel="mean squared error", title="Loss")
ax_loss.legend()

x_cpu, y_cpu = x.cpu(), y.cpu()
with torch.no_grad():
    fit = g(x, w).cpu()
ax_fit.scatter(x_cpu, y_cpu, s=6, alpha=0.5, label="noisy samples")
ax_fit.plot(x_cpu, 5 * x_cpu**2 + 3, color="black", linestyle="--", label="f(x) = 5x² + 3")
ax_fit.plot(x_cpu, fit, color="C3", label="g(x, w), learnt")
ax_fit.set(xlabel="x", ylabel="y", title="Fit")
ax_fit.legend()
plt.show()

# %%
# Summary
# -------
# - A tensor with ``requires_grad=True`` is all autograd needs: ``backward()`` fills
#   ``.grad`` for every leaf that took part in the loss.
# - The optimizer owns the update rule; the loop is always zero the gradients,
#   compute the loss, ``backward()``, ``step()``.
# - Create parameters on their device, rather than moving them there afterwards.
