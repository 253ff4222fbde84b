"""
Combine features of different lengths without tiling them
=========================================================

.. effpt-before-you-start::
   :learn: - Replace a linear layer on a tiled, concatenated input by ``Merge``: project
             each part, then let broadcasting add the projections.
           - Check that both compute the same function, to rounding error.
           - Count the arithmetic and the peak memory of each path, and measure peak tensor
             memory with ``torch.profiler``.
           - Time both paths and their steps, and read a wall-clock speed-up against the
             count and against CPU time.
   :read-first: :doc:`plot_broadcasting` for the rules and stride-0 views;
                :doc:`/explanations/timing` for how the forward passes are timed.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU), with longer sequences on CUDA; where
           the profiler records no allocations on the device, the page says that peak
           memory was not measured. The comparison with CPU time runs only on the CPU.

A layer that mixes the features of every position with one vector per sequence
usually tiles that vector along the sequence and concatenates. Projecting each part on
its own and letting broadcasting add the projections computes the same function with
less arithmetic and less memory. This page shows the rewrite, checks that it is exact,
and measures what it saves on the machine that built it.

The broadcasting rules it relies on are on :doc:`plot_broadcasting`.
"""

# %%
# Tile, concatenate, project
# --------------------------
# Per-position features ``a`` have shape ``(batch, n, fa)``, one vector per sequence
# ``b`` has shape ``(batch, 1, fb)``. The usual layer tiles ``b`` along the sequence,
# concatenates, and applies a linear layer and an activation. ``expand`` makes the tiled
# ``b`` a view, but :func:`torch.cat` still writes a copy of it into a new tensor.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

batch, fa, fb, out = 8, 64, 256, 64
linear = torch.nn.Linear(fa + fb, out, device=device)


def tile_and_concat(a, b):
    tiled_b = b.expand(-1, a.shape[1], -1)  # (batch, n, fb), a view
    ab = torch.cat([a, tiled_b], dim=2)  # (batch, n, fa + fb), a copy
    return torch.relu(linear(ab))  # (batch, n, out)


# %%
# Project first, then broadcast
# -----------------------------
# A linear layer applied to a concatenation is the sum of two linear layers, one per
# part: with the weight split by columns as ``W = [Wa | Wb]``,
# ``W @ cat(a, b) + c = Wa @ a + Wb @ b + c``. (The Effective PyTorch guide writes this
# as ``f(m(x + y)) = f(mx + my)``, where the ``+`` inside ``m`` means concatenation.) So
# project each part on its own and let broadcasting add the projections: ``b`` is
# projected once per sequence, not once per position. ``Merge`` does this for any two
# inputs whose projections broadcast; it keeps a single bias, since two would only add
# up to one.


class Merge(torch.nn.Module):
    """Combine two feature tensors whose shapes broadcast: ``act(A a + B b + bias)``."""

    def __init__(self, in_a, in_b, out_features, activation=None):
        super().__init__()
        self.proj_a = torch.nn.Linear(in_a, out_features)
        self.proj_b = torch.nn.Linear(in_b, out_features, bias=False)
        self.activation = torch.nn.Identity() if activation is None else activation

    def forward(self, a, b):
        return self.activation(self.proj_a(a) + self.proj_b(b))


# %%
# Give ``Merge`` the concatenated layer's weights, split by columns, and both compute
# the same function. Only the order of the float32 sums differs, so the outputs agree to
# rounding error.
merge = Merge(fa, fb, out, activation=torch.nn.ReLU()).to(device)
with torch.no_grad():
    merge.proj_a.weight.copy_(linear.weight[:, :fa])
    merge.proj_b.weight.copy_(linear.weight[:, fa:])
    merge.proj_a.bias.copy_(linear.bias)

    a = torch.randn(batch, 100, fa, device=device)  # (batch, n, fa)
    b = torch.randn(batch, 1, fb, device=device)  # (batch, 1, fb)
    difference = (merge(a, b) - tile_and_concat(a, b)).abs().max().item()
print(f"largest difference between the two outputs: {difference:.1e}")

# sphinx_gallery_start_ignore
with torch.no_grad():
    assert torch.allclose(merge(a, b), tile_and_concat(a, b), atol=1e-5, rtol=1e-5), difference
# sphinx_gallery_end_ignore

# %%
# The same module serves any pair of shapes that broadcast after projection: a single
# context vector for every sequence, or per-pixel features of images with one vector
# per image.
with torch.no_grad():
    print(tuple(merge(a, torch.randn(fb, device=device)).shape))  # b: (fb,)
    pixels = torch.randn(batch, 16, 16, fa, device=device)  # (batch, height, width, fa)
    per_image = torch.randn(batch, 1, 1, fb, device=device)  # (batch, 1, 1, fb)
    print(tuple(merge(pixels, per_image).shape))

# sphinx_gallery_start_ignore
with torch.no_grad():
    assert merge(pixels, per_image).shape == (batch, 16, 16, out)
# sphinx_gallery_end_ignore

# %%
# What to expect
# --------------
# Count per position. The tiled path multiplies ``fa + fb = 320`` inputs by the
# weight, ``Merge`` only ``fa = 64`` (plus ``fb`` once per sequence), so at long
# lengths the projection does ``(fa + fb) / fa = 5`` times less arithmetic. Memory: at
# its peak ``tile_and_concat`` holds the concatenation, the linear output and the
# activation, ``320 + 64 + 64 = 448`` numbers per position, while ``Merge`` never
# holds more than two ``(batch, n, out)`` tensors, 128 per position: a ratio of 3.5.
# Neither count includes the inputs, which both share.
#
# Time is another matter. At short lengths the fixed cost of each operator call can
# weigh as much as the arithmetic, and ``Merge`` runs four operators that compute where
# the tiled path runs three and a view (``expand``); at any length the copy, the add,
# and how close each matrix product runs to the machine's peak speed count too. Predict
# first: at the longest length, is ``Merge`` faster on your machine, and by how much of
# the 5×?
flops_ratio = (fa + fb) / fa
memory_ratio = (fa + fb + out + out) / (2 * out)
print(
    f"arithmetic ratio (fa + fb) / fa = {flops_ratio:.1f}; peak memory ratio 448 / 128 = {memory_ratio:.1f}"
)

# %%
# Time and peak memory
# --------------------
# ``peak_bytes(fn)`` measures the peak of tensor memory that ``fn()`` allocates on the
# device above what was allocated before. It runs ``fn`` under :mod:`torch.profiler`
# with ``profile_memory=True``, which records one event per allocation and free with the
# allocator's running total after it. That counts every tensor PyTorch allocates, but
# not scratch memory a BLAS library takes for itself. It resets no global statistic (on
# a GPU, :func:`torch.cuda.reset_peak_memory_stats` mid-script would falsify any peak
# that :func:`torch.cuda.max_memory_allocated` reports around the script).
import json
import math
import os
import tempfile
from pathlib import Path

from torch.profiler import ProfilerActivity, profile

DEVICE_TYPE_IDS = {"cpu": 0, "cuda": 1, "mps": 13}  # c10's numbers, as the trace writes them


def peak_bytes(fn):
    """Peak bytes of tensors ``fn()`` allocates on ``device``, above the level before; NaN if
    the device's allocator reports no running total."""
    log_level = os.environ.get("KINETO_LOG_LEVEL")
    os.environ["KINETO_LOG_LEVEL"] = "6"  # silence the profiler's own start/stop lines
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
    finally:
        if log_level is None:
            del os.environ["KINETO_LOG_LEVEL"]
        else:
            os.environ["KINETO_LOG_LEVEL"] = log_level
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text(encoding="utf-8"))["traceEvents"]
    totals = [  # (running total after the event, the event's own bytes)
        (e["args"]["Total Allocated"], e["args"]["Bytes"])
        for e in events
        if e.get("name") == "[memory]"
        and e["args"].get("Device Type") == DEVICE_TYPE_IDS.get(device.type)
        and "Total Allocated" in e["args"]  # omitted by allocators that do not count
    ]
    if not totals:
        return math.nan
    before = min(total - nbytes for total, nbytes in totals)
    return max(total for total, _ in totals) - before


# %%
# :func:`effpt.bench.compare` times both forward passes (no autograd) at a few sequence
# lengths (:doc:`/explanations/timing` says how it measures), and ``peak_bytes``
# measures each one's memory.
from effpt.bench import compare, format_seconds, speedup

lengths = [256, 1024, 4096, 16384] if device.type == "cuda" else [16, 64, 256, 1024]


def measure(n):
    a = torch.randn(batch, n, fa, device=device)  # (batch, n, fa)
    b = torch.randn(batch, 1, fb, device=device)  # (batch, 1, fb)
    variants = {"tile + concat": lambda: tile_and_concat(a, b), "Merge": lambda: merge(a, b)}
    with torch.no_grad():
        records = compare(
            f"combine features, n={n}", variants, device=device, budget_s=0.2, show=False
        )
        memory = [peak_bytes(fn) for fn in variants.values()]
    return records, memory


results = {n: measure(n) for n in lengths}
print(f"{'n':>6}{'tile + concat':>15}{'Merge':>10}  {'Merge speed-up':<28}peak MiB: concat  Merge")
for n, ((cat, mrg), (m_cat, m_mrg)) in results.items():
    gain = speedup(cat, mrg)
    print(
        f"{n:>6}{format_seconds(cat.median_s):>15}{format_seconds(mrg.median_s):>10}  "
        f"{f'{gain} {gain.verdict}':<28}{m_cat / 2**20:>16.2f}{m_mrg / 2**20:>7.2f}"
    )
memory_measured = not math.isnan(results[lengths[-1]][1][0])
if not memory_measured:
    print(f"peak memory not measured: the profiler recorded no allocations on {device.type}")

# sphinx_gallery_start_ignore
if device.type == "cpu":  # the CPU allocator is handed exactly the tensors the count names
    assert memory_measured
    for n, (_, (m_cat, m_mrg)) in results.items():
        assert abs(m_cat / (4 * batch * n * (fa + fb + 2 * out)) - 1) < 0.01, (n, m_cat)
        assert abs(m_mrg / (4 * batch * (2 * n * out + out)) - 1) < 0.01, (n, m_mrg)
# sphinx_gallery_end_ignore

# %%
# At the longest length, compare the memory ratio with the count above. On the CPU the
# profiler sees exactly the tensors the count names (plus ``b``'s ``(batch, 1, out)``
# projection, which ``Merge`` holds at its peak too), so the ratio lands a hair under
# 3.5; on a GPU, scratch memory that a matrix library takes from PyTorch's allocator
# would add to both peaks and pull the ratio below the count. The next section shows
# what a speed-up here is made of, and how a busy machine can inflate it.
from effpt.expect import expect

n = lengths[-1]
(cat, mrg), (m_cat, m_mrg) = results[n]
expect(
    f"Merge runs faster than tile + concat at n={n}", speedup(cat, mrg), above=1.0, device=device
)
if memory_measured:
    expect(
        f"tile + concat needs more than twice the peak tensor memory of Merge at n={n}",
        m_cat / m_mrg,
        above=2.0,
        device=device,
    )

# %%
# Where the time goes
# -------------------
# The count above covers only the projections. To see what the total is made of,
# time each step of both paths at the longest length: the tiled path's copy, its
# 320-wide projection and its activation; ``Merge``'s 64-wide projection, its
# once-per-sequence projection of ``b``, and the broadcast add with the activation.
# Both whole paths are timed again in the same run, so that the steps can be checked
# against them: if the machine's load changed while it measured, they may not add up.
a = torch.randn(batch, n, fa, device=device)  # (batch, n, fa)
b = torch.randn(batch, 1, fb, device=device)  # (batch, 1, fb)
with torch.no_grad():
    ab = torch.cat([a, b.expand(-1, n, -1)], dim=2)  # (batch, n, fa + fb)
    projected = linear(ab)  # (batch, n, out)
    pa, pb = merge.proj_a(a), merge.proj_b(b)  # (batch, n, out), (batch, 1, out)
    steps = {
        "tile + concat, whole": lambda: tile_and_concat(a, b),
        "tile + concat: cat": lambda: torch.cat([a, b.expand(-1, n, -1)], dim=2),
        "tile + concat: linear, 320 wide": lambda: linear(ab),
        "tile + concat: relu": lambda: torch.relu(projected),
        "Merge, whole": lambda: merge(a, b),
        "Merge: linear, 64 wide": lambda: merge.proj_a(a),
        "Merge: linear of b": lambda: merge.proj_b(b),
        "Merge: add + relu": lambda: torch.relu(pa + pb),
    }
    parts = compare(f"steps at n={n}", steps, device=device, budget_s=0.2, show=False)
for record in parts:
    print(f"{record.variant:<34}{format_seconds(record.median_s):>10}")
by_name = {r.variant: r for r in parts}
add_up = True
for path, whole, step_records in (
    ("tile + concat", parts[0], parts[1:4]),
    ("Merge", parts[4], parts[5:]),
):
    steps_s = sum(r.median_s for r in step_records)
    add_up &= abs(steps_s / whole.median_s - 1) < 0.25
    print(
        f"{path}: steps add up to {format_seconds(steps_s)}, the whole took {format_seconds(whole.median_s)}"
    )
print("the steps add up to the wholes within 25 %:", add_up)

# %%
# The 64-wide projection does 5× less arithmetic than the 320-wide one, so at equal
# speed per operation their ratio would be 5×. A narrow matrix product can run further
# from the machine's peak than a wide one, which would pull the ratio below 5× (the
# expectation below); caches and the thread pool can move it either way, above 5×
# included.
#
# On a shared machine the wall clock also counts the time the operating system gave to
# other programs, and a longer call is interrupted more often. The process's CPU time
# (:func:`time.process_time`) counts only its own threads, but an OpenMP worker that
# finishes its share spins for a while before it sleeps, and spinning counts as CPU
# time (``OMP_WAIT_POLICY=PASSIVE`` makes workers sleep at once; the cell prints the
# setting). On the CPU, the cell below measures the two projections both ways.
import statistics
import time


def cpu_seconds(fn, calls=15):
    """Median CPU time of one call of ``fn``, summed over this process's threads."""
    fn()
    times = []
    for _ in range(calls):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def against_bound(low, high):  # where an interval lies against the 5× of the arithmetic
    if high <= flops_ratio:
        return "within"
    return "beyond" if low > flops_ratio else "not distinguishable from"


projection_gain = speedup(
    by_name["tile + concat: linear, 320 wide"], by_name["Merge: linear, 64 wide"]
)
print(
    f"wall clock: 64 wide ran {projection_gain} as fast as 320 wide, "
    f"{against_bound(projection_gain.low, projection_gain.high)} the {flops_ratio:.0f}× of the arithmetic"
)
if device.type == "cpu":
    policy = os.environ.get("OMP_WAIT_POLICY", "not set (workers spin before they sleep)")
    print(f"OMP_WAIT_POLICY: {policy}; {torch.get_num_threads()} threads")
    with torch.no_grad():
        cpu_gain = cpu_seconds(lambda: linear(ab)) / cpu_seconds(lambda: merge.proj_a(a))
    print(
        f"CPU time:   64 wide cost {cpu_gain:.1f}× less than 320 wide, "
        f"{against_bound(cpu_gain, cpu_gain)} the {flops_ratio:.0f}× of the arithmetic"
    )
_ = expect(
    f"the 64-wide projection runs at most {flops_ratio:.0f}× as fast as the 320-wide one "
    f"(wall clock, n={n})",
    projection_gain,
    below=flops_ratio,
    device=device,
)

# %%
# A wall-clock ratio beyond the 5× with a CPU-time ratio within it is time spent
# waiting (for a core, or for another thread), not work that ``Merge`` saved, and the
# totals above carry the same inflation. A CPU-time ratio beyond it too means the
# narrow product did each operation faster here (a nearer cache, say) or, on several
# threads, that the wide product's CPU time holds more spinning; one thread or
# ``OMP_WAIT_POLICY=PASSIVE`` tells the two apart.
#
# Besides the projections, the tiled path pays for its copy and ``Merge`` for an add.
# Where the steps add up to the wholes, the parts show where the time went; where they
# do not, this breakdown is inconclusive. The figure shows how both measurements grow
# with the sequence length; each point is a median, and each whisker spans the first
# to the third quartile.
import matplotlib.pyplot as plt

fig, (ax_time, ax_mem) = plt.subplots(1, 2, figsize=(9, 3.5), layout="constrained")
for k, label in enumerate(["tile + concat", "Merge"]):
    records = [recs[k] for recs, _ in results.values()]
    medians = [r.median_s * 1e3 for r in records]
    whiskers = [
        [(r.median_s - r.q1_s) * 1e3 for r in records],
        [(r.q3_s - r.median_s) * 1e3 for r in records],
    ]
    ax_time.errorbar(lengths, medians, yerr=whiskers, marker="o", capsize=3, label=label)
    if memory_measured:
        mib = [memory[k] / 2**20 for _, memory in results.values()]
        ax_mem.plot(lengths, mib, "o-", label=label)
ax_time.set(xlabel="sequence length n", ylabel="forward time (ms)", title="Time per call")
ax_mem.set(xlabel="sequence length n", ylabel="peak memory (MiB)", title="Peak tensor memory")
if not memory_measured:
    ax_mem.text(0.5, 0.5, f"not measured on {device.type}", ha="center", transform=ax_mem.transAxes)
for ax in (ax_time, ax_mem) if memory_measured else (ax_time,):
    ax.set(xscale="log", yscale="log")
    ax.legend(loc="upper left")
fig.suptitle(f"Tile + concat vs Merge: batch={batch}, fa={fa}, fb={fb}, out={out}")
plt.show()

# %%
# Summary
# -------
# - A linear layer on a concatenation is a sum of linear layers on its parts: project
#   each part, then let broadcasting add the projections (``Merge``).
#
# - That skips the tiled copy and the projection of the repeated part: less arithmetic
#   (up to ``(fa + fb) / fa``) and fewer numbers held at the peak (448 against 128 per
#   position here, by count); the peaks measured on this device are printed above.
#
# - Read a speed-up with its interval and against what the counts allow: on a busy
#   machine the wall clock can stretch long calls more than short ones, even when the
#   interval is narrow; CPU time counts only this process's own threads, but counts
#   their spinning while they wait as well as their work.
