"""
Profile a training step
=======================

.. effpt-before-you-start::
   :learn: - Label the phases of a step with ``record_function``, and read the profiler's
             tables sorted by self time and by total time.
           - Record a few steps on a ``schedule``, export each cycle's trace, and read the
             trace back to draw one step as a timeline.
           - Split each phase into time inside operators and time between them.
           - See what each phase allocates and releases, and which code called an operator.
   :read-first: :doc:`/auto_examples/basics/plot_fitting_a_curve` for the training loop;
                :doc:`/measurements` for how an expectation's verdict is read.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU); on CUDA the profiler also records
           the GPU's kernels, which add a row to the figure and a busy-time line to the
           phase table; on MPS the memory section says so when the profiler recorded no
           allocations.

A slow training step rarely spends its time where its author guesses, and a guess is a
poor reason to rewrite code. :mod:`torch.profiler` records every operator a step runs,
how long it took and what it allocated. This page profiles the step of a small
classifier (load a batch, forward, backward, optimizer), reads the profiler's tables,
records steps on a schedule, exports a trace and draws it, and works out which share of
the step each phase takes and how much of it runs inside operators.
"""

# %%
# A step with labelled phases
# ---------------------------
# The model is a three-layer perceptron trained with Adam; batches come from a
# :class:`~torch.utils.data.DataLoader` over tensors already in memory, so the data
# phase holds batching only, not reading files. :func:`torch.profiler.record_function`
# wraps each phase in a labelled range that shows up in every table and trace below.
# The first steps create Adam's state and warm up the allocator, so they run before any
# profiling.
import torch
from torch import nn
from torch.profiler import record_function
from torch.utils.data import DataLoader, TensorDataset

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))
width, batch = (2048, 512) if device.type == "cuda" else (512, 128)
PHASES = ("data", "forward", "backward", "optimizer")

samples = TensorDataset(torch.randn(4096, 256), torch.randint(0, 10, (4096,)))
loader = DataLoader(samples, batch_size=batch, shuffle=True, drop_last=True)
model = nn.Sequential(
    nn.Linear(256, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


def endless(loader):
    while True:
        yield from loader  # a new shuffled epoch each time the last one ends


batches = endless(loader)


def train_step() -> None:
    with record_function("data"):
        x, y = next(batches)  # (batch, 256), (batch,)
        x, y = x.to(device), y.to(device)
    with record_function("forward"):
        loss = nn.functional.cross_entropy(model(x), y)
    with record_function("backward"):
        loss.backward()
    with record_function("optimizer"):
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


for _ in range(3):
    train_step()
print(f"{sum(p.numel() for p in model.parameters()):,} parameters, batches of {batch}")

# %%
# Self time and total time
# ------------------------
# :class:`torch.profiler.profile` records while its ``with`` block runs: the CPU
# thread on any device, and on a CUDA GPU also the device's kernels when asked to
# (``ProfilerActivity.CUDA``). ``key_averages()`` groups the events by operator name,
# and ``table()`` prints them. An operator's *self* time leaves out the operators it
# calls; its *total* time includes them. Sorted by self time (on a CUDA GPU, the
# device's), the top rows are where the time is spent, in this machine's order:
# operators doing the work themselves, and any label whose own time, Python between
# operators, is large.
#
# On a CUDA GPU the table also has a row per kernel and a second row per label, its
# span on the device; a sum must take rows of one kind, which
# :func:`effpt.profiling.profiler_rows` picks.
#
# Predict first, before the tables answer it: on your machine, does backward take longer
# than forward, and does the optimizer take under a quarter of the step? The first line
# printed is the load average: an operator that waits for a
# core busy with other programs looks slow in every table.
import os

from torch.profiler import ProfilerActivity, profile

from effpt.profiling import profiler_rows

activities = [ProfilerActivity.CPU]
if device.type == "cuda":
    activities.append(ProfilerActivity.CUDA)

if hasattr(os, "getloadavg"):
    print(f"load average, last minute: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
with profile(activities=activities) as prof:
    for _ in range(3):
        train_step()
by_name = prof.key_averages()
by_self = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
print(by_name.table(sort_by=by_self, row_limit=8, max_name_column_width=36))

# sphinx_gallery_start_ignore
labels, op_rows = profiler_rows(by_name, "labels"), profiler_rows(by_name, "operators")
assert all(labels[p].count == 3 for p in PHASES), labels  # each label once per step
assert op_rows["aten::linear"].count == 3 * 3, op_rows  # three Linear layers, three steps
# sphinx_gallery_end_ignore

# %%
# Sorted by total time, rows that contain other operators climb: the phases' labels,
# ``aten::linear`` (it calls the matrix product), autograd's ``evaluate_function`` rows
# (each holds one backward function), and ``Optimizer.step#Adam.step``, a label the
# optimizer adds on its own (the data loader adds ``enumerate(DataLoader)#...``). A row
# with a large total and a small self time only points at the operators below it; a
# label with a large self time spends it outside any operator, in Python.
print(by_name.table(sort_by="cpu_time_total", row_limit=8, max_name_column_width=36))

# %%
# Record a few steps on a schedule
# --------------------------------
# Profiling a whole run records far too much, and the first steps after the profiler
# starts carry its start-up cost. A :func:`~torch.profiler.schedule` says which steps to
# record: here it skips one step (``wait``), starts the profiler and throws away one
# (``warmup``), records five (``active``), and runs that cycle twice. At the end of each
# cycle the profiler calls
# ``on_trace_ready``, which here exports the cycle as a Chrome trace into a temporary
# folder: a JSON file named after the step about to start. ``acc_events=True`` keeps
# the first cycle's events in ``prof`` when the second starts (without it the profiler
# drops them and warns).
import tempfile
from pathlib import Path

from torch.profiler import schedule

folder = Path(tempfile.mkdtemp())
traces = []


def save_trace(p: profile) -> None:
    path = folder / f"step_{p.step_num}.json"
    p.export_chrome_trace(str(path))
    traces.append(path)


plan = schedule(wait=1, warmup=1, active=5, repeat=2)
with profile(
    activities=activities, schedule=plan, on_trace_ready=save_trace, acc_events=True
) as prof:
    for _ in range(15):  # two cycles of 7 steps, then one the schedule ignores
        train_step()
        prof.step()
for path in traces:
    print(f"{path.name}: {path.stat().st_size / 1e6:.2f} MB")

# %%
# A Chrome trace is the format that ``chrome://tracing`` and `Perfetto
# <https://ui.perfetto.dev>`__ open. It is plain JSON whose ``traceEvents`` list holds
# the events, each with a name, a category, a thread, a start ``ts`` and a duration
# ``dur`` in microseconds. Reading one back shows what the viewer draws: ``cpu_op`` for
# operators, ``user_annotation`` for the labels (``ProfilerStep#N`` is the profiler's
# label for step N), on a GPU ``kernel`` for what ran on the device, and one ``Trace``
# event that spans the recording. The second trace holds steps 9 to 13: its cycle
# waited at step 7 and warmed up at step 8.
import json
from collections import Counter


def read_trace(path: Path) -> list[dict]:
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]


events = read_trace(traces[-1])
print(
    f"{len(events)} events with a duration; by category: {dict(Counter(e['cat'] for e in events))}"
)
steps = [e for e in events if e["cat"] == "user_annotation" and "ProfilerStep#" in e["name"]]
print("steps in this trace:", [e["name"] for e in steps])

# sphinx_gallery_start_ignore
assert len(traces) == 2, traces  # repeat=2: one trace per cycle, none after
first = {e["name"] for e in read_trace(traces[0]) if e["name"].startswith("ProfilerStep#")}
assert first == {f"ProfilerStep#{i}" for i in range(2, 7)}, first  # steps 2 to 6
assert [e["name"] for e in steps] == [f"ProfilerStep#{i}" for i in range(9, 14)], steps
label_counts = Counter(e["name"] for e in events if e["cat"] == "user_annotation")
assert all(label_counts[p] == 5 for p in PHASES), label_counts  # every label, once per active step
# sphinx_gallery_end_ignore

# %%
# Draw one step
# -------------
# A reader of a static page cannot open the trace in a viewer, so the figure draws the
# last recorded step from the trace's events: one row per label, one row for the
# *top-level* operators (those no other operator called), coloured by phase, and on a
# CUDA GPU one row for the kernels. A stretch of a labelled phase with no operator under
# it is time spent outside operators: the Python of the model, the optimizer and the
# loader, and the profiler's own bookkeeping. On a GPU the labels measure how long the
# CPU took to queue the work, while the kernels row shows when the device ran it.
import matplotlib.pyplot as plt


def inside(e: dict, outer: dict) -> bool:
    return outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"]


def top_level(ops: list[dict]) -> list[dict]:
    out, open_ops = [], {}  # the last top-level operator of each thread
    for e in sorted(ops, key=lambda e: (e["ts"], -e["dur"])):
        last = open_ops.get(e["tid"])
        if last is None or not inside(e, last):
            out.append(e)
            open_ops[e["tid"]] = e
    return out


step = steps[-1]
in_step = [e for e in events if inside(e, step)]
ops = top_level([e for e in in_step if e["cat"] == "cpu_op"])
labels = [e for e in in_step if e["cat"] == "user_annotation"]  # on a GPU, not gpu_user_annotation
phase_of = {p: next(e for e in labels if e["name"] == p) for p in PHASES}
device_cats = ("kernel", "gpu_memcpy", "gpu_memset")  # kernels may end after the step's CPU side
kernels = [
    e for e in events if e["cat"] in device_cats and 0 <= e["ts"] - step["ts"] <= step["dur"]
]
print(f"{step['name']}: {len(ops)} top-level operators, {len(kernels)} device kernels and copies")

# %%
# In the figure, each phase's colour marks its operators in the row below; grey would
# mark an operator outside the four labels. White gaps inside a coloured stretch of that
# row are time between operators.
rows = [*PHASES, "top-level operators"] + (["CUDA kernels"] if device.type == "cuda" else [])
colors = {p: f"C{i}" for i, p in enumerate(PHASES)}
fig, ax = plt.subplots(figsize=(8, 3.2), layout="constrained")


def bar(row: int, e: dict, color: str) -> None:
    start_ms, length_ms = (e["ts"] - step["ts"]) / 1e3, e["dur"] / 1e3
    ax.broken_barh([(start_ms, length_ms)], (row - 0.4, 0.8), color=color)


for i, p in enumerate(PHASES):
    bar(i, phase_of[p], colors[p])
for e in ops:
    p = next((p for p in PHASES if inside(e, phase_of[p])), None)
    bar(len(PHASES), e, colors.get(p, "0.6"))
for e in kernels:
    bar(len(PHASES) + 1, e, "k")
ax.set(yticks=range(len(rows)), yticklabels=rows, xlabel=f"ms since the start of {step['name']}")
ax.set_xlim(0, max([step["dur"]] + [e["ts"] + e["dur"] - step["ts"] for e in kernels]) / 1e3)
ax.invert_yaxis()
ax.set_title(f"One training step on {device.type}, from the profiler's trace")
plt.show()

# sphinx_gallery_start_ignore
assert all(inside(phase_of[p], step) for p in PHASES)
assert len(ops) > 0 and all(e["cat"] == "cpu_op" for e in ops)
assert (len(kernels) > 0) == (device.type == "cuda"), len(kernels)
# sphinx_gallery_end_ignore

# %%
# Where the time goes
# -------------------
# The labels answer the first question: which share of the step each phase takes. The
# operators under a label answer the second: whether the phase's time is spent in
# operators or in the Python around them. On a CPU an operator's time holds both its
# dispatch (argument checks, picking a kernel, allocating the output) and the kernel,
# and the profiler cannot tell them apart; the time per call hints at which dominates.
#
# Many calls of a microsecond or a few each are mostly dispatch, which fewer, larger
# operations reduce (``foreach`` or fused optimizers, :func:`torch.compile`); a few
# long calls are mostly kernels, which only less arithmetic or faster kernels shorten.
# The code below measures each phase of the ten steps the two traces recorded.
import shutil
import statistics


def covered(spans: list[tuple[float, float]]) -> float:
    """Length of the union of (start, end) spans: overlapping spans count once."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total, end = total + b - max(a, end), b
    return total


def phase_times(events: list[dict], step: dict) -> dict[str, dict[str, float]]:
    in_step = [e for e in events if inside(e, step)]
    cpu_ops = [e for e in in_step if e["cat"] == "cpu_op"]
    out = {}
    for p in PHASES:
        label = next(e for e in in_step if e["cat"] == "user_annotation" and e["name"] == p)
        mine = [e for e in cpu_ops if inside(e, label)]
        spans = [(e["ts"], e["ts"] + e["dur"]) for e in top_level(mine)]
        out[p] = {"wall": label["dur"], "in_ops": covered(spans), "calls": len(mine)}
    return out


def device_busy(events: list[dict], step: dict) -> float:
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["cat"] in device_cats]
    return covered([(a, b) for a, b in spans if 0 <= a - step["ts"] <= step["dur"]])


recorded = []  # one dict per recorded step: its length, the device's busy time, each phase
for path in traces:
    trace = read_trace(path)
    for step in (
        e for e in trace if e["cat"] == "user_annotation" and "ProfilerStep#" in e["name"]
    ):
        times = {"step": step["dur"], "busy": device_busy(trace, step)}
        recorded.append(times | phase_times(trace, step))
shutil.rmtree(folder)  # the traces are read: remove them
print(f"{len(recorded)} steps measured")

# %%
# For each phase, the median over the ten steps of: its share of the step (the shares
# leave out the loop around the phases: entering ``train_step``, releasing the last
# batch, ``prof.step()``), its length, the part of it spent inside operators, the
# operator calls (nested ones included) and the time inside operators per call. On a
# CUDA GPU the last line says how much of the step the device spent running kernels.
# There the phases are the CPU thread's time: forward, backward and optimizer queue
# kernels and move on, and the data phase's copy of the batch from pageable memory
# waits until the device has finished the previous step's kernels, so the GPU's work
# shows up in the data phase.
print(
    f"{'phase':<10}{'share of step':>15}{'ms':>8}{'in operators':>14}{'op calls':>10}{'µs/call':>9}"
)
for p in PHASES:
    share = statistics.median(100 * r[p]["wall"] / r["step"] for r in recorded)
    wall = statistics.median(r[p]["wall"] for r in recorded)
    in_ops = statistics.median(100 * r[p]["in_ops"] / r[p]["wall"] for r in recorded)
    calls = statistics.median(r[p]["calls"] for r in recorded)
    per_call = statistics.median(r[p]["in_ops"] / r[p]["calls"] for r in recorded)
    print(f"{p:<10}{share:>14.0f}%{wall / 1e3:>8.2f}{in_ops:>13.0f}%{calls:>10.0f}{per_call:>9.1f}")
outside = [sum(r[p]["wall"] - r[p]["in_ops"] for p in PHASES) / r["step"] for r in recorded]
print(f"outside any operator: {100 * statistics.median(outside):.0f}% of the step (median)")
if device.type == "cuda":
    busy = statistics.median(r["busy"] / r["step"] for r in recorded)
    print(f"the kernels launched in a step kept the GPU busy {100 * busy:.0f}% of its length")
else:
    print(f"no device kernels on {device.type}: an operator's time on the CPU includes its kernel")

# sphinx_gallery_start_ignore
assert len(recorded) == 10, len(recorded)  # 2 cycles × 5 active steps
for r in recorded:  # nested spans: the parts never exceed the whole
    assert sum(r[p]["wall"] for p in PHASES) <= r["step"] + 1e-6, r
    assert all(0 < r[p]["in_ops"] <= r[p]["wall"] + 1e-6 for p in PHASES), r
# sphinx_gallery_end_ignore

# %%
# Two expectations a reader might bring to such a profile, each measured over the same
# ten steps. Backward computes up to two matrix products for every one in forward (the
# gradients of the layer's input and of its weight; the first layer needs only the
# second), so it should take longer, unless each operator's fixed cost outweighs its
# arithmetic (small layers, a busy machine, threads waiting for each other). The two
# verdicts below score the predictions asked for before the
# first table.
from effpt.bench import Timing
from effpt.expect import expect
from effpt.records import speedup


def per_step(phase: str) -> Timing:
    return Timing(per_call=tuple(r[phase]["wall"] / 1e6 for r in recorded), number=1)


_ = expect(
    "the backward pass takes longer than the forward pass",
    speedup(per_step("backward"), per_step("forward")),
    above=1.0,
    device=device,
)

# %%
# The optimizer is often assumed to be a small part of a step. Adam runs several
# elementwise operations per parameter tensor, each a pass over the whole tensor, while
# the matrix products' work grows with the batch: with a small batch the two can be of
# a size. Its default handles one parameter per call on a CPU or MPS, all of them at
# once (``foreach`` operators) on a CUDA GPU. The optimizer's time per call in the phase
# table hints at which cost dominates (about a microsecond: dispatch; tens of
# microseconds: memory traffic; milliseconds, for tensors this small: waiting for a busy
# core). The :mod:`torch.optim` documentation ranks ``fused=True`` ahead of ``foreach``
# where a device has it (not timed here).
shares = [100 * r["optimizer"]["wall"] / r["step"] for r in recorded]
quartiles = statistics.quantiles(shares, n=4, method="inclusive")
_ = expect(
    "the optimizer takes less than a quarter of the step",
    (statistics.median(shares), quartiles[0], quartiles[2]),
    below=25,
    unit="%",
    device=device,
)

# %%
# On a CPU, threads and kernels decide this share: one thread or portable kernels
# raise it.
print(
    f"intra-op threads: {torch.get_num_threads()}; "
    f"torch's CPU capability: {torch.backends.cpu.get_cpu_capability()}"
)

# %%
# Memory
# ------
# With ``profile_memory=True`` the profiler also records every allocation and every
# release, and the tables gain memory columns: what an operator allocated, less what it
# released, in total and on its own (negative numbers are releases). The labels' totals
# show the life of a step's memory: the forward keeps its activations for the backward,
# the backward releases them and allocates the gradients, and
# ``zero_grad(set_to_none=True)``
# in the optimizer phase releases those, as many bytes as the parameters take; the data
# phase allocates the batch. On a GPU the columns that matter are the device's. Sorted
# by what each operator allocated itself:
on_cpu = device.type == "cpu"
with profile(activities=activities, profile_memory=True) as prof:
    train_step()
memory = prof.key_averages()
column = "self_cpu_memory_usage" if on_cpu else "self_cuda_memory_usage"  # cuda: the device's
print(memory.table(sort_by=column, row_limit=6, max_name_column_width=36))
field = "cpu_memory_usage" if on_cpu else "device_memory_usage"
labels = profiler_rows(memory, "labels")  # memory is counted on their CPU rows, the GPU's too
by_label = {p: getattr(labels[p], field) for p in PHASES}
print(f"{field} of one step, MB, by phase:", {p: round(by_label[p] / 1e6, 2) for p in PHASES})
param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
print(f"the parameters (and so their gradients) take {param_bytes / 1e6:.2f} MB")
if by_label["forward"] == 0:
    print(f"The profiler recorded no {device.type} allocations of the model's tensors here.")

# sphinx_gallery_start_ignore
function_events = prof.events()
self_sum = sum(getattr(e, f"self_{field}") for e in function_events)
roots_sum = sum(getattr(e, field) for e in function_events if e.cpu_parent is None)
assert self_sum == roots_sum, (self_sum, roots_sum)  # self amounts add up to the roots' totals
if device.type != "mps":  # the profiler may not record MPS allocations (see above)
    assert by_label["forward"] > 0 and by_label["optimizer"] < 0, by_label
if on_cpu:  # Adam's temporaries come and go inside the step; zero_grad frees the grads
    assert by_label["optimizer"] == -param_bytes, (by_label, param_bytes)
# sphinx_gallery_end_ignore

# %%
# Which code called it
# ---------------------
# ``with_stack=True`` records the Python call stack of every operator, and
# ``key_averages(group_by_stack_n=n)`` splits each operator's row by the innermost ``n``
# frames of its stack. Some torch versions keep these stacks in the events only when the
# profiler also gets an experimental configuration with ``verbose=True``
# (`pytorch/pytorch#100253 <https://github.com/pytorch/pytorch/issues/100253>`__); the
# cell prints whether this one did without it. Four frames are often enough to reach
# the module (``nn.Module: Linear_0`` names the first ``Linear``), torch's function or
# this page's function (named with the line it starts on) that made the call. A frame
# such as ``<built-in method ...>`` is the Python call itself, with the address of the
# object it was made on.
#
# The verbose configuration also records Python frames as rows of their own, on every
# thread of the process: a thread pool that earlier code in the same process left idle
# (``torch.compile`` can keep one) shows up with a large self time spent waiting, not
# working. The cell therefore keeps only the operators' rows (``aten::`` names), which
# only the step's own work produces, and prints the three with the most self time.
from torch.profiler import _ExperimentalConfig

with profile(activities=activities, with_stack=True) as prof:
    train_step()
print("stacks kept without the experimental configuration:", any(e.stack for e in prof.events()))
verbose = _ExperimentalConfig(verbose=True)
with profile(activities=activities, with_stack=True, experimental_config=verbose) as prof:
    train_step()
by_stack = prof.key_averages(group_by_stack_n=4)
operators = sorted(
    (row for row in by_stack if row.key.startswith("aten::")),
    key=lambda row: row.self_cpu_time_total,
    reverse=True,
)
for row in operators[:3]:
    print(f"{row.key}: {row.self_cpu_time_total / 1e3:.2f} ms self CPU, called from")
    for frame in row.stack:
        print(f"    {frame}")

# sphinx_gallery_start_ignore
frames = {frame for e in prof.events() for frame in e.stack}
assert any(frame.startswith("nn.Module: Linear_") for frame in frames), sorted(frames)[:20]
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Wrap each phase of a step in ``record_function``; sort ``key_averages()`` by self
#   time to find the operators that do the work, by total time to see the phases.
# - Profile a few steps on a ``schedule`` after a warm-up, and save each cycle's trace
#   from ``on_trace_ready``; the trace is JSON you can read back and plot.
# - Split each phase into time inside operators and time between them, and read the time
#   per operator call: many short calls point at dispatch and Python, a few long ones at
#   the kernels.
# - ``profile_memory=True`` shows what each operator and each phase allocates and
#   releases; ``with_stack=True`` shows which module or function called an operator.
#
# `PyTorch's profiler recipe
# <https://docs.pytorch.org/tutorials/recipes/recipes/profiler_recipe.html>`__
# introduces the same API; this page measures it.
