"""
See why float16 gradients need scaling
======================================

.. effpt-before-you-start::
   :learn: - Read where float16 loses digits, flushes to zero and overflows.
           - Count the gradients of a small network that float16 would flush to zero or
             make subnormal, without a scale and with a scale of 2¹⁶.
           - Watch :class:`torch.amp.GradScaler` skip a step whose gradients overflowed,
             halve its scale and grow it back.
   :read-first: :doc:`plot_autocast_basics` for what autocast does;
                :doc:`/explanations/floating_point` for subnormal numbers.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU); its last section trains in float16
           on every device, the CPU included.

Gradients are often tiny, and float16 has few numbers below 6.1e-5 and none between
zero and 2⁻²⁴ (about 6.0e-8): cast there, small gradients lose their digits or become
exactly zero, and training stalls without an error. This page collects real gradients from a small network, counts
how many float16 would damage with and without a scale factor, and then watches
:class:`torch.amp.GradScaler` skip a step on overflow, halve its scale and grow it back.

For the background on ranges and subnormals, read :doc:`/explanations/floating_point`.
"""

# %%
# What float16 can hold
# ---------------------
# :class:`torch.finfo` gives the limits. Below the smallest *normal* number float16
# still has *subnormals*, down to 2⁻²⁴, but each step down costs a bit of precision;
# anything at or below half of 2⁻²⁴ rounds to zero. At the top, 65504 is the largest
# finite value; anything from 65520 up (halfway to the next step, 65536) rounds to
# infinity, and what lies between rounds down to 65504. bfloat16, for comparison, keeps
# float32's exponent: its smallest normal number is about 1e-38.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

fp16 = torch.finfo(torch.float16)
smallest_subnormal = fp16.smallest_normal * fp16.eps  # 2**-24
print(
    f"float16: max {fp16.max:.0f}, smallest normal {fp16.smallest_normal:.2e}, "
    f"smallest subnormal {smallest_subnormal:.2e}"
)
edges = torch.tensor([2.0**-25, 1.5 * 2.0**-25, 65519.0, 65520.0]).to(torch.float16)
print("2^-25, 1.5 * 2^-25, 65519, 65520 in float16:", edges.tolist())
bf16 = torch.finfo(torch.bfloat16)
print(f"bfloat16: max {bf16.max:.2e}, smallest normal {bf16.smallest_normal:.2e}")

# sphinx_gallery_start_ignore
assert smallest_subnormal == 2.0**-24
assert fp16.max == 65504
assert edges.tolist() == [0.0, 2.0**-24, 65504.0, float("inf")]
assert 1e-38 < bf16.smallest_normal < 2e-38
# sphinx_gallery_end_ignore

# %%
# A small network and its real gradients
# --------------------------------------
# Four tanh layers learn a smooth function of 16 inputs, in float32, for 200 steps.
# On the last step, hooks record the gradient that reaches every linear layer's output
# (the *activation* gradients, which autocast's backward would hold in float16) next
# to the parameters' own gradients.
from torch import nn


def make_mlp(width: int, depth: int) -> nn.Sequential:
    layers, features = [], 16
    for _ in range(depth):
        layers += [nn.Linear(features, width), nn.Tanh()]
        features = width
    return nn.Sequential(*layers, nn.Linear(features, 1))


x = torch.randn(512, 16).to(device)  # (batch, features), drawn on the CPU: same data everywhere
y = x[:, :4].sin().sum(dim=1, keepdim=True)  # (batch, 1)
model = make_mlp(width=64, depth=4).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

# %%
# The loop is plain float32 training; only the last step keeps the gradients. Its
# operations are small, and on a CPU whose cores are busy with other work a pool of
# threads waits at each of them, so on a CPU a probe first times a forward and backward
# pass (no update) at this machine's threads and on one, and the page runs on the
# faster count.
from effpt.bench import faster_thread_count


def probe_step() -> None:
    model.zero_grad(set_to_none=True)
    nn.functional.mse_loss(model(x), y).backward()


torch.set_num_threads(faster_thread_count(probe_step, device))
activation_grads = []
for _ in range(200):
    activation_grads.clear()
    optimizer.zero_grad(set_to_none=True)
    h = x
    for layer in model:
        h = layer(h)
        if isinstance(layer, nn.Linear):
            h.register_hook(lambda g: activation_grads.append(g.detach().reshape(-1)))
    loss = nn.functional.mse_loss(h, y)
    loss.backward()
    optimizer.step()

acts = torch.cat(activation_grads).abs().cpu()  # (n_activations,)
params = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).abs().cpu()
print(f"loss after 200 steps: {loss.item():.4f}")
print(f"median |gradient|: activations {acts.median():.1e}, parameters {params.median():.1e}")

# %%
# How many float16 would damage
# -----------------------------
# :func:`effpt.amp.float16_flush_fraction` counts the values that become exactly zero
# in float16; the second column counts those that land below the smallest normal and
# keep fewer than float16's 11 significant bits. Multiplying by 2¹⁶ = 65536 before the
# cast (what a scaler does) moves the whole distribution up by almost five decades,
# without pushing the largest value anywhere near 65504.
from effpt.amp import float16_flush_fraction

scale = 2.0**16
fractions = {}
print(f"{'':<26}{'flushed to 0':>14}{'subnormal':>12}")
for name, grads in (("activations", acts), ("parameters", params)):
    for label, s in (("unscaled", 1.0), ("× 2**16", scale)):
        flushed = float16_flush_fraction(grads, scale=s)
        subnormal = ((grads * s) < fp16.smallest_normal).double().mean().item()
        fractions[name, s] = (flushed, subnormal)
        print(f"{name + ', ' + label:<26}{flushed:>14.2%}{subnormal:>12.1%}")
print(f"largest scaled gradient: {max(acts.max(), params.max()).item() * scale:.0f}")

# sphinx_gallery_start_ignore
assert fractions["activations", 1.0][0] > 0
assert fractions["activations", scale][0] == 0
assert fractions["activations", 1.0][1] > 0.5
assert fractions["activations", scale][1] < fractions["activations", 1.0][1] / 5
assert max(acts.max(), params.max()).item() * scale < fp16.max / 10
# sphinx_gallery_end_ignore

# %%
# Without scaling, most activation gradients fall into float16's subnormal range and a
# small fraction vanish outright; scaled by 2¹⁶ none vanish and few are subnormal. The
# histogram shows the same thing: the shaded band is where float16 loses digits, the
# black dotted line the point below which it has none left.
import matplotlib.pyplot as plt
import numpy as np

bins = np.linspace(-10, 5, 91)  # log10 of the magnitudes
fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
for grads, label, color in (
    (acts, "activation gradients", "C0"),
    (params, "parameter gradients", "C1"),
):
    logs = grads[grads > 0].log10().numpy()
    ax.hist(logs, bins=bins, histtype="step", color=color, linewidth=1.5, label=label)
    ax.hist(
        logs + np.log10(scale),
        bins=bins,
        histtype="step",
        color=color,
        linestyle="--",
        label=f"{label} × 2¹⁶",
    )
ax.axvspan(
    np.log10(smallest_subnormal),
    np.log10(fp16.smallest_normal),
    color="0.85",
    label="float16 subnormal range",
)
ax.axvline(
    np.log10(smallest_subnormal / 2), color="k", linestyle=":", label="flushes to zero below"
)
ax.axvline(np.log10(fp16.max), color="C3", linestyle=":", label="float16 max (65504)")
ax.set(
    xlabel="log₁₀ |gradient|",
    ylabel="count",
    yscale="log",
    title="Gradient magnitudes of a 4-layer MLP against float16's range",
)
fig.legend(fontsize=8, loc="outside lower center", ncols=4)
plt.show()

# %%
# GradScaler at work
# ------------------
# Now the same kind of network trains under float16 autocast with a
# :class:`torch.amp.GradScaler`. CPUs run float16 autocast too (this network is small
# enough for any speed), so this section runs float16 on every device. ``scaler.step``
# first divides the gradients by the scale, so the optimizer sees their true values.
# The scaler starts at 2¹⁰ and doubles after every 10 clean steps. At step 30 the loss
# is multiplied by 10⁶, a stand-in for a real spike: the scaled gradients overflow
# float16 in the backward pass.
small = make_mlp(width=64, depth=4).to(device)
opt = torch.optim.SGD(small.parameters(), lr=0.05)
scaler = torch.amp.GradScaler(device.type, init_scale=2.0**10, growth_interval=10)
xb, yb = x[:64], y[:64]  # (64, 16), (64, 1)
spike_step, scales, skipped = 30, [], []
for step in range(60):
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=torch.float16):
        loss = nn.functional.mse_loss(small(xb), yb)
    spike = 1e6 if step == spike_step else 1.0
    before = [p.detach().clone() for p in small.parameters()]
    scaler.scale(loss * spike).backward()
    scaler.step(opt)  # unscales, then steps; skipped if a gradient holds an inf or a nan
    scaler.update()
    scales.append(scaler.get_scale())
    if all(torch.equal(b, p) for b, p in zip(before, small.parameters(), strict=True)):
        skipped.append(step)
print(f"skipped steps: {skipped}")
print(
    f"scale before the spike {scales[spike_step - 1]:.0f}, after it {scales[spike_step]:.0f}, "
    f"at the end {scales[-1]:.0f}"
)

# sphinx_gallery_start_ignore
assert spike_step in skipped
assert scales[spike_step] == scales[spike_step - 1] / 2
assert scales[-1] > scales[spike_step]
assert scales[spike_step + 10] == 2 * scales[spike_step]
# sphinx_gallery_end_ignore

# %%
# Step 30 left the weights untouched and halved the scale; ten clean steps later the
# scale doubled again. (Any other skipped step in the list above is a real overflow:
# once the scale is large enough, the scaler finds the ceiling by itself.)
fig, ax = plt.subplots(figsize=(8, 3.5), layout="constrained")
ax.step(range(len(scales)), scales, where="post", label="scale after update()")
ax.scatter(skipped, [scales[s] for s in skipped], color="C3", zorder=3, label="skipped step")
ax.axvline(spike_step, color="0.6", linestyle=":", label="loss × 10⁶ injected")
ax.set(xlabel="step", ylabel="loss scale", title="GradScaler: skip, halve, grow back")
ax.set_yscale("log", base=2)
fig.legend(loc="outside right center")
plt.show()

# %%
# Summary
# -------
# - Real gradients are small: here most activation gradients sit below float16's
#   smallest normal number, and some at or below half its smallest subnormal, where
#   they become 0.
# - Multiplying the loss by 2¹⁶ shifts every gradient up by the same factor, out of
#   the danger zone, and the optimizer sees the unscaled values.
# - :class:`torch.amp.GradScaler` picks the factor itself: it skips a step whose
#   gradients overflowed, halves the scale, and doubles it again after
#   ``growth_interval`` clean steps.
# - bfloat16 has float32's range (smallest normal about 1e-38), so it needs no scaler;
#   float16 does.
