"""
Look inside a model with hooks
==============================

.. effpt-before-you-start::
   :learn: - Register forward, forward-pre, full backward and tensor hooks, and know what
             each one receives.
           - Log activation and gradient norms per layer while the model trains, and plot
             them.
           - Remove every hook through its handle, and check that nothing is logged
             afterwards.
           - Count the memory a hook keeps alive when it stores tensors, and measure what
             logging hooks cost a training step.
   :read-first: :doc:`/auto_examples/basics/plot_modules` for modules and their
                children; :doc:`/auto_examples/basics/plot_autograd` for ``backward``.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU).

When a loss stalls or explodes, the first question is where in the model it happens, and
the model's code rarely says. Hooks answer without changing that code: a function you
register on a module or a tensor runs every time data or gradients pass through it. This
page logs what passes through each layer of a small network, plots it, removes the
hooks cleanly, and measures what they cost in memory and in time.
"""

# %%
# Four kinds of hook
# ------------------
# A forward-pre hook runs before a module's ``forward`` and receives its inputs; a
# forward hook runs after, with inputs and output; a full backward hook runs when the
# gradients with respect to the module's inputs have been computed, and receives those
# and the gradients of its outputs. A tensor hook, registered on one tensor with
# :meth:`~torch.Tensor.register_hook`, receives that tensor's gradient. Each
# registration returns a handle whose ``remove()`` takes the hook off again.
import warnings

import torch
from torch import nn

from effpt.device import describe, pick_device

device = pick_device()
print(describe(device))
torch.manual_seed(0)

width, depth = 64, 6
layers = [m for _ in range(depth) for m in (nn.Linear(width, width), nn.Tanh())]
model = nn.Sequential(*layers[:-1]).to(device)  # six linear layers, tanh between them
linears = {f"linear {i}": m for i, m in enumerate(m for m in model if isinstance(m, nn.Linear))}
x = torch.randn(256, width, device=device)  # (batch, features)
target = torch.randn(256, width, device=device)

seen = []


def pre_hook(module, args):  # args: the positional inputs, as a tuple
    seen.append(("pre", args[0].shape))


def forward_hook(module, args, output):
    seen.append(("forward", output.shape))


def backward_hook(module, grad_input, grad_output):  # tuples of gradients (or None)
    seen.append(("backward", grad_output[0].shape))


first = linears["linear 0"]
handles = [
    first.register_forward_pre_hook(pre_hook),
    first.register_forward_hook(forward_hook),
    first.register_full_backward_hook(backward_hook),
    first.weight.register_hook(lambda grad: seen.append(("tensor", grad.shape))),
]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    nn.functional.mse_loss(model(x), target).backward()
for kind, shape in seen:
    print(f"{kind:>8}: {tuple(shape)}")
for handle in handles:
    handle.remove()
print(f"warning: {caught[0].message}" if caught else "no warning on this release")

# sphinx_gallery_start_ignore
assert [k for k, _ in seen] == ["pre", "forward", "tensor", "backward"] or [k for k, _ in seen] == [
    "pre",
    "forward",
    "backward",
    "tensor",
]
# sphinx_gallery_end_ignore

# %%
# The weight's gradient, seen by the tensor hook, has the weight's shape; the
# backward hook sees the gradient of the layer's output, one row per sample. The first
# layer's input is data, which needs no gradient, so that layer has no input gradient to
# report: its backward hook fires with ``grad_input`` holding ``None``, and recent
# releases warn about it, as printed above.

# %%
# Norms per layer while training
# ------------------------------
# A forward hook on every linear layer records the norm of its output, and puts a
# tensor hook on that output, which records the norm of its gradient when the backward
# pass reaches it: the same gradient a full backward hook's ``grad_output`` holds,
# without the first layer's warning. Each norm is reduced to a float at once, so that
# the log holds numbers and not tensors. Thirty steps of SGD on random targets are
# enough to see the layers differ.
from collections import defaultdict

log = defaultdict(list)  # (layer, "activation" or "gradient") -> one norm per step


def watch(name: str, module: nn.Module) -> list:
    def forward_hook(module, args, output):
        log[name, "activation"].append(output.detach().norm().item())
        if output.requires_grad:  # not under torch.no_grad()
            output.register_hook(lambda grad: log[name, "gradient"].append(grad.norm().item()))

    return [module.register_forward_hook(forward_hook)]


handles = [h for name, m in linears.items() for h in watch(name, m)]
opt = torch.optim.SGD(model.parameters(), lr=0.05)


def step() -> None:
    loss = nn.functional.mse_loss(model(x), target)
    opt.zero_grad()
    loss.backward()
    opt.step()


for _ in range(30):
    step()
print({name: f"{log[name, 'gradient'][-1]:.2e}" for name in linears})

# sphinx_gallery_start_ignore
assert all(len(v) == 30 for v in log.values()) and len(log) == 2 * depth
# sphinx_gallery_end_ignore

# %%
# The figure puts each layer's two norms over the steps. The output and its gradient
# usually grow or shrink from layer to layer, and a layer whose output gradient is far
# below the others' gets correspondingly small weight updates from SGD.
import matplotlib.pyplot as plt

fig, axes = plt.subplots(1, 2, figsize=(8, 3.4), sharex=True, layout="constrained")
for ax, kind in zip(axes, ("activation", "gradient"), strict=True):
    for name in linears:
        ax.plot(log[name, kind], marker=".", lw=0.8, label=name)
    ax.set(yscale="log", xlabel="step", title=f"norm of each layer's {kind}")
axes[1].legend(fontsize=7, ncols=2)
plt.show()

# %%
# Remove what you registered
# --------------------------
# A hook stays until its handle is removed, and one left behind keeps logging (and
# costing time) in every later forward and backward pass, in evaluation too. Keep the
# handles, and remove them all; a handle also works as a context manager (``with
# module.register_forward_hook(f):``) that removes its hook on leaving the block.
for handle in handles:
    handle.remove()
before = sum(len(v) for v in log.values())
step()
print(f"entries logged by one more step: {sum(len(v) for v in log.values()) - before}")

# sphinx_gallery_start_ignore
assert sum(len(v) for v in log.values()) == before
assert all(not m._forward_hooks and not m._backward_hooks for m in linears.values())
# sphinx_gallery_end_ignore


# %%
# What a hook keeps alive
# -----------------------
# A hook that appends the output itself keeps every step's activation in memory for as
# long as the list lives. ``.detach()`` does not help: it returns a new tensor over the
# same storage, with no gradient history, and the storage stays. Only reducing the
# tensor to what you need, here a norm, lets the activation go. The bytes below are
# counted from the distinct storages each list holds after ten steps.
def kept_bytes(tensors: list) -> int:
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())


variants = {
    "the output": lambda out: out,
    "output.detach()": lambda out: out.detach(),
    "output.detach().norm()": lambda out: out.detach().norm(),
}
kept = {}
for label, keep in variants.items():
    stored = []

    def store(module, args, output, keep=keep, stored=stored):
        stored.append(keep(output))

    with linears["linear 3"].register_forward_hook(store):
        for _ in range(10):
            step()
    kept[label] = kept_bytes(stored)
    print(f"storing {label}: {kept[label]:,} bytes after 10 steps")

# sphinx_gallery_start_ignore
activation = x.shape[0] * width * x.element_size()
assert kept["the output"] == kept["output.detach()"] == 10 * activation
assert kept["output.detach().norm()"] == 10 * x.element_size()
# sphinx_gallery_end_ignore

# %%
# The stored outputs are ten activations of 256 × 64 numbers; the norms are ten
# scalars. A stored output that was not detached also holds its ``grad_fn``, the node of
# the autograd graph that produced it, and with it the graph's nodes behind it.

# %%
# What hooks cost a step
# ----------------------
# Every hook is a Python call, and ``.item()`` copies a number to the host, which on a
# GPU waits until the device has finished the work queued before it. Below, one training
# step is timed without hooks, with the logging hooks above (``.item()`` in each), and
# with hooks that keep the norms as tensors on the device. Before you read the numbers:
# how much slower do you expect the logged step to be here, and would a GPU, where a
# step queues work without waiting for it, widen or narrow the gap?
from effpt.bench import compare
from effpt.records import speedup

on_device = []


def keep_tensors(name: str, module: nn.Module) -> list:
    def forward_hook(module, args, output):
        on_device.append(output.detach().norm())
        if output.requires_grad:
            output.register_hook(lambda grad: on_device.append(grad.norm()))

    return [module.register_forward_hook(forward_hook)]


def hooked(watcher):
    def run() -> None:
        handles = [h for name, m in linears.items() for h in watcher(name, m)]
        try:
            step()
        finally:
            for handle in handles:
                handle.remove()
        on_device.clear()

    return run


records = compare(
    f"one training step, {depth} linear layers",
    {
        "no hooks": step,
        "hooks with .item()": hooked(watch),
        "hooks keeping tensors": hooked(keep_tensors),
    },
    device=device,
    repeats=8,  # eight rounds, each variant's block about 20 ms
)

# %%
# The verdict below holds the plain step against the one that logs with ``.item()``.
from effpt.expect import expect

_ = expect(
    f"a training step of {depth} linear layers is slower with norm-logging hooks on each",
    speedup(records[1], records[0]),
    above=1.0,
    device=device,
)

# %%
# Registering and removing the hooks is part of each timed hooked step, as it would be
# in a loop that logs only every hundredth step. Compiling is out of this page's scope:
# :func:`torch.compile` has its own rules for module hooks, which its documentation on
# ``nn.Module`` support sets out.

# %%
# Summary
# -------
# - ``register_forward_pre_hook``, ``register_forward_hook`` and
#   ``register_full_backward_hook`` watch a module's inputs, outputs and gradients;
#   ``Tensor.register_hook`` watches one tensor's gradient.
#
# - Log reduced numbers (a norm, a max, a count of non-finite values), not the tensors:
#   a stored tensor, detached or not, keeps its whole storage alive.
#
# - Keep every handle and remove it, or use it as a context manager.
#
# - Hooks cost a Python call each, and ``.item()`` a wait for the device; log every N
#   steps, not every step, when the cost shows.
