"""
Train in bfloat16 without losing updates
========================================

.. effpt-before-you-start::
   :learn: - Compute the spacing of bfloat16 numbers near a weight with ``torch.finfo``
             and ``torch.nextafter``, and predict which updates vanish.
           - See a regression trained in pure bfloat16 stop learning while its
             gradients are still not zero.
           - Recover the lost updates with float32 master weights, through autocast or a
             float32 copy that the optimizer updates.
           - Count the bytes per parameter each choice holds.
   :read-first: :doc:`/auto_examples/numerics/plot_floating_point_formats` for what
                bfloat16's 8 bits of precision mean; :doc:`/auto_examples/amp/plot_autocast_basics`
                for autocast.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU); its sizes are tiny on purpose,
           because some CPUs multiply bfloat16 matrices slowly, and it times nothing.

Storing a model's weights in bfloat16 halves their memory, and every step then rounds
the updated weight to one of bfloat16's few numbers. An update smaller than half the
gap to the next number disappears, without an error or a warning, and training stalls
while the gradients still point somewhere. This page measures the gap, shows the
stall, recovers the updates with float32 master weights, and counts what each choice
costs in memory.
"""

# %%
# How far apart bfloat16 numbers are
# ----------------------------------
# bfloat16 keeps float32's exponent and 8 bits of significand, so between 1 and 2 its
# numbers are :attr:`torch.finfo.eps` = 2⁻⁷ apart. :func:`torch.nextafter` gives the next
# number up from any value. An update is rounded away when it is less than half that
# gap: the cell adds two updates to a weight of 1.0.
import torch

from effpt.device import describe, pick_device

device = pick_device()
print(describe(device))
torch.manual_seed(0)

w = torch.tensor(1.0, dtype=torch.bfloat16, device=device)
one = torch.tensor(1.0, dtype=torch.bfloat16)  # the gap is the format's: asked on the CPU
gap = (torch.nextafter(one, torch.tensor(2.0, dtype=torch.bfloat16)) - one).item()
print(
    f"bfloat16: eps {torch.finfo(torch.bfloat16).eps}, gap above 1.0 is {gap}, half of it {gap / 2:.2g}"
)
print(f"float32:  gap above 1.0 is {torch.finfo(torch.float32).eps:.3g}")
for update in (0.003, 0.005):
    print(f"1.0 + {update} in bfloat16 = {(w + update).item()}")

# sphinx_gallery_start_ignore
assert gap == torch.finfo(torch.bfloat16).eps == 2**-7
assert (w + 0.003).item() == 1.0 and (w + 0.005).item() == 1.0 + gap
# sphinx_gallery_end_ignore

# %%
# A step of ``lr × grad`` = 0.003 on a weight near 1 is lost: 0.003 is below half the gap
# (0.0039). The gap doubles with every power of two, so large weights lose larger updates,
# and a learning rate that decays makes every update smaller as training goes on.

# %%
# A regression that stops learning
# --------------------------------
# A linear regression whose true weights lie near 1, trained by plain gradient descent
# from all ones, in four ways: all in float32 (the reference); all in bfloat16; float32
# weights with the forward in bfloat16 under :class:`torch.autocast`; and bfloat16
# weights for the forward and backward with a float32 copy that the optimizer updates
# and copies back. An update is lost when a weight with a nonzero gradient comes out of
# the optimizer's step unchanged; the cell counts them in the tensor the optimizer steps.
#
# Before you run it: will the pure bfloat16 loss level off, and how far above float32?
n, d, steps, lr = 256, 32, 200, 0.05  # tiny on purpose: bfloat16 matmuls are slow on some CPUs
X = torch.randn(n, d, device=device)  # (samples, features)
w_true = 1 + 0.05 * torch.randn(d, device=device)
y = X @ w_true  # (samples,)


def mse(pred: torch.Tensor) -> torch.Tensor:
    return (pred.float() - y).square().mean()


def train(mode: str) -> tuple[list[float], list[float], dict[str, torch.Tensor]]:
    dtype = torch.bfloat16 if mode in ("bfloat16", "master copy") else torch.float32
    w = torch.ones(d, dtype=dtype, device=device, requires_grad=True)
    master = w.detach().float().requires_grad_() if mode == "master copy" else None
    opt = torch.optim.SGD([master if master is not None else w], lr=lr)
    losses, lost = [], []
    for _ in range(steps):
        if mode == "autocast":
            with torch.autocast(device.type, dtype=torch.bfloat16):
                loss = mse(X @ w)  # the product runs in bfloat16, w stays float32
        else:
            loss = mse(X.to(dtype) @ w)
        w.grad = None
        loss.backward()
        updated = master if master is not None else w  # the tensor the optimizer steps
        before = updated.detach().clone()
        if master is not None:
            master.grad = w.grad.float()  # the optimizer updates the float32 copy
            opt.step()
            with torch.no_grad():
                w.copy_(master)  # rounded to bfloat16 for the next forward
        else:
            opt.step()
        moved = updated.detach() != before
        lost.append(((updated.grad != 0) & ~moved).float().mean().item())
        losses.append(loss.item())
    held = {"weights": w, "gradients": w.grad}
    if master is not None:
        held |= {"float32 copy": master, "its gradient": master.grad}
    return losses, lost, held


runs = {mode: train(mode) for mode in ("float32", "bfloat16", "autocast", "master copy")}
for mode, (losses, lost, _) in runs.items():
    print(
        f"{mode:>11}: loss {losses[0]:.2e} -> {losses[-1]:.2e}, "
        f"updates lost: {sum(lost) / steps:.1%} of all, {lost[-1]:.0%} at the last step"
    )

# sphinx_gallery_start_ignore
bf16_losses, bf16_lost, _ = runs["bfloat16"]
assert len(set(bf16_losses[-20:])) == 1  # the pure bfloat16 loss no longer moves
assert bf16_lost[-1] == 1.0 and sum(bf16_lost) > 0.5 * steps
assert max(sum(runs["autocast"][1]), sum(runs["master copy"][1])) < 0.01 * steps
assert bf16_losses[-1] > 10 * runs["autocast"][0][-1]
assert bf16_losses[-1] > 10 * runs["master copy"][0][-1]
# sphinx_gallery_end_ignore

# %%
# The bfloat16 loss stops where every update is lost, with gradients that are not
# zero. Both float32-master runs lose almost none of their updates; they level off lower,
# where the forward's rounding to bfloat16 (of ``X``, ``w`` and their product), not the
# update, is the limit. The all-float32 run goes on down until it meets its own gap, 2⁻²³ of the
# weight, and then loses updates too.

# %%
# The figure
# ----------
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
styles = {"float32": "-", "bfloat16": "-", "autocast": "-", "master copy": "--"}  # two may overlap
for mode, (losses, _, _) in runs.items():
    ax.plot(range(1, steps + 1), losses, styles[mode], label=mode)
ax.set(xlabel="step", ylabel="mean squared error", yscale="log", title="Where bfloat16 stalls")
ax.legend()
plt.show()

# %%
# What each choice holds in memory
# --------------------------------
# The bytes below are the tensors each run keeps between steps, per parameter. Pure
# bfloat16 holds 2-byte weights and gradients; autocast holds 4-byte ones (and makes a
# bfloat16 copy of each weight during the forward); the master copy holds both sizes.
for mode, (_, _, held) in runs.items():
    parts = ", ".join(f"{k} {t.element_size()}" for k, t in held.items())
    total = sum(t.element_size() for t in held.values())
    print(f"{mode:>11}: {total:>2} bytes per parameter ({parts})")

# sphinx_gallery_start_ignore
per_param = {m: sum(t.element_size() for t in r[2].values()) for m, r in runs.items()}
assert per_param == {"float32": 8, "bfloat16": 4, "autocast": 8, "master copy": 12}
# sphinx_gallery_end_ignore

# %%
# An optimizer with state adds to each: Adam's two moments cost 8 bytes per parameter
# in float32 (see :doc:`plot_optimizer_state`). The master copy can drop its float32
# gradient once the step is done, and keeping the moments in float32 is what the
# updates need, so the usual recipe is bfloat16 weights for compute and float32 for
# everything the optimizer touches.

# %%
# Summary
# -------
# - bfloat16's gap between neighbours is ``eps`` (2⁻⁷) times the power of two below the
#   value; an update under half that gap is rounded away with no error.
# - Pure bfloat16 weights stall while gradients are nonzero; float32 master weights,
#   through autocast or a float32 copy the optimizer updates, keep the small updates.
# - The master copy holds 12 bytes per parameter here against 4 for pure bfloat16 and
#   8 for float32 with autocast; count the optimizer's state on top.
# - Related: :doc:`/auto_examples/numerics/plot_floating_point_formats` for the formats,
#   :doc:`/auto_examples/amp/plot_autocast_basics` for autocast, and
#   :doc:`plot_optimizer_state` for the optimizer's memory.
