"""
Train a hundred small models at once with ``torch.func.vmap``
=============================================================

.. effpt-before-you-start::
   :learn: - Train a hundred copies of a small network at once with
             ``stack_module_state``, ``functional_call`` and ``vmap(grad(...))``.
           - Check that the batched training reproduces each fit of a Python loop.
           - Time one batched step against one loop step, and read the verdict.
           - Tell what the spread between runs measures, and what it misses.
   :read-first: :doc:`plot_modules` for modules and their parameters;
                :doc:`/explanations/timing` for how the steps are timed.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU), and then times that device.

Training the same small network many times, each from its own random start on its own
data, shows how much a result varies from run to run. A Python loop over the models
spends its time launching thousands of tiny operations; :func:`torch.func.vmap` runs all
the models in one batched call instead. This page trains a hundred networks both ways,
checks that they give the same fits, times one step of each, and trains the batched
models longer, which shows what the spread between the fits does and does not measure.
"""

# %%
# A hundred networks and their data
# ---------------------------------
# Each network maps ``x`` to ``sin(2x)`` through ten ``tanh`` units and is created with
# its own random initial weights. Each gets its own 100 minibatches of 10 points drawn
# from a standard normal, fixed in advance so that both training methods below see
# exactly the same data. Weights and data are drawn on the CPU and then moved, so every
# device trains from the same sample.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

n_models, n_steps, batch, lr = 100, 100, 10, 1e-2


def make_net(hidden: int = 10) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(1, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1)
    )


nets = [make_net().to(device) for _ in range(n_models)]
xs = torch.randn(n_steps, n_models, batch, 1).to(device)  # (steps, models, batch, 1)
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
        optimizer.zero_grad()
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
# What a hundred fits say, and what they don't
# --------------------------------------------
# The band is the spread *between the runs*, which differ in their random start and in
# their own minibatches. It is narrow where the data are dense (near 0) and wide towards
# ``±2``, where a standard normal rarely samples. It is not an error bar: after 100
# small steps the networks are still too flat, the mean curve falls well short of the
# peaks of ``sin(2x)``, and the truth lies outside the band over much of the grid. A
# bias that all runs share does not show up as spread.
import matplotlib.pyplot as plt


def describe_fits(band, mean):
    inside = ((truth_grid >= band[0]) & (truth_grid <= band[1])).float().mean().item()
    peak = mean[(grid.squeeze(1) - torch.pi / 4).abs().argmin()].item()  # sin(2x) = 1 there
    width = band[1] - band[0]  # (points,)
    return {
        "inside": inside,
        "peak": peak,
        "width_0": width[50].item(),
        "width_-2": width[0].item(),
        "width_2": width[-1].item(),
    }


truth_grid = torch.sin(2 * grid).squeeze(1)  # (points,)
after_100 = describe_fits(vmap_band, vmap_mean)
print(
    f"after {n_steps} steps: band width {after_100['width_0']:.2f} at x = 0, "
    f"{after_100['width_-2']:.2f} at x = -2, {after_100['width_2']:.2f} at x = 2; "
    f"mean at the peak {after_100['peak']:.2f} "
    f"(truth 1); truth inside the band at {after_100['inside']:.0%} of the grid"
)

g = grid.squeeze(1).cpu().numpy()
truth = truth_grid.cpu().numpy()
fig, (ax_all, ax_band) = plt.subplots(1, 2, figsize=(10, 4), sharey=True, layout="constrained")
ax_all.plot(g, vmap_fits.cpu().numpy().T, color="C0", alpha=0.15, linewidth=1)
ax_all.plot(g, truth, color="black", linewidth=2.5)
ax_all.set(xlabel="x", ylabel="network output", title=f"{n_models} fits (vmap)")

ax_band.fill_between(g, *vmap_band.cpu().numpy(), color="C0", alpha=0.3, label="95 % band, vmap")
ax_band.plot(g, vmap_mean.cpu().numpy(), color="C0", label="mean, vmap")
ax_band.plot(
    g, loop_band.cpu().numpy().T, color="C1", linestyle=":", label=["95 % band, loop", None]
)
ax_band.plot(g, loop_mean.cpu().numpy(), color="C1", linestyle="--", label="mean, loop")
ax_band.plot(g, truth, color="black", linewidth=2.5, label="truth: sin(2x)")
ax_band.set(xlabel="x", title="Mean and 95 % band: loop and vmap")
fig.legend(loc="outside lower center", ncols=5, fontsize=9)
plt.show()

# sphinx_gallery_start_ignore
assert after_100["width_0"] < min(after_100["width_-2"], after_100["width_2"]), after_100
assert after_100["peak"] < 0.8 and after_100["inside"] < 0.6, after_100
# sphinx_gallery_end_ignore

# %%
# Timing one training step
# ------------------------
# :func:`effpt.bench.compare` times one SGD step of all hundred networks each way
# (:doc:`/explanations/timing` says how it measures). Both use the same SGD update;
# the loop runs its dozen-odd small operations and an optimizer step once per network,
# ``vmap`` runs each operation once, batched. The timed steps train the networks
# further, so a copy of the stacked weights taken before is put back after (the loop's
# networks are not used again). Whether one batched call beats a hundred small ones
# depends on the machine (how much each small operation costs to launch, how well one
# large one uses the cores or the GPU). Predict first: on your machine, does the one
# batched step win?
from effpt.bench import compare, speedup, synchronize
from effpt.expect import expect

before_timing = {name: p.detach().clone() for name, p in params.items()}
records = compare(
    f"one SGD step of {n_models} networks",
    {"Python loop": lambda: loop_step(0), "vmap(grad(...))": lambda: vmap_step(0)},
    device=device,
    budget_s=0.2,
)
with torch.no_grad():
    for name, p in params.items():
        p.copy_(before_timing[name])
ratio = speedup(records[0], records[1])
_ = expect(
    f"one vmap step of {n_models} networks runs faster than one loop step",
    ratio,
    above=1.0,
    device=device,
)

# sphinx_gallery_start_ignore
assert len(records) == 2 and all(r.median_s > 0 for r in records)
# sphinx_gallery_end_ignore

# %%
# Ten times the training, batched
# -------------------------------
# If the runs share a bias from too little training, more training should shrink it.
# With ``vmap``, 900 more steps on fresh minibatches take the time printed below; the
# loop would need about 900 times its median step time, printed beside it. The mean
# moves towards the truth and the band tightens where the data are dense; towards
# ``±2`` the runs still extrapolate differently. How much of the grid the band covers
# is a property of these runs, never a promise: the spread between runs only measures
# how much they disagree.
#
# Each step is many small operations, and where other work holds the cores each one
# on several threads can wait for them. So on a CPU the first ten steps run at this
# machine's threads, the next ten on one, and the rest on whichever count was faster.
# The loop's estimate keeps the thread count its step was timed at, printed with it.
import time

extra_steps = 900
more_xs = torch.randn(extra_steps, n_models, batch, 1).to(device)  # (steps, models, batch, 1)
more_ys = torch.sin(2 * more_xs)  # (steps, models, batch, 1)


def more_steps(first: int, last: int) -> float:
    """Run steps ``first`` to ``last - 1``; return the seconds they took."""
    began = time.perf_counter()
    for step in range(first, last):
        grads = all_gradients(params, buffers, more_xs[step], more_ys[step])
        for name, p in params.items():
            p.grad = grads[name]
        stacked_optimizer.step()
    synchronize(device)  # wait for the device before stopping the clock
    return time.perf_counter() - began


threads = torch.get_num_threads()
if device.type == "cpu" and threads > 1:
    on_all = more_steps(0, 10)
    torch.set_num_threads(1)
    on_one = more_steps(10, 20)
    if on_all < on_one:
        torch.set_num_threads(threads)
    print(
        f"ten steps took {on_all:.2f} s on {threads} threads, {on_one:.2f} s on one; "
        f"the other {extra_steps - 20} run on {torch.get_num_threads()}"
    )
    seconds = on_all + on_one + more_steps(20, extra_steps)
    torch.set_num_threads(threads)
else:
    seconds = more_steps(0, extra_steps)
loop_threads = f" (its median step at {threads} threads)" if device.type == "cpu" else ""
print(
    f"{extra_steps} more vmap steps took {seconds:.1f} s; "
    f"the loop would need about {extra_steps * records[0].median_s:.0f} s{loop_threads}"
)

with torch.no_grad():
    long_fits = vmap(functional_call, in_dims=(None, 0, None))(
        skeleton, (params, buffers), (grid,)
    ).squeeze(2)  # (models, points, 1) → (models, points)
long_mean, long_band = summary(long_fits)
after_1000 = describe_fits(long_band, long_mean)
print(
    f"after {n_steps + extra_steps} steps: band width {after_1000['width_0']:.2f} at x = 0, "
    f"{after_1000['width_-2']:.2f} at x = -2, {after_1000['width_2']:.2f} at x = 2; "
    f"mean at the peak {after_1000['peak']:.2f} "
    f"(truth 1); truth inside the band at {after_1000['inside']:.0%} of the grid"
)

# sphinx_gallery_start_ignore
assert after_1000["peak"] > after_100["peak"] + 0.1, (after_100, after_1000)
assert after_1000["width_0"] < after_100["width_0"], (after_100, after_1000)
assert after_1000["inside"] > after_100["inside"], (after_100, after_1000)
assert after_1000["width_0"] < min(after_1000["width_-2"], after_1000["width_2"]), after_1000
# sphinx_gallery_end_ignore

# %%
# The two bands side by side: training shrinks the bias, something the spread between
# the runs after 100 steps gave no sign of.
fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
for fits_band, fits_mean, steps, colour in [
    (vmap_band, vmap_mean, n_steps, "C0"),
    (long_band, long_mean, n_steps + extra_steps, "C2"),
]:
    ax.fill_between(g, *fits_band.cpu().numpy(), color=colour, alpha=0.25)
    ax.plot(g, fits_mean.cpu().numpy(), color=colour, label=f"mean and 95 % band, {steps} steps")
ax.plot(g, truth, color="black", linewidth=2.5, label="truth: sin(2x)")
ax.set(xlabel="x", ylabel="network output", title="More training shrinks the bias all runs share")
fig.legend(loc="outside right center", fontsize=9)
plt.show()

# %%
# Summary
# -------
# - ``stack_module_state`` + ``functional_call`` + ``vmap`` turn many copies of one small
#   model into a single batched model, without rewriting the model.
# - ``vmap(grad(loss_fn))`` gives every model its own gradient in one call; write
#   ``loss_fn`` for a single model and let ``vmap`` add the model dimension.
# - With the same starting weights and data, the batched run reproduces each loop fit to
#   float32 rounding. Whether it is also faster, and by how much, is measured, not
#   assumed: the timing above prints the verdict for the machine that built this page.
# - The spread between runs measures how much they disagree, not how wrong they are: a
#   bias all runs share, such as too little training, stays outside it.
