"""
Find memory that never comes back
=================================

.. effpt-before-you-start::
   :learn: - Reproduce four classic leaks of training code and measure each step's memory.
           - Find what holds the memory with the autograd graph, weak references and
             ``gc.get_referrers``.
           - Fix each leak, and check that memory then stays flat.
           - On CUDA, measure fragmentation from varying batch shapes and what
             ``expandable_segments:True`` changes.
   :read-first: :doc:`plot_account_for_memory`, which says what a step should hold.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU). On the CPU the profiler counts
           the bytes; the fragmentation section needs CUDA and starts two Python
           processes there; elsewhere it prints why it did not run.

A program whose memory grows a little every step runs out of it after an hour, far from
the line that caused it. Four mistakes cause most such growth in PyTorch code: a sum that
keeps every step's autograd graph, a list of outputs, a hook that stores what it sees,
and a reference cycle that only the garbage collector frees. This page makes each one
grow, finds what holds the memory, and fixes it.
"""

# %%
# A model, a batch and a memory meter
# -----------------------------------
# ``live_bytes(step, steps)`` runs ``step(i)`` repeatedly and returns the bytes allocated
# on the device after each call, above the level before the first. On CUDA and MPS the
# allocator's running total is a function call; on the CPU, the profiler run with
# ``profile_memory=True`` records it with each allocation, and a zero-length
# ``record_function`` marks the end of each step (:doc:`plot_account_for_memory` reads
# the same events).
import json
import os
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from effpt.device import describe, pick_device

device = pick_device()
print(describe(device))
torch.manual_seed(0)

batch, d_in, hidden = (512, 1024, 4096) if device.type == "cuda" else (32, 64, 256)
model = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_in)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(batch, d_in, device=device)  # (batch, d_in)
y = torch.randn(batch, d_in, device=device)  # (batch, d_in): the model learns to map x to y
STEPS = 8


def live_bytes(step, steps: int = STEPS) -> list[int]:
    if device.type in ("cuda", "mps"):
        now = (
            torch.cuda.memory_allocated
            if device.type == "cuda"
            else torch.mps.current_allocated_memory
        )
        base, after = now(), []
        for i in range(steps):
            step(i)
            after.append(now() - base)
        return after
    os.environ["KINETO_LOG_LEVEL"] = "6"  # silence the profiler's start and stop lines
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for i in range(steps):
            step(i)
            with record_function(f"end of step {i}"):
                pass
    with tempfile.TemporaryDirectory() as tmp:
        prof.export_chrome_trace(str(Path(tmp) / "trace.json"))
        events = json.loads((Path(tmp) / "trace.json").read_text(encoding="utf-8"))["traceEvents"]
    memory = sorted(  # (time, running total after the event, the event's bytes)
        (e["ts"], e["args"]["Total Allocated"], e["args"]["Bytes"])
        for e in events
        if e.get("name") == "[memory]" and e["args"].get("Device Type") == 0  # the CPU
    )
    base = memory[0][1] - memory[0][2] if memory else 0  # the total before the first event
    ends = sorted(e["ts"] for e in events if e.get("name", "").startswith("end of step"))
    return [
        max([(ts, t) for ts, t, _ in memory if ts <= end], default=(0, base))[1] - base
        for end in ends
    ]


def train_step() -> torch.Tensor:
    optimizer.zero_grad(set_to_none=False)  # the gradients keep their memory between steps
    out = model(x)  # (batch, d_in)
    loss = F.mse_loss(out, y)
    loss.backward()
    optimizer.step()
    return out, loss


train_step()  # the first step allocates the gradients; the leaks start from the second
KiB = 2**10
results = {}  # leak -> (bytes per step, leaky; bytes per step, fixed)

# %%
# A sum of losses that keeps every graph
# --------------------------------------
# A validation loop run without :class:`torch.no_grad` builds an autograd graph for every
# batch, and the graph keeps the activations the backward pass would need.
# ``total += loss`` makes ``total`` depend on every batch's loss, so no graph is ever
# freed. ``loss.item()`` turns the loss into a Python float, which depends on nothing.
totals = {}


def sum_loss_tensor(i: int) -> None:
    totals["leaky"] = totals.get("leaky", 0) + F.mse_loss(model(x), y)


def sum_loss_item(i: int) -> None:
    with torch.no_grad():
        totals["fixed"] = totals.get("fixed", 0) + F.mse_loss(model(x), y).item()


results["sum of losses"] = (live_bytes(sum_loss_tensor), live_bytes(sum_loss_item))
for name, per_step in zip(
    ("total += loss", "total += loss.item()"), results["sum of losses"], strict=True
):
    print(f"{name:>21}: {[round(b / KiB) for b in per_step]} KiB after each step")

# %%
# Found: the graph hangs off ``total.grad_fn``. Walking it counts the operations kept
# alive; each validation batch adds the same number.


def graph_nodes(t: torch.Tensor) -> int:
    seen, todo = set(), [t.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo.extend(next_node for next_node, _ in node.next_functions)
    return len(seen)


print(f"graph behind the leaky total: {graph_nodes(totals['leaky'])} nodes after {STEPS} batches")

# sphinx_gallery_start_ignore
fixed = results["sum of losses"][1]
assert max(fixed) == min(fixed), fixed  # the fixed loop's memory stays flat
assert results["sum of losses"][0][-1] > results["sum of losses"][0][0] > 0
assert isinstance(totals["fixed"], float)
# sphinx_gallery_end_ignore

# %%
# The same ``total += loss`` in a *training* loop, after ``loss.backward()``, holds less:
# the backward pass frees the saved activations, and what grows is the chain of graph
# nodes in host memory. ``graph_nodes`` above would count them growing just the same.
#
# Outputs kept in a list
# ----------------------
# Keeping each step's output for a metric at the end of the epoch keeps every output
# tensor and its graph. A weak reference (``weakref.ref``) to each step's output
# counts the outputs still alive without keeping them: each step of the leaky loop adds
# one. Compute the metric as you go, as a number, and nothing accumulates. When you need
# the outputs themselves, keep ``out.detach().cpu()`` and budget for their bytes.
import gc
import weakref

outputs, sse = [], [0.0]
watched = {"leaky": [], "fixed": []}  # weak references to each step's output


def keep_outputs(i: int) -> None:
    out, _ = train_step()
    outputs.append(out)
    watched["leaky"].append(weakref.ref(out))


def keep_a_number(i: int) -> None:
    out, _ = train_step()
    sse[0] += ((out.detach() - y) ** 2).sum().item()
    watched["fixed"].append(weakref.ref(out))


results["outputs in a list"] = (live_bytes(keep_outputs), live_bytes(keep_a_number))
alive = {k: sum(r() is not None for r in refs) for k, refs in watched.items()}
print(f"outputs still alive after {STEPS} steps: leaky {alive['leaky']}, fixed {alive['fixed']}")
leaky, fixed = results["outputs in a list"]
print(
    f"one output: {outputs[0].nbytes} bytes; per step, leaky: {(leaky[-1] - leaky[0]) / (STEPS - 1):.0f} bytes, "
    f"fixed: {(fixed[-1] - fixed[0]) / (STEPS - 1):.0f} bytes"
)

# sphinx_gallery_start_ignore
assert alive == {"leaky": STEPS, "fixed": 0}, alive
assert max(fixed) == min(fixed), fixed
# sphinx_gallery_end_ignore

# %%
# Found: ``gc.get_referrers()`` lists the objects that refer to a tensor. For the
# first output it finds the list (the module's namespace holds the list, not the tensor):
holders = [
    type(r).__name__ + (f" of {len(r)}" if type(r) is list else "")
    for r in gc.get_referrers(outputs[0])
]
print(f"what refers to the first output: {holders}")
outputs.clear()

# sphinx_gallery_start_ignore
assert f"list of {STEPS}" in holders
# sphinx_gallery_end_ignore

# %%
# A hook that stores what it sees
# -------------------------------
# A forward hook (:meth:`torch.nn.Module.register_forward_hook`) that appends a layer's
# output to a list, to inspect the activations, keeps one (batch, hidden) tensor per
# step for as long as the hook and the list live. The fix keeps only the latest,
# detached, and removes the hook when done: a ``RemovableHandle`` is what
# ``register_forward_hook`` returns.
stored = []
handle = model[1].register_forward_hook(lambda _module, _args, out: stored.append(out))
leaky = live_bytes(lambda _i: train_step())
handle.remove()
print(
    f"hooks on the ReLU after remove(): {len(model[1]._forward_hooks)}; stored: {len(stored)} tensors"
)
latest = {}
handle = model[1].register_forward_hook(
    lambda _module, _args, out: latest.update(relu=out.detach())
)
results["a hook that stores"] = (leaky, live_bytes(lambda _i: train_step()))
handle.remove()
stored.clear()
print(
    f"one activation: {batch * hidden * 4 / KiB:.0f} KiB; per step, leaky: "
    f"{(leaky[-1] - leaky[0]) / (STEPS - 1) / KiB:.0f} KiB"
)

# sphinx_gallery_start_ignore
fixed = results["a hook that stores"][1]
assert max(fixed) == min(fixed), fixed
assert leaky[-1] - leaky[0] >= (STEPS - 1) * batch * hidden * 4
# sphinx_gallery_end_ignore

# %%
# A reference cycle that only ``gc`` frees
# ----------------------------------------
# CPython frees an object when its reference count drops to zero. Objects that refer to
# each other never get there; the cyclic garbage collector finds them, but it runs after
# a number of new Python objects (``gc.get_threshold()``), not when the device's memory
# runs low, so a cycle that holds a large GPU tensor can exhaust the GPU first. Here a
# step's log record refers to itself; automatic collection is switched off while the loop
# runs, to show what a cycle holds between two collections. The fix breaks the cycle.
gc_was_enabled = gc.isenabled()
gc.disable()
try:
    in_cycles, logged = [], []  # weak references to the outputs the records hold; steps

    def record_with_cycle(i: int) -> None:
        out, _ = train_step()
        record = {"step": i, "out": out}
        record["self"] = record  # e.g. a callback that keeps a reference to its owner
        in_cycles.append(weakref.ref(out))

    def record_without_cycle(i: int) -> None:
        out, _ = train_step()
        record = {"step": i, "out": out}  # freed when the function returns
        logged.append(record["step"])

    cycle = live_bytes(record_with_cycle)
    n_cyclic = sum(r() is not None for r in in_cycles)
    referrer = type(gc.get_referrers(in_cycles[0]())[0]).__name__
    print(f"outputs alive after the loop: {n_cyclic}; the first is held by a {referrer}")
    print(f"gc.collect() found {gc.collect()} unreachable objects")
    n_after = sum(r() is not None for r in in_cycles)
    print(f"outputs alive after gc.collect(): {n_after}")
    results["a reference cycle"] = (cycle, live_bytes(record_without_cycle))
finally:
    if gc_was_enabled:
        gc.enable()

# sphinx_gallery_start_ignore
fixed = results["a reference cycle"][1]
assert max(fixed) == min(fixed), fixed
assert cycle[-1] > cycle[0]
assert referrer == "dict" and n_cyclic == STEPS and n_after == 0
# sphinx_gallery_end_ignore

# %%
# Four leaks, one figure
# ----------------------
# Each panel shows the bytes allocated after each step, leaky and fixed. A leak is a
# line that climbs at a steady rate; a fixed loop is flat after its first step.
import matplotlib.pyplot as plt

fig, axes = plt.subplots(1, 4, figsize=(12, 3.2), layout="constrained", sharex=True)
for ax, (leak, (grows, flat)) in zip(axes, results.items(), strict=True):
    ax.plot(range(1, STEPS + 1), [b / KiB for b in grows], "o", color="C3", label="leaky")
    ax.plot(range(1, STEPS + 1), [b / KiB for b in flat], "s", color="C0", label="fixed")
    ax.set(title=leak, xlabel="step", xticks=range(2, STEPS + 1, 2))
axes[0].set_ylabel(f"KiB allocated on {device.type}")
axes[0].legend(fontsize="small")
plt.show()

# %%
# Fragmentation with varying batch shapes
# ---------------------------------------
# The caching allocator carves tensors out of segments it reserved from the driver. When
# batch shapes vary, a freed block may be too small for the next request and a new
# segment is reserved, while the old one sits partly empty: memory is reserved that no
# tensor uses. ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` lets a segment grow
# instead. The variable is read when CUDA starts, so the cell runs the same loop in two
# fresh processes, one with it, and compares reserved memory with the peak of allocated
# memory. Will expandable segments reserve less here?
import subprocess
import sys

LOOP = """
import json, torch
torch.manual_seed(0)
layer = torch.nn.Linear(4096, 4096, device="cuda")
kept = []
for i in range(40):
    rows = int(torch.randint(64, 4096, ()))
    out = layer(torch.randn(rows, 4096, device="cuda"))  # (rows, 4096)
    kept = (kept + [out])[-3:]  # a few outputs of varied sizes stay alive
torch.cuda.synchronize()
print(json.dumps({"reserved": torch.cuda.memory_reserved(), "peak": torch.cuda.max_memory_allocated()}))
"""
if device.type == "cuda":
    ratio = {}
    for setting in ("expandable_segments:False", "expandable_segments:True"):
        env = {**os.environ, "PYTORCH_CUDA_ALLOC_CONF": setting}
        done = subprocess.run(
            [sys.executable, "-c", LOOP],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the loop with {setting} failed:\n{done.stderr[-2000:]}")
        got = json.loads(done.stdout.strip().splitlines()[-1])
        ratio[setting] = got["reserved"] / got["peak"]
        print(
            f"{setting:>26}: reserved {got['reserved'] / 2**20:7.1f} MiB, peak allocated {got['peak'] / 2**20:7.1f} MiB"
        )
    from effpt.expect import expect

    _ = expect(
        "expandable_segments:True reserves less memory per byte of peak allocation than the default",
        ratio["expandable_segments:False"] / ratio["expandable_segments:True"],
        above=1.0,
        device=device,
    )
else:
    print(f"on this {device.type} build: fragmentation and expandable_segments need CUDA")

# %%
# Summary
# -------
# - Sum losses with ``loss.item()`` and run validation under ``torch.no_grad()``: a tensor
#   sum keeps every step's graph.
# - Keep numbers, not outputs; when you need outputs, keep ``out.detach().cpu()``.
# - A hook that stores tensors keeps them while it lives: store detached tensors, keep
#   the latest only, and ``remove()`` the handle.
# - A reference cycle holding tensors lives until the garbage collector runs; break the
#   cycle, or use ``weakref``.
# - Find a leak by measuring memory per step (the profiler on a CPU,
#   ``torch.cuda.memory_allocated`` on CUDA), then walk ``grad_fn`` and ask
#   ``gc.get_referrers()``.
# - Related reading: PyTorch's FAQ,
#   `My model reports "cuda runtime error(2): out of memory" <https://docs.pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory>`__,
#   and its notes on
#   `optimizing memory usage with PYTORCH_CUDA_ALLOC_CONF <https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf>`__.
