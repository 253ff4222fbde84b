"""
Trade compute for memory with activation checkpointing
======================================================

.. effpt-before-you-start::
   :learn: - Count the bytes autograd saves for the backward pass with
             ``saved_tensors_hooks``, one storage at a time.
           - Checkpoint blocks with ``checkpoint(..., use_reentrant=False)`` and
             ``checkpoint_sequential``, and get the same gradients bit for bit.
           - Choose the number of segments from the bytes a block saves and its input's size.
           - Measure what the recomputation costs in step time, and read the verdicts.
   :read-first: :doc:`/auto_examples/basics/plot_autograd` for ``grad_fn`` and
                ``backward()``; :doc:`/explanations/timing` for how the steps are timed.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU). The peak-memory section measures
           on CUDA only and prints a line saying so elsewhere; the one-thread timing runs
           on a CPU only.

Training keeps every activation the backward pass will need until that pass uses it, and
in a deep model those activations, not the weights, often decide whether a batch fits.
Activation checkpointing keeps only the inputs of chosen parts of the model and runs those
parts' forward pass again during the backward pass. This page counts the bytes autograd
keeps with and without checkpoints, checks that the gradients do not change by a single
bit, measures the time the recomputation costs, and chooses where to put the checkpoints.
"""

# %%
# A deep stack of blocks
# ----------------------
# Each block is the MLP of a transformer layer: widen the features four times, ReLU,
# narrow them back, add the block's input. Twenty of them make the model. The input
# is a batch of sequences and needs no gradient, as data does not.
import torch
import torch.nn.functional as F
from torch import nn

from effpt.device import describe, pick_device

device = pick_device()
print(describe(device))
torch.manual_seed(0)

batch, seq, width = (8, 512, 1024) if device.type == "cuda" else (4, 64, 128)
depth = 20  # blocks


class Block(nn.Module):
    """Widen four times, ReLU, narrow back, add the input."""

    def __init__(self, width: int):
        super().__init__()
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (batch, seq, width)
        return h + self.down(F.relu(self.up(h)))  # (batch, seq, width)


model = nn.Sequential(*[Block(width) for _ in range(depth)]).to(device)
x = torch.randn(batch, seq, width, device=device)  # (batch, seq, width)
n_params = sum(p.numel() for p in model.parameters())
print(f"{depth} blocks, {n_params:,} parameters, input {tuple(x.shape)}")

# %%
# Count what autograd saves
# -------------------------
# :class:`torch.autograd.graph.saved_tensors_hooks` calls a *pack* hook with every
# tensor an operation saves for the backward pass; here it only collects them. Adding
# up their ``nbytes`` overcounts, because two saved tensors can share one block of
# memory, a storage: a linear layer saves ``weight.t()``, a view of the parameter
# itself, and the output ReLU saves is saved again, reshaped to two dimensions, by the
# next linear layer. So ``saved_bytes`` counts each storage once (storages are told
# apart by address; the list keeps every packed tensor alive until the count, so no
# address is freed and reused meanwhile) and reports the parameters' storages apart:
# they exist whether or not anything is saved.
from torch.autograd.graph import saved_tensors_hooks


def saved_bytes(forward, x: torch.Tensor) -> dict[str, int]:
    """Bytes autograd saves for backward while ``forward(x)`` runs."""
    packed = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        packed.append(t)
        return t  # keep the tensor itself, as autograd does without hooks

    with saved_tensors_hooks(pack, lambda t: t):
        forward(x)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in packed}
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    in_weights = sum(n for ptr, n in storages.items() if ptr in weights)
    return {
        "sum of nbytes": sum(t.nbytes for t in packed),
        "activations": sum(storages.values()) - in_weights,
        "parameters": in_weights,
    }


MiB = 2**20
unit = x.nbytes  # one (batch, seq, width) tensor: the input, or a block's output
plain = saved_bytes(model, x)
for what, n in plain.items():
    print(f"{what:>14}: {n / MiB:8.2f} MiB = {n / unit:5.1f} × the input's bytes")

# %%
# The arithmetic behind these numbers: each block saves its input (one unit) for the
# weight gradient of ``up``, and the ReLU's output (four units) for ReLU's own
# backward and ``down``'s weight gradient: five units per block, 100 for 20 blocks.
# The naive sum counts the ReLU output twice, nine units per block, and adds the
# weights' views. The first block's ``up`` weight is the one weight not saved: it
# would serve only to compute the gradient of the input, which needs none.

# sphinx_gallery_start_ignore
weight = 4 * width * width * x.element_size()  # one weight matrix, up or down
assert plain["activations"] == 5 * depth * unit, plain
assert plain["parameters"] == (2 * depth - 1) * weight, plain
assert plain["sum of nbytes"] == 9 * depth * unit + (2 * depth - 1) * weight, plain
# sphinx_gallery_end_ignore

# %%
# Checkpoint every block
# ----------------------
# :func:`torch.utils.checkpoint.checkpoint` runs a function without keeping what it
# computes inside; it keeps the function's inputs and, during the backward pass, runs
# the function again to get the tensors back. The hook above still counts those inputs:
# ``checkpoint`` saves them as saved tensors, while the tensors saved inside the block
# go to hooks of its own that keep nothing. What remains is one unit per block: the
# input ``x`` and the outputs of the first 19 blocks.
from torch.utils.checkpoint import checkpoint


def every_block(h: torch.Tensor) -> torch.Tensor:
    for block in model:
        h = checkpoint(block, h, use_reentrant=False)
    return h


each = saved_bytes(every_block, x)
for what, n in each.items():
    print(f"{what:>14}: {n / MiB:8.2f} MiB = {n / unit:5.1f} × the input's bytes")
print(f"saved activations: {plain['activations'] / each['activations']:.0f} times fewer bytes")

# sphinx_gallery_start_ignore
assert each == {"sum of nbytes": depth * unit, "activations": depth * unit, "parameters": 0}
# sphinx_gallery_end_ignore

# %%
# Why ``use_reentrant=False``
# ---------------------------
# PyTorch's ``torch.utils.checkpoint`` documentation recommends the non-reentrant form
# and asks callers to pass ``use_reentrant`` explicitly. The reentrant form runs the
# function under ``no_grad`` inside one autograd function whose inputs are only the
# tensors passed to it, not the parameters inside. When no input requires a gradient,
# as with a batch of data, the parameters inside get no gradient, with a warning as
# the only sign.
#
# Only the non-reentrant form also works with :func:`torch.autograd.grad` and
# ``backward(inputs=...)``, accepts detached tensors and nested inputs, and stops
# recomputing once it has the tensors the backward pass needs. Below, only the first
# block is checkpointed, once each way.
import warnings

missing = {}
for reentrant in (True, False):
    model.zero_grad(set_to_none=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        h = checkpoint(model[0], x, use_reentrant=reentrant)  # the first block only
        model[1:](h).square().mean().backward()
    missing[reentrant] = [i for i, block in enumerate(model) if block.up.weight.grad is None]
    print(f"use_reentrant={reentrant}: blocks without a gradient {missing[reentrant]}")
    for w in caught:
        print(f"    {w.category.__name__}: {w.message}")

# sphinx_gallery_start_ignore
assert missing == {True: [0], False: []}, missing
# sphinx_gallery_end_ignore

# %%
# Checkpoint every k-th block
# ---------------------------
# :func:`torch.utils.checkpoint.checkpoint_sequential` cuts a sequence of ``depth``
# modules into ``segments`` runs of ``depth // segments`` modules each (the last run
# takes any rest) and checkpoints every run but the last, whose activations the
# backward pass needs first anyway. With ``s`` segments of ``depth / s`` blocks it
# keeps ``s - 1`` inputs and all five units per block of the last segment:
# ``s - 1 + 5 · depth / s`` units. One segment checkpoints nothing, so it saves what
# the plain model saves.
from torch.utils.checkpoint import checkpoint_sequential


def in_segments(segments: int):
    def forward(h: torch.Tensor) -> torch.Tensor:
        return checkpoint_sequential(model, segments, h, use_reentrant=False)

    return forward


counts = [1, 2, 4, 5, 10, 20]  # the divisors of depth
by_segments = {s: saved_bytes(in_segments(s), x)["activations"] for s in counts}
for s, n in by_segments.items():
    label, arithmetic = (f"{s} segments" if s > 1 else "1 segment"), s - 1 + 5 * depth / s
    print(f"{label:>11}: {n / MiB:5.2f} MiB = {n / unit:5.1f} units (arithmetic {arithmetic:5.1f})")
n = each["activations"]
print(f"every block: {n / MiB:5.2f} MiB = {n / unit:5.1f} units")

# sphinx_gallery_start_ignore
assert all(n == (s - 1 + 5 * depth // s) * unit for s, n in by_segments.items()), by_segments
assert min(by_segments, key=by_segments.get) == 10, by_segments
# sphinx_gallery_end_ignore

# %%
# Fewer segments keep fewer inputs but a longer last segment; more segments the other
# way round. The sum ``(s - 1) · i + (depth / s) · a``, with ``i`` the bytes of a
# segment's input and ``a`` the bytes one block saves, is smallest near
# ``s = sqrt(depth · a / i)``. When a block saves about as much as its input, that is
# ``s = sqrt(depth)``, the square-root rule of Chen, Xu, Zhang and Guestrin ("Training Deep Nets with Sublinear
# Memory Cost", 2016). These blocks save five times their input, so the rule moves to
# ``sqrt(5 · 20) = 10`` segments, the minimum counted above.
#
# The rule is about what stays between the two passes; during the backward pass each
# checkpointed segment is recomputed in turn, briefly holding its own activations
# again.

# %%
# The same gradients, bit for bit
# -------------------------------
# The recomputation runs the same operations on the same inputs, so it produces the
# same activations bit for bit, and the backward pass then runs the same graph in the
# same order. The non-reentrant form also checks that the recomputed tensors match the
# saved ones in shape, dtype and device. Checkpointing is therefore not an
# approximation; the gradients are compared with :func:`torch.equal`, not with a
# tolerance.


def gradients(forward) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    forward(x).square().mean().backward()
    return [p.grad.clone() for p in model.parameters()]


reference = gradients(model)
identical = {}
for name, forward in {"every block": every_block, "10 segments": in_segments(10)}.items():
    grads = gradients(forward)
    identical[name] = all(torch.equal(g, r) for g, r in zip(grads, reference, strict=True))
    gap = max((g - r).abs().max().item() for g, r in zip(grads, reference, strict=True))
    print(
        f"{name:>11}: every gradient equal to the plain model's: {identical[name]} (largest gap {gap})"
    )

# sphinx_gallery_start_ignore
assert all(identical.values()), identical
# sphinx_gallery_end_ignore

# %%
# What the recomputation costs in time
# ------------------------------------
# By the count of multiplications, a forward pass is a third of a step, since a linear
# layer's backward pass does two products as large as its forward one. A checkpointed
# block runs its forward pass again, but the non-reentrant form stops as soon as it
# has every tensor the backward pass needs. Here the last one is ``down``'s input,
# saved before ``down`` multiplies, so ``down``'s product is skipped: the
# recomputation is about half a forward pass by that count, plus the Python work of
# each checkpoint.
#
# :func:`effpt.bench.compare` times whole training steps of every variant, taking
# turns, and the forward pass alone, since a machine's shares can differ from the count
# (how it measures: :doc:`/explanations/timing`); with ``s`` segments,
# ``(s - 1) / s`` of the blocks are recomputed. Predict first: on your machine, does
# checkpointing every block make a step slower by less than half? That expectation
# fails where the checkpoints' Python work or the recomputed products take
# half a step or more. On a CPU a probe first times a step at this machine's threads
# and on one: cores busy with other work make a pool of threads wait for each other,
# and the comparison runs on the faster count.
from effpt.bench import compare, faster_thread_count
from effpt.expect import expect
from effpt.records import speedup

variants = {"no checkpoints": model, "every block": every_block}
variants |= {f"{s} segments": in_segments(s) for s in counts[1:]}


def training_step(forward):
    def step():
        model.zero_grad(set_to_none=True)
        forward(x).square().mean().backward()

    return step


steps = {name: training_step(forward) for name, forward in variants.items()}

# The early stop, counted: forward hooks tally how often each block's two layers run
# in one training step with every block checkpointed. ``up`` runs in the forward pass
# and again in the recomputation; ``down`` runs in the forward pass only.
runs = {"up": 0, "down": 0}


def count(name):
    def hook(module, inputs, output):
        runs[name] += 1

    return hook


hooks = [
    getattr(block, name).register_forward_hook(count(name)) for block in model for name in runs
]
steps["every block"]()
for hook in hooks:
    hook.remove()
print(
    f"one step, every block checkpointed ({depth} blocks): up ran {runs['up']}×, down {runs['down']}×"
)

# sphinx_gallery_start_ignore
assert runs == {"up": 2 * depth, "down": depth}, runs
# sphinx_gallery_end_ignore
machine_threads = torch.get_num_threads()
torch.set_num_threads(faster_thread_count(steps["no checkpoints"], device))
records = compare(
    f"training step of {depth} blocks, input {tuple(x.shape)}",
    {**steps, "forward pass alone": lambda: model(x)},
    device=device,
    number=1,  # a step is long enough to time alone: no calls spent sizing blocks
    budget_s=0.3,  # per variant; eight of them
)
by_name = {r.variant: r for r in records}
forward_share = speedup(by_name["no checkpoints"], by_name["forward pass alone"])  # step / forward
print(
    f"one forward pass takes {1 / forward_share.value:.2f} of a step without checkpoints "
    f"(medians; the interval allows {1 / forward_share.high:.2f}–{1 / forward_share.low:.2f})"
)
slowdown = speedup(by_name["every block"], by_name["no checkpoints"])  # time ratio
expect("checkpointing every block makes a training step slower", slowdown, above=1.0, device=device)
_ = expect(
    "checkpointing every block costs less than half a step more", slowdown, below=1.5, device=device
)

# %%
# The recomputed kernels gain from the intra-op thread pool as the rest of the step
# does; each checkpoint's Python work does not, so the ratio can differ between one
# thread and many (:doc:`/explanations/timing` explains the pool and the load average
# printed first). Unless the probe chose one thread already, the two steps are
# therefore timed again on one thread, and the thread count is then restored.
import os

if hasattr(os, "getloadavg"):
    print(f"load average, last minute: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
from effpt.bench import on_one_thread

one = on_one_thread(
    lambda: compare(
        f"training step of {depth} blocks, 1 thread",
        {name: steps[name] for name in ("no checkpoints", "every block")},
        device=device,
    ),
    device,
)
if one is not None:  # None: a GPU, or one thread already; it printed which
    timed, one_thread = one
    _ = expect(
        "checkpointing every block makes a training step slower, on one thread",
        speedup(timed[1], timed[0]),
        above=1.0,
        device=one_thread,  # the machine as it ran: one thread
    )
torch.set_num_threads(machine_threads)

# %%
# Peak memory
# -----------
# On CUDA, :func:`torch.cuda.max_memory_allocated` reports the most memory the
# allocator has held for tensors since :func:`torch.cuda.reset_peak_memory_stats`. The
# peak of a step also holds the weights' gradients and the backward pass's
# temporaries, so it falls by less than the saved bytes do. The expectation:
# checkpointing every block lowers the peak.
#
# A CPU shows the saved bytes (the same on every device) but not this peak: torch
# keeps no peak counter for CPU memory, and the process's resident memory also holds
# Python and the allocator's free blocks.
# The broadcasting page (:doc:`/auto_examples/broadcasting/plot_broadcast_merge`)
# reads a CPU peak from the profiler's memory events instead.
if device.type == "cuda":
    peak = {}
    for name in ("every block", "no checkpoints"):
        steps[name]()  # warm up: libraries allocate their workspaces once
        model.zero_grad(set_to_none=True)  # the step's gradients count in its peak
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)  # weights, input, tensors kept above
        steps[name]()
        torch.cuda.synchronize(device)
        peak[name] = torch.cuda.max_memory_allocated(device) - start
        print(
            f"{name:>14}: peak {peak[name] / MiB:8.1f} MiB above the {start / MiB:.1f} MiB before the step"
        )
    _ = expect(
        "checkpointing every block lowers the peak memory of a training step",
        peak["no checkpoints"] / peak["every block"],
        above=1.0,
        device=device,
    )
else:
    print(
        f"peak memory: measured on CUDA only; on {device.type} the saved bytes above are the measure"
    )

# %%
# Where to place checkpoints
# --------------------------
# The figure sets the two costs against each other, with bytes in units of the input's
# size so that the axes read the same on every device: on the left, the bytes saved
# against the number of segments, counted and from the arithmetic; on the right, the
# same bytes (on a log scale) against the time of a step relative to the step without
# checkpoints, with the interval the noise allows. Points low and to the left are cheap
# in both; 5 and 20 segments keep the same bytes, so their marks share a row.
import matplotlib.pyplot as plt

plain_record = by_name["no checkpoints"]
saved = {"no checkpoints": plain["activations"], "every block": each["activations"]}
saved |= {f"{s} segments": by_segments[s] for s in counts[1:]}
ratio = {name: speedup(by_name[name], plain_record) for name in saved}

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
grid = torch.linspace(1, depth, 200)
left.plot(grid, grid - 1 + 5 * depth / grid, color="0.6", label="s − 1 + 5 · 20 / s")
left.plot(counts, [by_segments[s] / unit for s in counts], "o", label="counted")
left.axvline((5 * depth) ** 0.5, color="C2", linestyle=":", label="sqrt(5 · 20) = 10")
left.set(xscale="log", xlabel="segments s", ylabel="saved (× the input's bytes)")
left.set(title="checkpoint_sequential")
left.set_xticks(counts, [str(s) for s in counts])
left.legend(fontsize="small")
markers = "osv^<>D"
for (name, r), marker in zip(ratio.items(), markers, strict=True):
    spread = [[r.value - r.low], [r.high - r.value]]  # the interval around the median ratio
    right.errorbar(r.value, saved[name] / unit, xerr=spread, fmt=marker, capsize=3, label=name)
right.axvline(1.0, color="0.6", linestyle=":")
right.set(xlabel="step time / step time without checkpoints", ylabel="saved (× the input's bytes)")
right.set(yscale="log", title="Memory against time")
right.set_yticks([20, 25, 30, 50, 100], ["20", "25", "30", "50", "100"])
right.minorticks_off()
fig.legend(*right.get_legend_handles_labels(), loc="outside right center", fontsize="small")
plt.show()

# %%
# On the left, the counted bytes fall on the arithmetic, lowest at 10 segments, where
# the line is flat: 5 or 20 segments cost 24 units instead of 19. Checkpointing every
# block keeps 20 units and recomputes every block, one more than 20 segments, which
# leaves the last block alone. On the right, overlapping intervals mean the machine
# could not tell the variants apart. The saved bytes do not depend on the machine:
# choose the segment count from them and the model's shape, then check the time on the
# machine that trains.

# %%
# Summary
# -------
# - Count what autograd saves with :class:`~torch.autograd.graph.saved_tensors_hooks`,
#   one storage at a time: views such as ``weight.t()`` and reshaped activations share
#   storage, and a plain sum of ``nbytes`` counts them twice.
#
# - ``checkpoint(block, h, use_reentrant=False)`` keeps only ``h`` and recomputes the
#   block during the backward pass; the gradients are equal bit for bit.
# - Pass ``use_reentrant=False``: the reentrant form gives the parameters inside no
#   gradient when no input requires one, and supports fewer ways to run the backward pass.
# - ``checkpoint_sequential(model, s, x, use_reentrant=False)`` keeps ``s - 1`` inputs
#   plus the last segment; ``s = sqrt(depth · a / i)`` balances the two, ``sqrt(depth)``
#   when a block saves about its input's size.
#
# - The price is a second forward pass of each checkpointed block, up to the last tensor
#   the backward pass needs: measure it, and the peak memory on a GPU, on the machine
#   that trains.
