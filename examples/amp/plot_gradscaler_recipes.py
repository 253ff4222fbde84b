"""
Use GradScaler with clipping, accumulation, penalties and custom functions
==========================================================================

The basic mixed-precision loop is three calls, but real training loops clip
gradients, accumulate them over several batches, differentiate twice, step several
optimizers or call hand-written autograd functions, and each of these meets the scaled
gradients in its own way. This page runs every such pattern on a small model with
:class:`torch.amp.GradScaler`, each followed by a check that it did what it should.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_gradscaler_recipes.py``.
"""

# %%
# Setup: float16 on every device
# ------------------------------
# Gradient scaling exists for float16, so this page uses float16 autocast everywhere.
# CPUs support it too (slower than bfloat16, fine for these small models), which lets
# every recipe below run and be checked on any machine. Construct the scaler with the
# device type: ``torch.amp.GradScaler("cuda")`` or ``torch.amp.GradScaler("cpu")``.
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
# The old spelling, and its warning
# ---------------------------------
# Older code, including many tutorials, writes ``torch.cuda.amp.GradScaler()``. It
# still works on a GPU but is deprecated and raises a :class:`FutureWarning`; on a
# machine without CUDA it also disables itself. Here it is once, with the warnings
# caught and printed. Everywhere else: ``torch.amp.GradScaler(device.type)``.
import warnings

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    old = torch.cuda.amp.GradScaler()
for w in caught:
    print(f"{w.category.__name__}: {w.message}")
print(f"old scaler enabled: {old.is_enabled()}")

# sphinx_gallery_start_ignore
assert any(w.category is FutureWarning for w in caught), caught
# sphinx_gallery_end_ignore

# %%
# The typical loop
# ----------------
# Forward pass and loss under autocast; ``scale(loss).backward()`` makes scaled
# gradients; ``step`` unscales them and skips the update if any is inf or nan;
# ``update`` adjusts the scale for the next iteration. A fresh scaler starts at 2¹⁶.
# On this untrained model the first scaled backward overflows float16, so the scaler
# skips that step and halves the scale: a normal start, not an error.
model = make_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
scaler = torch.amp.GradScaler(device.type)
history, skipped = [], []
for step in range(40):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=amp_dtype):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    scale_before = scaler.get_scale()
    scaler.step(optimizer)
    scaler.update()
    if scaler.get_scale() < scale_before:
        skipped.append(step)
    history.append(loss.item())
print(
    f"loss {history[0]:.3f} -> {history[-1]:.3f}; skipped steps {skipped}, "
    f"scale now {scaler.get_scale():.0f}"
)

# sphinx_gallery_start_ignore
assert history[-1] < history[0] / 2, history
assert skipped == [0], skipped
# sphinx_gallery_end_ignore

# %%
# Clip unscaled gradients
# -----------------------
# :func:`torch.nn.utils.clip_grad_norm_` compares the gradients' norm with
# ``max_norm``, but after ``scale(loss).backward()`` that norm is inflated by the scale
# (65536 here). Call ``scaler.unscale_(optimizer)`` first; ``step`` then knows not to
# unscale a second time. The check: the norm after clipping is at most ``max_norm``.
max_norm = 0.1
optimizer.zero_grad(set_to_none=True)
with torch.autocast(device.type, dtype=amp_dtype):
    loss = loss_fn(model(inputs), targets)
scaler.scale(loss).backward()
scaled_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]).item()
scaler.unscale_(optimizer)
norm_before = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm).item()
norm_after = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]).item()
scaler.step(optimizer)
scaler.update()
print(
    f"norm of the scaled gradients {scaled_norm:.4g}, unscaled {norm_before:.4g}, "
    f"after clipping {norm_after:.4g}"
)

# sphinx_gallery_start_ignore
assert norm_before > max_norm
assert norm_after <= max_norm * (1 + 1e-5), norm_after
assert scaled_norm > 1000 * norm_before
# sphinx_gallery_end_ignore

# %%
# Accumulate gradients over several batches
# -----------------------------------------
# Four micro-batches of 8 make an effective batch of 32. The gradients stay scaled, and
# the scale constant, until the effective batch is complete; only then may they be
# unscaled (here, to compare them), and only then do ``step`` and ``update`` run. The
# check: at the boundary the accumulated gradient equals, up to float16 rounding, the
# gradient of one batch of 32 computed by an identical model. (This scaler starts at 2¹⁰ so that the one
# effective batch checked here is not a skipped one.)
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
# In a training loop the ``if amp`` branches are all there is: ``scale``, ``get_scale``,
# ``scale(...).backward()``, ``step``, ``update``.
#
# Several models, losses and optimizers
# -------------------------------------
# Every loss is scaled, every optimizer is stepped through the scaler (each decides on
# its own whether to skip), and ``update`` runs once per iteration, after all of them.
# The check: both models learn.
model0, model1 = make_model(), make_model()
opt0 = torch.optim.SGD(model0.parameters(), lr=0.01)
opt1 = torch.optim.SGD(model1.parameters(), lr=0.01)
scaler = torch.amp.GradScaler(device.type)
pair = []
for _ in range(40):
    opt0.zero_grad(set_to_none=True)
    opt1.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=amp_dtype):
        out0, out1 = model0(inputs), model1(inputs)
        loss0 = loss_fn(2 * out0 + 3 * out1, targets)
        loss1 = loss_fn(3 * out0 - 5 * out1, targets)
    scaler.scale(loss0).backward(retain_graph=True)  # the two losses share a graph
    scaler.scale(loss1).backward()
    scaler.unscale_(opt0)  # optional, for one optimizer only: e.g. to clip model0
    scaler.step(opt0)
    scaler.step(opt1)
    scaler.update()
    pair.append((loss0.item(), loss1.item()))
print(f"loss0 {pair[0][0]:.3f} -> {pair[-1][0]:.3f}, loss1 {pair[0][1]:.3f} -> {pair[-1][1]:.3f}")

# sphinx_gallery_start_ignore
assert pair[-1][0] < pair[0][0] / 2, pair
assert pair[-1][1] < pair[0][1] / 2, pair
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
# floating-point inputs to float32 and turns autocast off inside it, wherever it is
# called from. The check: the function sees float32 with autocast off, and its result
# is finite where float16 would give inf.
class Float32LogSumExp(torch.autograd.Function):
    seen = None

    @staticmethod
    @custom_fwd(device_type=device.type, cast_inputs=torch.float32)
    def forward(ctx, x):
        Float32LogSumExp.seen = (x.dtype, torch.is_autocast_enabled(device.type))
        e = x.exp()  # overflows float16 for x > 11.1
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
# Save and restore the scaler
# ---------------------------
# The scale is training state, like the optimizer's moments: a checkpoint that omits it
# restarts at 65536 and may skip several steps while it finds its level again. Save
# ``scaler.state_dict()`` with the rest. The check: a run restored from the checkpoint
# continues bit for bit like the run that never stopped.
import io


def train(model, optimizer, scaler, steps):
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=amp_dtype):
            loss = loss_fn(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


model = make_model()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler(device.type, init_scale=2.0**8, growth_interval=5)
train(model, optimizer, scaler, steps=12)
buffer = io.BytesIO()
torch.save(
    {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict(),
    },
    buffer,
)
print(scaler.state_dict())

# %%
# A fresh model, optimizer and scaler load the checkpoint; both runs then train on.
buffer.seek(0)
checkpoint = torch.load(buffer, weights_only=True)
restored = make_model()
restored_opt = torch.optim.Adam(restored.parameters(), lr=1e-3)
restored_scaler = torch.amp.GradScaler(device.type)
restored.load_state_dict(checkpoint["model"])
restored_opt.load_state_dict(checkpoint["optimizer"])
restored_scaler.load_state_dict(checkpoint["scaler"])
train(model, optimizer, scaler, steps=8)
train(restored, restored_opt, restored_scaler, steps=8)
same = all(
    torch.equal(p, q) for p, q in zip(model.parameters(), restored.parameters(), strict=True)
)
print(
    f"scale {scaler.get_scale():.0f} vs restored {restored_scaler.get_scale():.0f}; "
    f"identical weights: {same}"
)

# sphinx_gallery_start_ignore
assert same
assert scaler.get_scale() == restored_scaler.get_scale() == 2.0**8 * 2**4
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Touch ``.grad`` only after ``scaler.unscale_(optimizer)``, once per optimizer and
#   step; ``step`` then does not unscale again.
# - With accumulation, keep gradients scaled and call ``step``/``update`` only at
#   effective-batch boundaries.
# - Gradients from :func:`torch.autograd.grad` are yours to unscale: divide by
#   ``scaler.get_scale()``. Compute the penalty under autocast.
# - One scaler serves many losses and optimizers; ``update`` runs once per iteration.
# - Decorate custom autograd functions with :func:`torch.amp.custom_fwd` and
#   :func:`torch.amp.custom_bwd`, and save ``scaler.state_dict()`` in checkpoints.
