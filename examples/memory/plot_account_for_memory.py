"""
Account for a training step's memory
====================================

.. effpt-before-you-start::
   :learn: - Predict the bytes of parameters, gradients, Adam's state and saved activations
             from the model's shapes.
           - Measure each category through one step, and compare the prediction with what
             the allocator reports.
           - On CUDA, read ``memory_allocated``, ``memory_reserved``, the peak and the
             driver's view, and draw a memory snapshot.
           - Tell what ``torch.cuda.empty_cache()`` gives back and what it cannot.
   :read-first: :doc:`/auto_examples/performance/plot_activation_checkpointing`, which counts
                saved tensors one storage at a time.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU). The allocator's statistics, the
           snapshot and ``empty_cache`` are CUDA sections; elsewhere each prints why it
           did not run.

An out-of-memory error names the allocation that failed, not the memory that was already
taken. A training step holds four kinds of tensors: the parameters, their gradients, the
optimizer's state and the activations autograd saves for the backward pass. This page
predicts each from the model's shapes, measures them through one step, and checks the
prediction against the allocator's own count.
"""

# %%
# A small model and one batch
# ---------------------------
# Three linear layers with ReLU between them, trained with Adam on a classification loss.
# All tensors are float32: 4 bytes per element.
import torch
import torch.nn.functional as F
from torch import nn

from effpt.device import describe, pick_device

device = pick_device()
print(describe(device))
torch.manual_seed(0)

batch, d_in, hidden, classes = (
    (1024, 1024, 4096, 10) if device.type == "cuda" else (64, 256, 512, 10)
)
model = nn.Sequential(
    nn.Linear(d_in, hidden),
    nn.ReLU(),
    nn.Linear(hidden, hidden),
    nn.ReLU(),
    nn.Linear(hidden, classes),
).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(batch, d_in, device=device)  # (batch, d_in)
y = torch.randint(classes, (batch,), device=device)  # (batch,) class indices
print(f"batch {batch}, layers {d_in} -> {hidden} -> {hidden} -> {classes}")

# %%
# The prediction from the shapes
# ------------------------------
# Parameters and gradients have the same shapes. :class:`torch.optim.Adam` keeps two
# tensors of each parameter's shape (``exp_avg`` and ``exp_avg_sq``) and a one-element
# ``step`` counter per parameter, which stays on the CPU unless the optimizer is
# ``fused`` or ``capturable``. The saved activations are what each operation keeps for its
# backward pass: each ReLU saves its output, which the next linear layer saves again as
# its input (one storage, counted once); the loss saves its log-probabilities and a
# one-element total weight. The first layer also saves ``x``, but the batch is there
# anyway and is not counted.
F32 = 4
n_params = d_in * hidden + hidden + hidden * hidden + hidden + hidden * classes + classes
predicted = {
    "parameters": n_params * F32,
    "gradients": n_params * F32,
    "Adam state": 2 * n_params * F32 + (6 * F32 if device.type == "cpu" else 0),
    "saved activations": (2 * batch * hidden + batch * classes + 1) * F32,
}
MiB = 2**20
for what, n in predicted.items():
    print(f"{what:>17}: {n / MiB:8.3f} MiB predicted")

# %%
# Count the tensors themselves
# ----------------------------
# The parameters, gradients and optimizer state are tensors the program can list.
# The saved activations are not: they sit inside the autograd graph. A pack hook of
# :class:`torch.autograd.graph.saved_tensors_hooks` sees each one as it is saved; this
# one records each storage's size by address and keeps nothing alive. A warm-up step on
# a copy of the model lets libraries allocate their workspaces once, before counting.
import copy

from torch.autograd.graph import saved_tensors_hooks

warm = copy.deepcopy(model)
F.cross_entropy(warm(x), y).backward()
del warm

saved = {}  # storage address -> bytes


def pack(t: torch.Tensor) -> torch.Tensor:
    saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return t


def on_device(tensors) -> int:
    return sum(t.nbytes for t in tensors if t.device == device)


with saved_tensors_hooks(pack, lambda t: t):
    loss = F.cross_entropy(model(x), y)
not_activations = {p.untyped_storage().data_ptr() for p in model.parameters()}
not_activations |= {x.untyped_storage().data_ptr(), y.untyped_storage().data_ptr()}
loss.backward()
optimizer.step()
counted = {
    "parameters": on_device(model.parameters()),
    "gradients": on_device(p.grad for p in model.parameters()),
    "Adam state": on_device(t for s in optimizer.state.values() for t in s.values()),
    "saved activations": sum(n for ptr, n in saved.items() if ptr not in not_activations),
}
for what, n in counted.items():
    print(
        f"{what:>17}: {n / MiB:8.3f} MiB counted, prediction {'exact' if n == predicted[what] else 'off'}"
    )

# sphinx_gallery_start_ignore
assert counted == predicted, (counted, predicted)
# sphinx_gallery_end_ignore

# %%
# Adam's state alone is twice the parameters: a model trained with Adam in float32 needs
# four times its parameters' bytes before the first activation is saved. The activations
# grow with the batch; the other three categories do not.

# %%
# What the allocator sees through the step
# ----------------------------------------
# The counts above are the page's own arithmetic. The allocator counts what was really
# allocated, rounding and workspaces included. On CUDA and MPS the running total is a
# function call (:func:`torch.cuda.memory_allocated`,
# :func:`torch.mps.current_allocated_memory`). The CPU allocator keeps none, but the
# profiler run with ``profile_memory=True`` records each allocation with a running
# total after it, counted from where the last profiled run left it; the step's figures
# are taken above the total before its first allocation. ``mark`` (CUDA, MPS) or a
# zero-length :func:`~torch.profiler.record_function` span (CPU) notes where each phase
# ends. The step starts with the gradients set to ``None`` and a fresh optimizer, so
# that gradients and state are allocated inside it.
import json
import os
import tempfile
from pathlib import Path

from torch.profiler import ProfilerActivity, profile, record_function

PHASES = ("after forward", "after backward", "after step")


def measured_step() -> dict[str, int]:
    """Bytes allocated on ``device`` above the level before the step, after each phase."""
    global optimizer
    model.zero_grad(set_to_none=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    totals = {}
    counter = {"cuda": torch.cuda.memory_allocated, "mps": torch.mps.current_allocated_memory}
    if device.type in counter:
        base = counter[device.type]()
        mark = lambda name: totals.__setitem__(name, counter[device.type]() - base)
        loss = F.cross_entropy(model(x), y)
        mark(PHASES[0])
        loss.backward()
        mark(PHASES[1])
        optimizer.step()
        mark(PHASES[2])
        return totals
    os.environ["KINETO_LOG_LEVEL"] = "6"  # silence the profiler's start and stop lines
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        loss = F.cross_entropy(model(x), y)
        with record_function(PHASES[0]):
            pass
        loss.backward()
        with record_function(PHASES[1]):
            pass
        optimizer.step()
        with record_function(PHASES[2]):
            pass
    with tempfile.TemporaryDirectory() as tmp:
        prof.export_chrome_trace(str(Path(tmp) / "trace.json"))
        events = json.loads((Path(tmp) / "trace.json").read_text(encoding="utf-8"))["traceEvents"]
    memory = sorted(  # (time, running total after the event, the event's bytes)
        (e["ts"], e["args"]["Total Allocated"], e["args"]["Bytes"])
        for e in events
        if e.get("name") == "[memory]" and e["args"].get("Device Type") == 0  # the CPU
    )
    base = memory[0][1] - memory[0][2]  # the total before the step's first allocation
    for e in events:
        if e.get("name") in PHASES and e.get("ph") == "X":
            totals[e["name"]] = max((ts, t) for ts, t, _ in memory if ts <= e["ts"])[1] - base
    return totals


allocated = measured_step()
print(
    "\n".join(
        f"{k:>15}: {v / MiB:8.3f} MiB allocated above the start" for k, v in allocated.items()
    )
)

# %%
# The prediction for each phase: after the forward pass, the saved activations and the
# one-element loss; after the backward pass, the gradients instead of the saved
# activations (autograd frees them as it goes); after the step, Adam's state as well.
# The live ``loss`` counts in all three.
expected_at = {
    "after forward": predicted["saved activations"] + F32,
    "after backward": predicted["gradients"] + F32,
    "after step": predicted["gradients"] + predicted["Adam state"] + F32,
}
for phase in PHASES:
    print(f"{phase:>15}: allocator / prediction = {allocated[phase] / expected_at[phase]:.4f}")

# %%
# Will the allocator's total land within 5 % of the arithmetic, on this device? The CPU
# allocator asks ``malloc`` for exactly each tensor's bytes; CUDA's rounds every block
# up to a multiple of 512 bytes, and a library may allocate a workspace of its own
# during the step. The measure is the larger of the ratio and its inverse:
from effpt.expect import expect

off = max(max(allocated[p] / expected_at[p], expected_at[p] / allocated[p]) for p in PHASES)
_ = expect(
    "the allocator's total after each phase of the step is within 5 % of the prediction from shapes",
    off,
    below=1.05,
    device=device,
)

# %%
# The step in one figure
# ----------------------
# Each column stacks the predicted categories alive at the end of a phase; the black point
# is the allocator's total. The parameters existed before the step and are drawn below
# the line the allocator counts from.
import matplotlib.pyplot as plt

alive = {
    "after forward": ("saved activations",),
    "after backward": ("gradients",),
    "after step": ("gradients", "Adam state"),
}
colors = {"parameters": "0.75", "gradients": "C0", "Adam state": "C1", "saved activations": "C2"}
fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
for i, phase in enumerate(PHASES):
    ax.bar(i, -predicted["parameters"] / MiB, color=colors["parameters"], width=0.6)
    bottom = 0.0
    for what in alive[phase]:
        ax.bar(i, predicted[what] / MiB, bottom=bottom, color=colors[what], width=0.6)
        bottom += predicted[what] / MiB
    ax.plot(i, allocated[phase] / MiB, "ko")
for what, color in colors.items():
    ax.bar(0, 0, color=color, label=what + (" (before the step)" if what == "parameters" else ""))
ax.plot([], [], "ko", label="allocator's total")
ax.axhline(0, color="k", linewidth=0.8)
ax.set_xticks(range(len(PHASES)), PHASES)
ax.set(ylabel="MiB above the step's start", title=f"One Adam step on {device.type}")
ax.legend(fontsize="small", loc="upper left")
plt.show()

# %%
# Allocated, reserved, peak and the driver
# ----------------------------------------
# CUDA's caching allocator keeps freed blocks for reuse instead of returning them to the
# driver. :func:`torch.cuda.memory_allocated` counts the bytes in tensors,
# :func:`torch.cuda.memory_reserved` the bytes the allocator holds (tensors and cached
# free blocks), :func:`torch.cuda.max_memory_allocated` the highest allocated count since
# the last :func:`torch.cuda.reset_peak_memory_stats`. :func:`torch.cuda.mem_get_info`
# asks the driver: its "used" also holds the CUDA context, libraries' own memory and other
# processes, which no torch counter sees.
if device.type == "cuda":
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    torch.cuda.synchronize(device)
    free, total = torch.cuda.mem_get_info(device)
    stats = {
        "allocated": torch.cuda.memory_allocated(device),
        "peak allocated": torch.cuda.max_memory_allocated(device),
        "reserved": torch.cuda.memory_reserved(device),
        "driver: used": total - free,
    }
    print("\n".join(f"{k:>15}: {v / MiB:10.1f} MiB" for k, v in stats.items()))
    # sphinx_gallery_start_ignore
    assert (
        stats["allocated"] <= stats["peak allocated"] <= stats["reserved"] <= stats["driver: used"]
    )
    # sphinx_gallery_end_ignore
else:
    print(f"on this {device.type} build: the caching allocator's statistics need CUDA")

# %%
# On CUDA the peak lies above the count after the step: the gradients and Adam's state
# from the step before are still alive when this step's forward and backward passes add
# the saved activations and their temporaries.
#
# A memory snapshot
# -----------------
# ``torch.cuda.memory._record_memory_history()`` makes the allocator log every allocation
# and free with a stack trace; ``torch.cuda.memory._dump_snapshot(path)`` writes the log to
# a file that https://pytorch.org/memory_viz draws in a browser. The functions are
# private (underscored) and their arguments have changed between releases; the page
# reads the same log with ``torch.cuda.memory._snapshot()`` and draws the live bytes
# after each event of one step.
if device.type == "cuda":
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    model.zero_grad(set_to_none=True)
    torch.cuda.synchronize(device)
    snapshot = torch.cuda.memory._snapshot()
    with tempfile.TemporaryDirectory() as tmp:
        torch.cuda.memory._dump_snapshot(str(Path(tmp) / "snapshot.pickle"))
        print(f"snapshot file: {(Path(tmp) / 'snapshot.pickle').stat().st_size:,} bytes")
    torch.cuda.memory._record_memory_history(enabled=None)  # stop recording
    trace = snapshot["device_traces"][
        torch.cuda.current_device() if device.index is None else device.index
    ]
    # trace events carry the requested sizes, not the rounded blocks memory_allocated counts
    live, level = [], torch.cuda.memory_stats(device)["requested_bytes.all.current"]
    for event in reversed(trace):  # walk back from the level now to the level before
        live.append(level)
        level -= {"alloc": event["size"], "free_completed": -event["size"]}.get(event["action"], 0)
    live.reverse()
    fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
    ax.plot([v / MiB for v in live], ".-", markersize=3)
    ax.set(
        xlabel="allocator event",
        ylabel="MiB requested by tensors",
        title="One step, from the memory snapshot",
    )
    plt.show()
    print(f"{len(trace)} events; peak {max(live) / MiB:.1f} MiB, last {live[-1] / MiB:.1f} MiB")
else:
    print(f"on this {device.type} build: the memory snapshot needs CUDA")

# %%
# What ``empty_cache`` gives back
# -------------------------------
# Deleting the model, its optimizer and the batch frees their tensors: the allocated count
# drops, the reserved count does not, and the driver sees no change, because the blocks
# stay in the allocator's cache for the next allocation. :func:`torch.cuda.empty_cache`
# returns the cached blocks that hold no tensor. It cannot return memory that live tensors
# occupy, nor a block one live tensor keeps partly busy, nor the CUDA context. It helps
# another process or library on the same GPU; it gives this process nothing it could not
# already reuse.
if device.type == "cuda":

    def reading() -> tuple[int, int, int]:
        free, total = torch.cuda.mem_get_info(device)
        return torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device), total - free

    steps = {"before del": reading()}
    del model, optimizer, loss, x, y
    steps["after del"] = reading()
    torch.cuda.empty_cache()
    steps["after empty_cache"] = reading()
    for name, (a, r, u) in steps.items():
        print(
            f"{name:>18}: allocated {a / MiB:8.1f}, reserved {r / MiB:8.1f}, driver used {u / MiB:8.1f} MiB"
        )
    # sphinx_gallery_start_ignore
    assert steps["after del"][1] == steps["before del"][1]  # del returns nothing to the driver
    assert steps["after empty_cache"][1] <= steps["after del"][1]
    # sphinx_gallery_end_ignore
else:
    print(
        f"on this {device.type} build: empty_cache needs CUDA. The CPU allocator caches nothing: "
        "a freed tensor goes straight back to the C library's malloc, which may keep it for reuse."
    )

# %%
# Summary
# -------
# - A float32 model trained with Adam holds four times its parameters' bytes (weights,
#   gradients, two moments) plus the saved activations, which grow with the batch.
# - Predict each category from the shapes, and count the saved activations with
#   :class:`~torch.autograd.graph.saved_tensors_hooks`, one storage at a time.
# - On CUDA, ``memory_allocated`` counts tensors, ``memory_reserved`` what the caching
#   allocator holds, ``max_memory_allocated`` the peak; ``mem_get_info`` shows the
#   driver's view, context included.
# - ``torch.cuda.memory._record_memory_history`` and ``_dump_snapshot`` log every
#   allocation for https://pytorch.org/memory_viz.
# - ``empty_cache()`` returns cached free blocks to the driver, never memory live tensors
#   hold.
# - Related reading: PyTorch's notes on
#   `CUDA memory management <https://docs.pytorch.org/docs/stable/notes/cuda.html#memory-management>`__
#   and `Understanding CUDA memory usage <https://docs.pytorch.org/docs/stable/torch_cuda_memory.html>`__.
#   The next page, :doc:`plot_memory_that_never_comes_back`, finds memory a program
#   forgets to free.
