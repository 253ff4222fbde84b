"""
Package a model as a Module that trains, saves and loads cleanly
================================================================

.. effpt-before-you-start::
   :learn: - Register parameters, submodules and buffers, and list what a module owns.
           - Save and load a ``state_dict`` with ``weights_only=True`` instead of pickling
             the module.
           - Checkpoint the optimizer with the model, so that a resumed run continues
             exactly.
           - Give every use of a layer its own instance.
   :read-first: :doc:`plot_fitting_a_curve` for the training loop; :doc:`plot_autograd`
                for leaves and ``.to()``.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU).

A :class:`torch.nn.Module` bundles a model's parameters, its other state and the
computation that uses them, so that one call moves, saves, loads or trains all of it.
This page fits a line with a hand-written module, rebuilds it from library parts, and
shows what a module owns, how to checkpoint it with its optimizer, and the one reuse
that quietly breaks tools built on modules.
"""

# %%
# A module with two parameters
# ----------------------------
# Wrapping a tensor in :class:`torch.nn.Parameter` and assigning it to the module
# registers it: :meth:`~torch.nn.Module.parameters` finds it, and it requires gradients.
# Moving the module afterwards is safe, unlike the ``.to()`` that loses a leaf on
# :doc:`the autograd page <plot_autograd>`: :meth:`Module.to() <torch.nn.Module.to>`
# moves each parameter's data in place, so every parameter stays the same leaf tensor,
# the one an optimizer will be given. The data are noisy samples of ``y = 5x + 3``, the
# noise drawn on the CPU and moved, so that every device fits the same samples.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))


class Line(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.slope = torch.nn.Parameter(torch.rand(1))
        self.intercept = torch.nn.Parameter(torch.rand(1))

    def forward(self, x):
        return self.slope * x + self.intercept


x = torch.arange(100, device=device) / 100  # (samples,)
y = 5 * x + 3 + 0.1 * torch.randn(100).to(device)  # (samples,), noise drawn on the CPU
line = Line().to(device)
for name, p in line.named_parameters():
    print(f"{name}: requires_grad={p.requires_grad}, is_leaf={p.is_leaf}, on {p.device.type}")

# sphinx_gallery_start_ignore
assert all(p.requires_grad and p.is_leaf for p in line.parameters())
# sphinx_gallery_end_ignore

# %%
# The training loop
# -----------------
# The optimizer gets the module's parameters; every step clears the gradients, computes
# the loss, back-propagates and updates. The fit lands near slope 5 and intercept 3.


def fit(model, steps=500, lr=0.5):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()


loss = fit(line)
print(
    f"slope = {line.slope.item():.2f}, intercept = {line.intercept.item():.2f}, final loss {loss:.4f}"
)

# sphinx_gallery_start_ignore
assert abs(line.slope.item() - 5) < 0.1 and abs(line.intercept.item() - 3) < 0.1
# sphinx_gallery_end_ignore

# %%
# The same model from ``nn.Linear``
# ---------------------------------
# :class:`torch.nn.Linear` maps the last dimension, ``in_features`` wide, and treats all
# others as a batch. Our ``x`` is a plain vector of 100 samples, so ``Linear(1, 1)`` reads
# it as *one* sample with 100 features and fails. ``unsqueeze(1)`` makes it 100 samples
# of one feature; ``squeeze(1)`` drops that dimension from the output again.
linear = torch.nn.Linear(1, 1).to(device)
try:
    linear(x)
except RuntimeError as err:
    print("RuntimeError:", err)


class LinearLine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)

    def forward(self, x):
        return self.layer(x.unsqueeze(1)).squeeze(1)  # (samples,) → (samples, 1) → (samples,)


model = LinearLine().to(device)
fit(model)
print(f"weight = {model.layer.weight.item():.2f}, bias = {model.layer.bias.item():.2f}")

# sphinx_gallery_start_ignore
assert abs(model.layer.weight.item() - 5) < 0.1 and abs(model.layer.bias.item() - 3) < 0.1
# sphinx_gallery_end_ignore

# %%
# ``parameters()`` recurses into submodules
# -----------------------------------------
# ``LinearLine`` defines no parameter itself, yet it has two: a module assigned as an
# attribute is registered as a submodule, and ``named_parameters()`` walks all of them,
# prefixing each name with the attribute path.
print([name for name, _ in model.named_parameters()])
print("submodules:", [name for name, _ in model.named_children()])

# sphinx_gallery_start_ignore
assert [name for name, _ in model.named_parameters()] == ["layer.weight", "layer.bias"]
# sphinx_gallery_end_ignore

# %%
# Buffers: state that is not trained
# ----------------------------------
# Statistics such as an input's mean and spread belong to the model (they must be saved
# and moved with it) but the optimizer must not touch them.
# :meth:`~torch.nn.Module.register_buffer` says so: buffers are in
# :meth:`~torch.nn.Module.state_dict` and follow ``.to()``, but not in ``parameters()``.
# ``persistent=False`` keeps a buffer out of the ``state_dict`` too.


class Standardize(torch.nn.Module):
    def __init__(self, data: torch.Tensor):
        super().__init__()
        self.register_buffer("mean", data.mean())
        self.register_buffer("std", data.std())
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64), persistent=False)

    def forward(self, x):
        self.calls += 1
        return (x - self.mean) / self.std


standardize = Standardize(x)
print("parameters:", list(standardize.parameters()))
print("buffers:", [name for name, _ in standardize.named_buffers()])
print("state_dict keys:", list(standardize.state_dict()))

# sphinx_gallery_start_ignore
assert not list(standardize.parameters())
assert list(standardize.state_dict()) == ["mean", "std"]
# sphinx_gallery_end_ignore

# %%
# ``nn.Sequential`` chains modules
# --------------------------------
# :class:`torch.nn.Sequential` feeds each module's output to the next. Its children are
# named ``0``, ``1``, ... and so are the keys of its ``state_dict``.
net = torch.nn.Sequential(
    Standardize(x),
    torch.nn.Unflatten(0, (-1, 1)),  # (samples,) → (samples, 1)
    torch.nn.Linear(1, 16),
    torch.nn.Tanh(),
    torch.nn.Linear(16, 1),
    torch.nn.Flatten(0),  # (samples, 1) → (samples,)
).to(device)
print(net(x).shape, list(net.state_dict()))

# sphinx_gallery_start_ignore
assert net(x).shape == (100,) and list(net.state_dict())[:3] == ["0.mean", "0.std", "2.weight"]
# sphinx_gallery_end_ignore

# %%
# Save the ``state_dict``, not the module
# ---------------------------------------
# A ``state_dict`` is an ordered dict of names to tensors: it loads into any fresh
# instance of the class, even after the class's code has moved or changed, as long as
# the names and shapes of its parameters and buffers stay the same. Saving the
# module itself pickles a reference to its class, and loading it needs that class
# importable under the same name; with ``weights_only=True`` :func:`torch.load` refuses
# it outright. The part of the error that says why names the class it will not load
# and how to allow it, if you trust the file.
import pickle
import tempfile
import textwrap
from pathlib import Path

with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "net.pt"
    torch.save(net.state_dict(), path)
    fresh = torch.nn.Sequential(
        Standardize(torch.zeros(2)),
        torch.nn.Unflatten(0, (-1, 1)),
        torch.nn.Linear(1, 16),
        torch.nn.Tanh(),
        torch.nn.Linear(16, 1),
        torch.nn.Flatten(0),
    ).to(device)
    print(fresh.load_state_dict(torch.load(path, map_location=device, weights_only=True)))
    print("same outputs:", torch.equal(fresh(x), net(x)))

    torch.save(net, path)
    try:
        torch.load(path, weights_only=True)
    except pickle.UnpicklingError as err:
        reason = next(line for line in str(err).splitlines() if "Unsupported global" in line)
    print(textwrap.fill(reason.strip(), width=88))

# sphinx_gallery_start_ignore
assert torch.equal(fresh(x), net(x)) and "Unsupported global" in reason
# sphinx_gallery_end_ignore

# %%
# Functional or module?
# ---------------------
# :mod:`torch.nn.functional` holds the same operations as plain functions of explicit
# tensors. Use a module for anything that owns state (weights, buffers) and the
# functional form for stateless steps; both compute the same thing.
import torch.nn.functional as F

layer = net[2]
inputs = torch.randn(4, 1, device=device)  # (batch, features)
print(
    "F.linear == nn.Linear:", torch.equal(F.linear(inputs, layer.weight, layer.bias), layer(inputs))
)
print("F.relu == nn.ReLU:", torch.equal(F.relu(inputs), torch.nn.ReLU()(inputs)))

# sphinx_gallery_start_ignore
assert torch.equal(F.linear(inputs, layer.weight, layer.bias), layer(inputs))
# sphinx_gallery_end_ignore

# %%
# Never use one module instance in two places
# -------------------------------------------
# Reusing a stateless :class:`~torch.nn.ReLU` looks harmless, and the forward result is right. But tools
# that work per module see one module where the model has two layers. A forward hook
# that records each module's output by name, the usual way to inspect activations,
# keeps only the *last* call: below, the entry for layer ``1`` (after the 8-wide layer)
# holds the 4-wide output of layer ``3``, and :meth:`~torch.nn.Module.named_modules`
# lists 4 of the 5 layers.
relu = torch.nn.ReLU()
shared = torch.nn.Sequential(
    torch.nn.Linear(1, 8), relu, torch.nn.Linear(8, 4), relu, torch.nn.Linear(4, 1)
).to(device)

activations = {}


def record(name):
    def hook(module, args, output):
        activations[name] = output.shape

    return hook


for name, module in shared.named_modules():
    if name:  # skip the container itself
        module.register_forward_hook(record(name))
shared(inputs)
print("layers:", len(shared), "| named:", [name for name, _ in shared.named_modules() if name])
print("recorded shapes:", {k: tuple(v) for k, v in activations.items()})

# sphinx_gallery_start_ignore
assert tuple(activations["1"]) == (4, 4) and "3" not in activations
assert len(shared) == 5 and len([n for n, _ in shared.named_modules() if n]) == 4
# sphinx_gallery_end_ignore

# %%
# The optimizer has state too
# ---------------------------
# Adam keeps running averages of each parameter's gradient and squared gradient.
# They are part of training: a checkpoint that saves only the model and resumes with a
# fresh optimizer takes different steps. Save both ``state_dict``\ s and the resumed run
# continues exactly where it stopped.
import copy


def adam_steps(model, optimizer, steps):
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


model = LinearLine().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
unbroken = adam_steps(model, optimizer, 50)
checkpoint = copy.deepcopy({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
print("Adam's state per parameter:", list(checkpoint["optimizer"]["state"][0]))
unbroken += adam_steps(model, optimizer, 50)

resumed_losses, resumed_same = {}, {}
for restore_optimizer in (True, False):
    resumed = LinearLine().to(device)
    resumed.load_state_dict(checkpoint["model"])
    resumed_optimizer = torch.optim.Adam(resumed.parameters(), lr=0.05)
    if restore_optimizer:
        resumed_optimizer.load_state_dict(checkpoint["optimizer"])
    resumed_losses[restore_optimizer] = adam_steps(resumed, resumed_optimizer, 50)
    same = torch.equal(resumed.layer.weight, model.layer.weight)
    resumed_same[restore_optimizer] = same
    print(
        f"optimizer state restored: {restore_optimizer!s:5} → same weights as the unbroken run: {same}"
    )

# sphinx_gallery_start_ignore
assert list(checkpoint["optimizer"]["state"][0]) == ["step", "exp_avg", "exp_avg_sq"]
assert resumed_same == {True: True, False: False}
assert resumed_losses[True] == unbroken[50:] and resumed_losses[False] != unbroken[50:]
fresh = resumed_losses[False]
assert fresh[0] - fresh[1] > unbroken[50] - unbroken[51] > 0  # the fresh Adam's step is bigger
# sphinx_gallery_end_ignore

# %%
# The loss of the three runs shows it. Restored, the optimizer retraces the unbroken
# run step for step. A fresh Adam goes its own way: its first steps are about ``lr`` in
# size, while the restored Adam still divides by the large squared gradients of the
# early steps, so here the fresh run takes bigger steps. Faster or slower, it is not the
# run the checkpoint came from.
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
ax.semilogy(range(1, 101), unbroken, color="0.6", linewidth=5, label="unbroken run")
ax.semilogy(range(51, 101), resumed_losses[True], "--", color="C0", label="resumed, Adam restored")
ax.semilogy(range(51, 101), resumed_losses[False], color="C3", label="resumed, fresh Adam")
ax.axvline(50.5, color="black", linestyle=":", label="checkpoint")
ax.set(xlabel="step", ylabel="mean squared error", title="Resuming from a checkpoint")
fig.legend(loc="outside right center")
plt.show()

# %%
# Summary
# -------
# - Assign ``nn.Parameter``\ s and submodules as attributes; ``parameters()`` finds them
#   all, and ``register_buffer`` holds state that is saved and moved but not trained.
# - Save and load ``state_dict()``\ s with ``weights_only=True``; pickling the whole
#   module ties the file to your code's layout. Checkpoint the optimizer's too, or the
#   resumed run is a different run.
# - ``nn.Linear`` wants a feature dimension: ``unsqueeze`` vectors of samples first.
# - Give every use of a layer its own instance, or use the functional form.
