"""
Use GradScaler with accumulation, gradient penalties and custom functions
=========================================================================

.. effpt-before-you-start::
   :learn: - Accumulate scaled gradients over micro-batches, and unscale, step and update
             only once the effective batch is complete.
           - Compute a gradient penalty from the scaled loss, and unscale its gradients by
             hand.
           - Make a custom :class:`torch.autograd.Function` work under autocast with
             ``custom_fwd`` and ``custom_bwd``, and run one in float32 with
             ``cast_inputs``.
   :read-first: :doc:`plot_gradscaler_loop` for the loop and ``unscale_``;
                :doc:`/auto_examples/basics/plot_custom_autograd_function` for writing a
                :class:`torch.autograd.Function`.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU), and uses float16 autocast on every
           device, the CPU included.

Some training code touches gradients in ways the basic float16 loop does not: it
accumulates them over several batches, differentiates them again for a penalty, or
computes them in a hand-written autograd function. Each of these meets the scaled
gradients of :class:`torch.amp.GradScaler` in its own way, and goes wrong, sometimes
silently, if it ignores them. This page runs the recipes of PyTorch's "Automatic
Mixed Precision examples" page on a small model and checks each against a reference
computed without scaling. The loop itself, clipping, several optimizers and
checkpoints are on :doc:`plot_gradscaler_loop`.
"""

# %%
# Setup: float16 on every device
# ------------------------------
# Gradient scaling exists for float16, so this page uses float16 autocast everywhere,
# as :doc:`plot_gradscaler_loop` does: CPUs support it too, which lets every recipe
# below run and be checked on any machine.
import torch
from torch import nn

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
amp_dtype = torch.float16
print(describe(device))
print(f"autocast dtype {amp_dtype}, GradScaler('{device.type}')")


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)


inputs = torch.randn(32, 16).to(device)  # (batch, features), drawn on the CPU: same data everywhere
targets = inputs[:, :4].sum(dim=1, keepdim=True).to(device)  # (batch, 1)
loss_fn = nn.MSELoss()

# %%
# Accumulate gradients over several batches
# -----------------------------------------
# Four micro-batches of 8 make an effective batch of 32. The gradients stay scaled, and
# the scale constant, until the effective batch is complete; only then may they be
# unscaled (here, to compare them), and only then do ``step`` and ``update`` run. The
# check: at the boundary the accumulated gradient equals, up to float16 rounding, the
# gradient of one batch of 32 computed by an identical model. (This scaler starts at
# 2¹⁰, so that the one effective batch checked here is not a skipped one.)
import copy

accumulate = 4
model = make_model()
twin = copy.deepcopy(model)  # same weights: computes the big-batch gradient
optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
scaler = torch.amp.GradScaler(device.type, init_scale=2.0**10)
weights_before = [p.detach().clone() for p in model.parameters()]
for i, (x, y) in enumerate(zip(inputs.split(8), targets.split(8), strict=True)):
    with torch.autocast(device.type, dtype=amp_dtype):
        loss = loss_fn(model(x), y) / accumulate
    scaler.scale(loss).backward()
    if (i + 1) % accumulate == 0:
        scaler.unscale_(optimizer)
        accumulated = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        unchanged = all(
            torch.equal(a, b) for a, b in zip(weights_before, model.parameters(), strict=True)
        )
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

with torch.autocast(device.type, dtype=amp_dtype):
    loss_fn(twin(inputs), targets).backward()
big_batch = torch.cat([p.grad.reshape(-1) for p in twin.parameters()])
gap = ((accumulated - big_batch).norm() / big_batch.norm()).item()
print(f"weights untouched before the boundary: {unchanged}")
print(f"accumulated vs big-batch gradient: relative difference {gap:.1e}")

# sphinx_gallery_start_ignore
assert unchanged
assert gap < 5e-3, gap  # float16 rounding, summed in a different order
# sphinx_gallery_end_ignore


# %%
# A gradient penalty
# ------------------
# A penalty on the gradient's norm needs :func:`torch.autograd.grad` with
# ``create_graph=True``. Pass it the *scaled* loss, so that small gradients survive
# float16, then divide the result by the scale by hand: these gradients belong to no
# optimizer, so ``unscale_`` does not apply. The penalty is part of the forward pass,
# so it is computed under autocast. The check: the penalty and the final gradients
# match a float32 computation of the same thing without any scaling.
def penalty_step(model: nn.Module, scaler: torch.amp.GradScaler | None):
    """One step with an L2 gradient penalty; ``scaler=None`` is the float32 reference."""
    amp = scaler is not None
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=0.01)
    with torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
        loss = loss_fn(model(inputs), targets)
    scaled = torch.autograd.grad(scaler.scale(loss) if amp else loss, params, create_graph=True)
    inv_scale = 1.0 / scaler.get_scale() if amp else 1.0
    grads = [g * inv_scale for g in scaled]  # unscaled by hand, still differentiable
    with torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
        penalty = torch.sqrt(sum(g.pow(2).sum() for g in grads))
        total = loss + penalty
    if amp:
        scaler.scale(total).backward()
        scaler.unscale_(optimizer)  # only to read the gradients below
    else:
        total.backward()
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    if amp:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return penalty.item(), flat


model = make_model()
reference = copy.deepcopy(model)
penalty, grads = penalty_step(model, torch.amp.GradScaler(device.type, init_scale=2.0**10))
penalty_ref, grads_ref = penalty_step(reference, None)
gap = ((grads - grads_ref).norm() / grads_ref.norm()).item()
print(f"penalty {penalty:.5f} (float32 reference {penalty_ref:.5f}); gradient gap {gap:.1e}")

# sphinx_gallery_start_ignore
assert abs(penalty - penalty_ref) < 1e-2 * penalty_ref, (penalty, penalty_ref)
assert gap < 2e-2, gap
# sphinx_gallery_end_ignore

# %%
# Custom autograd functions
# -------------------------
# A :class:`torch.autograd.Function` whose backward does its own arithmetic must run
# that backward under the same autocast state as its forward; otherwise a float16
# incoming gradient meets float32 saved tensors. :func:`torch.amp.custom_fwd` and
# :func:`torch.amp.custom_bwd` (with the device type) arrange it. Without them, the
# backward below fails with a dtype error; with them, it matches the built-in product.
from torch.amp import custom_bwd, custom_fwd


class PlainMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, grad_out):
        x, w = ctx.saved_tensors
        return grad_out @ w.T, x.T @ grad_out


class AmpMM(torch.autograd.Function):
    """The same product, made autocast-aware by two decorators."""

    @staticmethod
    @custom_fwd(device_type=device.type)
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    @custom_bwd(device_type=device.type)
    def backward(ctx, grad_out):
        x, w = ctx.saved_tensors
        return grad_out @ w.T, x.T @ grad_out


# %%
# Both functions receive float32 leaves and run under autocast.
a = torch.randn(8, 16, device=device, requires_grad=True)
b = torch.randn(16, 4, device=device, requires_grad=True)
plain_failed = False
try:
    with torch.autocast(device.type, dtype=amp_dtype):
        out = PlainMM.apply(a, b)
    out.float().sum().backward()
except RuntimeError as err:
    print(f"PlainMM backward: RuntimeError: {str(err).splitlines()[0]}")
    plain_failed = True

a.grad = b.grad = None
with torch.autocast(device.type, dtype=amp_dtype):
    out = AmpMM.apply(a, b)
out.float().sum().backward()
grad_a = a.grad.clone()
a.grad = None
with torch.autocast(device.type, dtype=amp_dtype):
    (a @ b).float().sum().backward()
matches = torch.allclose(grad_a, a.grad, rtol=1e-3, atol=1e-3)
print(f"AmpMM output {out.dtype}; its a.grad matches the built-in product's: {matches}")

# sphinx_gallery_start_ignore
assert plain_failed
assert out.dtype == amp_dtype
assert matches
# sphinx_gallery_end_ignore


# %%
# A function that needs float32
# -----------------------------
# Some code only works in float32: a compiled extension built for one dtype, or
# arithmetic that overflows float16, like this hand-written log-sum-exp without the
# max-subtraction trick. ``custom_fwd(cast_inputs=torch.float32)`` casts its
# floating-point inputs to float32 and turns autocast off inside it when it is
# called inside an autocast region; outside one it does nothing, and the inputs keep
# their dtype. The check: the function sees float32 with autocast off, and its result
# is finite where float16 would give inf.
class Float32LogSumExp(torch.autograd.Function):
    seen = None

    @staticmethod
    @custom_fwd(device_type=device.type, cast_inputs=torch.float32)
    def forward(ctx, x):
        Float32LogSumExp.seen = (x.dtype, torch.is_autocast_enabled(device.type))
        e = x.exp()  # in float16 this is inf from x ≈ 11.09 (ln 65520) up
        ctx.save_for_backward(e)
        return e.sum(dim=-1).log()

    @staticmethod
    @custom_bwd(device_type=device.type)
    def backward(ctx, grad):
        (e,) = ctx.saved_tensors
        return grad[..., None] * e / e.sum(dim=-1, keepdim=True)


x = torch.full((2, 4), 12.0, device=device, requires_grad=True)
with torch.autocast(device.type, dtype=amp_dtype):
    h = x.half() * 1.0  # a float16 activation, as a lowered layer would produce
    lse = Float32LogSumExp.apply(h)
lse.sum().backward()
naive16 = h.detach().exp().sum(dim=-1).log()
print(f"inside: {Float32LogSumExp.seen[0]}, autocast on: {Float32LogSumExp.seen[1]}")
print(f"result {lse.tolist()} ({lse.dtype}); the same in float16: {naive16.tolist()}")

# sphinx_gallery_start_ignore
assert Float32LogSumExp.seen == (torch.float32, False)
assert torch.allclose(lse, torch.logsumexp(x.detach(), dim=-1))
assert torch.isinf(naive16).all()
assert torch.allclose(x.grad, torch.full_like(x, 0.25))
# sphinx_gallery_end_ignore

# %%
# If you cannot edit a function's definition, the same effect takes two lines at the
# call site: ``with torch.autocast(device.type, enabled=False):`` and ``.float()`` on
# its inputs.
#
# Every recipe against its reference
# ----------------------------------
# Each point is one gradient entry: its value from the recipe against the value from
# the reference computation; points on the diagonal agree. In the first two panels a
# forgotten unscale would put them a factor of the scale (2¹⁰ here) away from it; in
# the third, a missing decorator would have raised instead.
import matplotlib.pyplot as plt

pairs = [
    ("accumulation, 4 × 8", big_batch, accumulated, "one batch of 32"),
    ("gradient penalty", grads_ref, grads, "float32, no scaler"),
    ("custom function AmpMM", a.grad, grad_a, "built-in a @ b"),
]
fig, axes = plt.subplots(1, 3, figsize=(10, 3.6), layout="constrained")
for ax, (title, reference, recipe, ref_name) in zip(axes, pairs, strict=True):
    ref = reference.detach().float().cpu().reshape(-1)  # (n,)
    got = recipe.detach().float().cpu().reshape(-1)  # (n,)
    lim = 1.05 * max(ref.abs().max().item(), got.abs().max().item())
    ax.plot([-lim, lim], [-lim, lim], color="0.7", linewidth=1)
    ax.scatter(ref, got, s=6, alpha=0.6)
    ax.set(title=title, xlabel=f"reference: {ref_name}", ylabel="recipe", aspect="equal")
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim))
fig.suptitle("Gradients from the float16 recipes against their references")
plt.show()

# %%
# Summary
# -------
# - With accumulation, keep the gradients scaled and the scale constant until the
#   effective batch is complete; ``unscale_``, ``step`` and ``update`` only then.
# - Gradients from :func:`torch.autograd.grad` belong to no optimizer: take them of the
#   scaled loss and divide by ``scaler.get_scale()`` yourself; compute the penalty
#   under autocast.
# - Decorate a custom :class:`torch.autograd.Function` with :func:`torch.amp.custom_fwd`
#   and :func:`torch.amp.custom_bwd`; ``cast_inputs=torch.float32`` runs it in float32
#   with autocast off when it is called under autocast.
