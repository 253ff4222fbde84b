"""
Train with GradScaler and clip its gradients
============================================

.. effpt-before-you-start::
   :learn: - Write the float16 loop with ``torch.amp.GradScaler(device.type)``:
             ``scale(loss).backward()``, ``step(optimizer)``, ``update()``.
           - Clip gradients after ``scaler.unscale_(optimizer)``, and see the scaled norm
             that clipping would have seen without it.
           - Step two models and their optimizers through one scaler.
           - Save the scaler's ``state_dict`` with the checkpoint, so that a restored run
             continues bit for bit.
   :read-first: :doc:`plot_why_scale_gradients` for why float16 gradients need a scale.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU), and trains in float16 on every
           device, the CPU included. The checkpoint stays in memory; no file is written.

The basic float16 training loop needs three calls to :class:`torch.amp.GradScaler`,
and the first thing most real loops add, gradient clipping, goes wrong if it sees
the gradients while they are still scaled. This page runs the loop, shows the scale
it settles on, clips the gradients the right way and measures what clipping would
have seen otherwise; then it steps two optimizers through one scaler and saves the
scaler with a checkpoint.
"""

# %%
# Setup: float16 on every device
# ------------------------------
# Gradient scaling exists for float16, so this page uses float16 autocast everywhere.
# CPUs support it too (speed matters little for these small models), which lets
# every step below run and be checked on any machine. The scaler is made for a
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
# still works on a GPU but is deprecated, and on a machine without CUDA it disables
# itself. Here it is once, with the warnings caught and printed. Everywhere else:
# ``torch.amp.GradScaler(device.type)``.
import warnings

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    old = torch.cuda.amp.GradScaler()
for w in caught:
    print(f"{w.category.__name__}: {w.message}")
print(f"old scaler enabled: {old.is_enabled()}")

# sphinx_gallery_start_ignore
assert any(
    issubclass(w.category, (DeprecationWarning, FutureWarning)) and "deprecated" in str(w.message)
    for w in caught
), caught
# sphinx_gallery_end_ignore

# %%
# The typical loop
# ----------------
# Forward pass and loss under autocast; ``scale(loss).backward()`` makes scaled
# gradients; ``step`` unscales them and skips the update if any is inf or nan;
# ``update`` adjusts the scale for the next iteration: it halves the scale after a
# skipped step and doubles it after ``growth_interval`` (2000) clean ones.
model = make_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
scaler = torch.amp.GradScaler(device.type)
print(f"a fresh scaler starts at {scaler.get_scale():.0f}")
history, skipped = [], []
for step in range(40):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=amp_dtype):
        loss = loss_fn(model(inputs), targets)
    scale_before = scaler.get_scale()
    scaler.scale(loss).backward()
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
assert scaler.get_growth_interval() == 2000
# sphinx_gallery_end_ignore

# %%
# Each step in that list had scaled gradients that overflowed float16: the scaler
# skipped it and halved the scale. On an untrained model the first step often
# overflows; that is the scaler finding its level, not an error.
#
# Clip unscaled gradients
# -----------------------
# :func:`torch.nn.utils.clip_grad_norm_` compares the gradients' norm with
# ``max_norm``, but after ``scale(loss).backward()`` every gradient is multiplied by
# the scale. Call ``scaler.unscale_(optimizer)`` first; ``step`` then knows not to
# unscale a second time. The loop below clips at every step and records three norms:
# of the scaled gradients (what clipping would have seen without ``unscale_``), of the
# true gradients, and after clipping.
max_norm = 0.5


def total_norm(module: nn.Module) -> float:
    return torch.cat([p.grad.reshape(-1) for p in module.parameters()]).norm().item()


norms = {"scaled": [], "unscaled": [], "after clipping": []}
scales = []
for _ in range(40):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=amp_dtype):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    scales.append(scaler.get_scale())
    norms["scaled"].append(total_norm(model))
    scaler.unscale_(optimizer)
    norms["unscaled"].append(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm).item())
    norms["after clipping"].append(total_norm(model))
    scaler.step(optimizer)
    scaler.update()
ratio = norms["scaled"][0] / norms["unscaled"][0]
print(
    f"first step: scale {scales[0]:.0f}; gradient norm scaled {norms['scaled'][0]:.4g}, "
    f"unscaled {norms['unscaled'][0]:.4g} (ratio {ratio:.0f}), "
    f"after clipping {norms['after clipping'][0]:.4g}"
)

# sphinx_gallery_start_ignore
assert all(torch.isfinite(torch.tensor(v)).all() for v in norms.values()), norms
assert max(norms["after clipping"]) <= max_norm * (1 + 1e-5), norms["after clipping"]
assert norms["unscaled"][0] > max_norm
assert abs(ratio / scales[0] - 1) < 1e-3, (ratio, scales[0])
assert min(norms["scaled"]) > max_norm, norms["scaled"]
assert min(s / u for s, u in zip(norms["scaled"], norms["unscaled"], strict=True)) > 1000
# sphinx_gallery_end_ignore

# %%
# The scaled norm is the true one times the scale, so clipping it at ``max_norm``
# would have cut every step's gradient, hard. After ``unscale_``, clipping acts
# only while the true norm exceeds ``max_norm``, and never lets it pass.
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(8, 3.6), layout="constrained")
styles = {"scaled": "C3", "unscaled": "C0", "after clipping": "C2"}
labels = {"scaled": "scaled", "unscaled": "unscaled", "after clipping": "unscaled, clipped"}
for name, values in norms.items():
    ax.semilogy(values, color=styles[name], linewidth=1.5, label=labels[name])
ax.axhline(max_norm, color="0.4", linestyle=":", label=f"max_norm = {max_norm}")
ax.set(xlabel="step", ylabel="gradient norm", title="Clip after unscale_: the norms clipping sees")
fig.legend(loc="outside right center")
plt.show()

# %%
# Several models, losses and optimizers
# -------------------------------------
# One scaler serves them all. Every loss is scaled, every optimizer is stepped through
# the scaler (each decides on its own whether to skip), and ``update`` runs once per
# iteration, after all of them. The check: both models learn.
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
# Save and restore the scaler
# ---------------------------
# The scale is training state, like the optimizer's moments: a checkpoint that omits
# it restarts from the initial scale instead of the one training settled on. Save
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
assert scaler.get_scale() == restored_scaler.get_scale()
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - The loop: autocast the forward pass and the loss, then ``scaler.scale(loss).backward()``,
#   ``scaler.step(optimizer)``, ``scaler.update()``. A skipped first step is normal.
# - Touch ``.grad`` (to clip, to log a norm) only after ``scaler.unscale_(optimizer)``,
#   once per optimizer and step; ``step`` then does not unscale again.
# - One scaler serves many losses and optimizers; ``update`` runs once per iteration.
# - Save ``scaler.state_dict()`` in checkpoints, next to the model and the optimizer.
# - Gradient accumulation, gradient penalties and custom autograd functions each meet
#   the scale in their own way: :doc:`plot_gradscaler_recipes`.
