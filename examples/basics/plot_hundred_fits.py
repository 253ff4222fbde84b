"""
Train a hundred small models at once with ``torch.func.vmap``
=============================================================

Training the same small network many times from different random starts shows how
much of a fit is the data and how much is luck. A Python loop over the models spends
its time launching thousands of tiny operations; :func:`torch.func.vmap` runs all the
models in one batched call instead. This page trains a hundred networks both ways,
checks that they give the same fits, draws the spread, and times one step of each.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_hundred_fits.py``.
"""

# %%
# A hundred networks and their data
# ---------------------------------
# Each network maps ``x`` to ``sin(2x)`` through ten ``tanh`` units and is created with
# its own random initial weights. Each gets its own 100 minibatches of 10 points drawn
# from a standard normal, fixed in advance so that both training methods below see
# exactly the same data.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

n_models, n_steps, batch, lr = 100, 100, 10, 1e-2


def make_net() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(1, 10), torch.nn.Tanh(), torch.nn.Linear(10, 1))


nets = [make_net().to(device) for _ in range(n_models)]
xs = torch.randn(n_steps, n_models, batch, 1, device=device)  # (steps, models, batch, 1)
ys = torch.sin(2 * xs)  # (steps, models, batch, 1)

# %%
# Batched copies of the weights
# -----------------------------
# :func:`torch.func.stack_module_state` stacks each parameter of the hundred networks
# along a new first dimension: ``0.weight`` becomes ``(100, 10, 1)``. It copies, so the
# loop below can train ``nets`` in place without touching these. A "skeleton" copy of
# the network on the ``meta`` device (shapes only, no memory) tells
# :func:`torch.func.functional_call` which computation to run with the weights we pass.
import copy

from torch.func import functional_call, grad, stack_module_state, vmap

params, buffers = stack_module_state(nets)
skeleton = copy.deepcopy(nets[0]).to("meta")
print({name: tuple(p.shape) for name, p in params.items()})

# sphinx_gallery_start_ignore
assert params["0.weight"].shape == (n_models, 10, 1)
# sphinx_gallery_end_ignore

# %%
# The loop: one model at a time
# -----------------------------
# The plain way: each network has its own optimizer, and one training step visits all
# hundred of them in Python. The loss is the summed squared error of the minibatch.
optimizers = [torch.optim.SGD(net.parameters(), lr=lr) for net in nets]


def loop_step(step: int) -> None:
    for i, (net, optimizer) in enumerate(zip(nets, optimizers, strict=True)):
        loss = ((net(xs[step, i]) - ys[step, i]) ** 2).sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


for step in range(n_steps):
    loop_step(step)

# %%
# The batched way: ``vmap`` over the models
# -----------------------------------------
# ``loss_fn`` is written for *one* model: its weights, its minibatch. :func:`torch.func.grad`
# turns it into a function returning the gradient with respect to the weights, and
# :func:`torch.func.vmap` maps that over the first dimension of every argument, so one
# call computes all hundred gradients. A single SGD optimizer then updates the stacked
# tensors: its update is elementwise, so it treats each model's slice exactly as that
# model's own optimizer would. (That holds for SGD and Adam, not for anything that
# looks across elements, such as clipping by the norm of all gradients.)


def loss_fn(model_params, model_buffers, x, y):
    prediction = functional_call(skeleton, (model_params, model_buffers), (x,))  # (batch, 1)
    return ((prediction - y) ** 2).sum()


all_gradients = vmap(grad(loss_fn))
stacked_optimizer = torch.optim.SGD(params.values(), lr=lr)


def vmap_step(step: int) -> None:
    grads = all_gradients(params, buffers, xs[step], ys[step])
    for name, p in params.items():
        p.grad = grads[name]
    stacked_optimizer.step()


for step in range(n_steps):
    vmap_step(step)

# %%
# The same hundred fits
# ---------------------
# Evaluate every network on a grid. Both methods started from the same weights and saw
# the same minibatches, so not just the distribution of fits agrees but each fit, up to
# float32 rounding: the mean curve and the 95 % band (2.5th to 97.5th percentile across
# the models) coincide.
grid = torch.linspace(-2.0, 2.0, steps=100, device=device)[:, None]  # (points, 1)
with torch.no_grad():
    loop_fits = torch.stack([net(grid).squeeze(1) for net in nets])  # (models, points)
    vmap_fits = vmap(functional_call, in_dims=(None, 0, None))(
        skeleton, (params, buffers), (grid,)
    ).squeeze(2)  # (models, points, 1) → (models, points)


def summary(fits):
    band = torch.quantile(fits, torch.tensor([0.025, 0.975], device=device), dim=0)
    return fits.mean(0), band  # (points,), (2, points)


(loop_mean, loop_band), (vmap_mean, vmap_band) = summary(loop_fits), summary(vmap_fits)
print(
    f"largest difference between the two sets of fits: {(loop_fits - vmap_fits).abs().max().item():.1e}"
)
print(
    f"largest difference of the mean: {(loop_mean - vmap_mean).abs().max().item():.1e}, "
    f"of the band: {(loop_band - vmap_band).abs().max().item():.1e}"
)

# sphinx_gallery_start_ignore
assert loop_fits.shape == vmap_fits.shape == (n_models, 100)
assert torch.allclose(loop_fits, vmap_fits, atol=1e-4)
assert torch.allclose(loop_mean, vmap_mean, atol=1e-5) and torch.allclose(
    loop_band, vmap_band, atol=1e-4
)
# sphinx_gallery_end_ignore

# %%
# What a hundred fits say
# -----------------------
# After 100 small steps the networks agree where the data are dense (near 0) and
# spread out towards ``±2``, where a standard normal rarely samples. The spread is the
# uncertainty that comes from the random start alone; more training would shrink it.
import matplotlib.pyplot as plt

width = (vmap_band[1] - vmap_band[0]).cpu()  # (points,)
print(f"band width at x = 0: {width[50]:.2f}, at x = -2: {width[0]:.2f}, at x = 2: {width[-1]:.2f}")

g = grid.squeeze(1).cpu().numpy()
truth = torch.sin(2 * grid).squeeze(1).cpu().numpy()
fig, (ax_all, ax_band) = plt.subplots(1, 2, figsize=(10, 4), sharey=True, layout="constrained")
ax_all.plot(g, vmap_fits.cpu().numpy().T, color="C0", alpha=0.15, linewidth=1)
ax_all.plot(g, truth, color="black", linewidth=2.5, label="truth: sin(2x)")
ax_all.set(xlabel="x", ylabel="network output", title=f"{n_models} fits (vmap)")
ax_all.legend(loc="upper left")

ax_band.fill_between(g, *vmap_band.cpu().numpy(), color="C0", alpha=0.3, label="95 % band, vmap")
ax_band.plot(g, vmap_mean.cpu().numpy(), color="C0", label="mean, vmap")
ax_band.plot(
    g, loop_band.cpu().numpy().T, color="C1", linestyle=":", label=["95 % band, loop", None]
)
ax_band.plot(g, loop_mean.cpu().numpy(), color="C1", linestyle="--", label="mean, loop")
ax_band.plot(g, truth, color="black", linewidth=2.5, label="truth")
ax_band.set(xlabel="x", title="Mean and 95 % band: loop and vmap")
ax_band.legend(loc="upper left", fontsize=8)
plt.show()

# sphinx_gallery_start_ignore
assert width[50] < width[0] and width[50] < width[-1], width
# sphinx_gallery_end_ignore

# %%
# Timing one training step
# ------------------------
# :func:`effpt.bench.compare` times one SGD step of all hundred networks each way, after
# a warm-up. (The networks are already trained; a few extra steps do not matter here.)
# Both use the same SGD optimizer; the loop runs its dozen-odd small operations and an
# optimizer step once per network, ``vmap`` runs each operation once, batched.
from effpt.bench import compare

records = compare(
    f"one SGD step of {n_models} networks",
    {"Python loop": lambda: loop_step(0), "vmap(grad(...))": lambda: vmap_step(0)},
    device=device,
    repeats=5,
)
speedup = records[0].median_s / records[1].median_s
print(f"on {describe(device)}: one loop step took {speedup:.1f}× as long as one vmap step")

# sphinx_gallery_start_ignore
assert len(records) == 2 and all(r.median_s > 0 for r in records)
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - ``stack_module_state`` + ``functional_call`` + ``vmap`` turn many copies of one small
#   model into a single batched model, without rewriting the model.
# - ``vmap(grad(loss_fn))`` gives every model its own gradient in one call; write
#   ``loss_fn`` for a single model and let ``vmap`` add the model dimension.
# - With the same starting weights and data, the batched run reproduces each loop fit to
#   float32 rounding; the timing table shows what batching saved on the machine that
#   built this page.
