"""
Tell whether an operation pays for its work or for its overhead
===============================================================

.. effpt-before-you-start::
   :learn: - Measure an operation's fixed cost as the flat start of its time against size.
           - Find the size from which an addition and a matrix product are no longer
             overhead-bound, on one thread and on all.
           - Compare a one-element ``torch.add`` with a Python addition, with ``out=`` and
             with ``requires_grad=True``.
           - Weigh what handing work to the intra-op thread pool costs, and check a rule
             of thumb against the measurement.
   :read-first: :doc:`plot_timing_pytorch_code` for how to time code;
                :doc:`/explanations/timing` for how ``time_callable`` measures.
   :needs: A CPU is enough; there each size is timed on one thread and on all of
           PyTorch's threads, and the thread-pool section needs more than one. The page
           runs on a CUDA or Apple MPS GPU when there is one (``EFFPT_DEVICE=cpu`` keeps
           it on the CPU), and then times the GPU alone, up to larger sizes on CUDA.

Every PyTorch operation costs a fixed amount before it touches a single number: Python
calls into C++, the dispatcher picks a kernel, an output tensor is allocated, and on a
GPU a kernel is launched. On a CPU with several threads, an operation above some size
also hands its work to a pool of threads, a fixed cost of its own. On small tensors
fixed costs are all there is.
This page measures them on the machine that built it, on one thread and on all of
them, finds the size above which the work itself takes over, and checks a well-known
rule of thumb against the result.
"""

# %%
# Where a program's time goes
# ---------------------------
# Thomas Viehmann's notebook "Introduction to PyTorch" (ACDL 2020) splits the time of a
# PyTorch program into Python program flow; administrative overhead (creating tensor
# structures, dispatching, recording autograd nodes); input and output; and the
# computation, which itself has a fixed part (such as kernel launches), a part that
# moves memory and a part that does arithmetic. The cells below time one addition and
# one matrix product at sizes from one element upwards, with
# :func:`effpt.bench.time_callable` (how it measures: :doc:`/explanations/timing`).
import torch

from effpt.bench import format_seconds, time_callable
from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

# %%
# Time against size, on one thread and on all
# --------------------------------------------
# The addition reads two tensors of ``n`` elements and writes one; the matrix product
# multiplies two square matrices of ``n`` elements each, so its arithmetic grows as
# ``n^1.5``. On a CPU, PyTorch runs an operation on a pool of intra-op threads, but
# only above a size that each kernel sets for itself (for elementwise operations such
# as the addition, 32,768 elements in torch's source at the time of writing; a matrix
# product's library decides its own). Each size is therefore timed on one thread and,
# right after, on all of PyTorch's threads: once where those are the same, and once on
# a GPU, which does not use that pool.
from effpt.bench import num_threads  # runs a block on n threads, then restores the number

all_threads = torch.get_num_threads()
thread_counts = sorted({1, all_threads}) if device.type == "cpu" else [all_threads]
label = {t: f"{t} thread{'s' if t > 1 else ''}" for t in thread_counts}
where = {t: "on one thread" if t == 1 else "on all threads" for t in thread_counts}
if device.type != "cpu":
    label, where = {all_threads: device.type}, {all_threads: f"on {device.type}"}
max_exp = 24 if device.type == "cuda" else 20  # up to 2**max_exp elements
add_sizes = [2**k for k in range(0, max_exp + 1, 2)]
mm_sides = [2**k for k in range(max_exp // 2 + 1)]  # matrices of side**2 elements

add_times = {t: {} for t in thread_counts}  # threads -> elements -> Timing
mm_times = {t: {} for t in thread_counts}
for size, side in zip(add_sizes, mm_sides, strict=True):  # side**2 == size
    x, y = torch.randn(size, device=device), torch.randn(size, device=device)
    m = torch.randn(side, side, device=device)
    for t in thread_counts:
        with num_threads(t):
            add_times[t][size] = time_callable(
                lambda x=x, y=y: torch.add(x, y), device=device, budget_s=0.2
            )
            mm_times[t][size] = time_callable(lambda m=m: m @ m, device=device, budget_s=0.2)

print(f"{'elements':>10}" + "".join(f"{'add, ' + label[t]:>18}" for t in thread_counts), end="")
print("".join(f"{'matmul, ' + label[t]:>20}" for t in thread_counts))
for size in add_sizes:
    row = [format_seconds(add_times[t][size].median) for t in thread_counts]
    row += [format_seconds(mm_times[t][size].median) for t in thread_counts]
    widths = [18] * len(thread_counts) + [20] * len(thread_counts)
    print(f"{size:>10,}" + "".join(f"{cell:>{w}}" for cell, w in zip(row, widths, strict=True)))

# %%
# The smallest sizes cost about the same, up to this machine's noise: that is the
# fixed cost. Call it the median of the three smallest sizes; an operation is
# *overhead-bound* while its time is less than twice that, that is, while the fixed
# cost is more than half of it. One noisy size above that line proves nothing, so the
# crossover is the first size from which every larger size stays above it. On several
# threads, the jump where a kernel starts using the thread pool can cross that line
# before the work does; the one-thread crossover is the work's alone.


def fixed_cost_and_crossover(times: dict[int, object]) -> tuple[float, int | None]:
    sizes = sorted(times)
    floor = sorted(times[s].median for s in sizes[:3])[1]
    slow = [times[s].median >= 2 * floor for s in sizes]
    above = [s for i, s in enumerate(sizes) if all(slow[i:])]  # stays above from s on
    return floor, (above[0] if above else None)


floors, crossings = {}, {}
for op, times in (("addition", add_times), ("matrix product", mm_times)):
    for t in thread_counts:
        floors[op, t], crossings[op, t] = fixed_cost_and_crossover(times[t])
        cross = crossings[op, t]
        reach = f"from {cross:,} elements" if cross else "at no size measured here"
        print(
            f"{op}, {label[t]}: fixed cost {format_seconds(floors[op, t])}; "
            f"at least twice that {reach}"
        )

# %%
# On logarithmic axes a cost proportional to the size is a line of slope one. On one
# thread (solid lines; on a GPU, the only lines), each curve starts flat, at its fixed
# cost, and leaves it where the work takes over; past that bend the matrix product
# should climb more steeply, since its arithmetic grows as ``n^1.5``. On all threads
# (dashed) a curve can also jump by far more than its work grows, at the size where a
# kernel starts using the thread pool: the section on fixed costs below says why. The
# bars are the interquartile ranges of the repeats.
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
for name, times, color in (
    ("torch.add(x, y)", add_times, "tab:blue"),
    ("m @ m (square)", mm_times, "tab:orange"),
):
    for t, style in zip(thread_counts, ("-", "--"), strict=False):
        sizes = sorted(times[t])
        medians = [times[t][s].median for s in sizes]
        errors = [
            [times[t][s].median - times[t][s].q1 for s in sizes],
            [times[t][s].q3 - times[t][s].median for s in sizes],
        ]
        ax.errorbar(
            sizes,
            medians,
            yerr=errors,
            marker="o",
            capsize=3,
            color=color,
            linestyle=style,
            label=f"{name}, {label[t]}",
        )
ax.set(xscale="log", yscale="log", xlabel="elements per operand", ylabel="time per call (s)")
ax.set_title("Fixed cost, then work: one thread and all threads")
ax.legend(loc="upper left", fontsize="small")
plt.show()

# %%
# The matrix product's steeper climb is an expectation, not a law: caches, vector
# units and, on several threads, the pool all bend the curves. Over the largest sizes
# measured, where its arithmetic should outweigh its fixed cost, its time should grow faster
# than its operands (16 times the elements, 64 times the arithmetic), and at the
# largest size it should cost more than five additions:
from effpt.expect import expect
from effpt.records import speedup

t0 = thread_counts[0]  # one thread on a CPU: no pool in the way
big, before = add_sizes[-1], add_sizes[-3]
print(f"{label[t0]}, from {before:,} to {big:,} elements per operand:")
with num_threads(t0):  # so that the verdicts name the threads that ran
    expect(
        "Over the largest sizes measured (16× the elements), a matrix product's time grows over 16×",
        speedup(mm_times[t0][big], mm_times[t0][before]),
        above=16.0,
        device=device,
    )
    expect(
        "At the largest size measured, a matrix product costs over 5× an addition",
        speedup(mm_times[t0][big], add_times[t0][big]),
        above=5.0,
        device=device,
    )

# %%
# What the fixed cost is made of
# ------------------------------
# Below, one-element operations, each timed like the rest: a Python addition of two
# floats for scale; :func:`torch.add` into a preallocated output (``out=``), which
# skips allocating; the plain call; and the same with ``requires_grad=True``, which
# also records a node for autograd. Each is printed as a multiple of the plain call,
# with the interval the spread allows.
p, q = 1.5, 2.5
x1, y1, out1 = (torch.randn(1, device=device) for _ in range(3))
xg = torch.randn(1, device=device, requires_grad=True)
parts = {
    "Python float addition": time_callable(lambda: p + q, device=device),
    "torch.add(x, y, out=z)": time_callable(lambda: torch.add(x1, y1, out=out1), device=device),
    "torch.add(x, y)": time_callable(lambda: torch.add(x1, y1), device=device),
    "... with requires_grad": time_callable(lambda: torch.add(xg, y1), device=device),
}
plain = parts["torch.add(x, y)"]
for name, t in parts.items():
    multiple = "(the reference)" if t is plain else f"{speedup(t, plain)} the plain call"
    print(f"{name:<24}{format_seconds(t.median):>10}   {multiple}")
_ = expect(
    "A one-element torch.add costs over 5× a Python float addition",
    speedup(plain, parts["Python float addition"]),
    above=5.0,
    device=device,
)

# %%
# Where a one-element addition costs many times a Python addition, nearly all of it is
# PyTorch's administration, not arithmetic. Whether recording the autograd node or
# allocating the output is a visible part of it here, the intervals above say; where
# an interval contains 1×, this run cannot tell the difference from noise. On a GPU
# the kernel launch comes on top.
fig, ax = plt.subplots(figsize=(7, 2.8), layout="constrained")
names = list(parts)
lower = [parts[k].median - parts[k].q1 for k in names]
upper = [parts[k].q3 - parts[k].median for k in names]
ax.errorbar([parts[k].median for k in names], names, xerr=[lower, upper], fmt="o", capsize=4)
ax.set(xscale="log", xlabel="time per call (s)", title="One-element operations: median and IQR")
ax.invert_yaxis()
plt.show()

# %%
# One fixed cost never shows at one element: dispatching work to the thread pool.
# Above the size from which a kernel splits its work, it hands the pieces to the
# pool's threads, wakes them and waits for the last one (:doc:`/explanations/timing`).
# That is where an all-threads curve above can jump by far more than its work grows,
# and fall back below the one-thread curve once the split work outweighs the dispatch.
#
# For the addition, the first size measured above its threshold is 65,536 elements,
# little work to split. The gap printed below is the cost of dispatch less the time
# the split saves: positive where the pool costs more than it saves.
if len(thread_counts) > 1:
    split = min(s for s in add_sizes if s > 32_768)  # torch's elementwise threshold
    one, every = add_times[1][split], add_times[all_threads][split]
    print(f"addition of {split:,} elements: {format_seconds(one.median)} on one thread,")
    gap = every.median - one.median
    sign = "+" if gap >= 0 else "-"
    print(
        f"{format_seconds(every.median)} on {all_threads} threads: {sign}{format_seconds(abs(gap))}"
    )
    expect(
        "Just above its thread pool threshold, an addition is slower on all threads than on one",
        speedup(every, one),
        above=1.0,
        device=device,
    )
else:
    print(f"{label[all_threads]}: no CPU thread pool to dispatch to here")

# %%
# The rule of thumb
# -----------------
# The same notebook offers a rule of thumb: with operands of "100s of elements, not
# single elements", the time Python and PyTorch's bookkeeping take is unlikely to be
# what slows a program down. Taken generously: at 1,024 elements an operation should
# take over twice its fixed cost, that is, no longer be overhead-bound.
#
# The verdict compares work with fixed cost, so it reads the timing without a thread
# pool: one thread on a CPU, the device itself on a GPU. On all threads the hand-off
# to the pool is another fixed cost, which the line under each verdict prints. Predict
# first: is an addition of 1,024 elements overhead-bound on your machine? A matrix
# product of that size?
from effpt.records import Ratio

t0 = thread_counts[0]  # one thread on a CPU, the device on a GPU: no pool in the way
for op, times, name in (
    ("addition", add_times, "an addition"),
    ("matrix product", mm_times, "a matrix product"),
):
    at_1024, floor = times[t0][1024], floors[op, t0]
    with num_threads(t0):
        expect(
            f"Rule of thumb: {name} of 1,024 elements takes over twice its fixed cost, {where[t0]}",
            Ratio(at_1024.median / floor, at_1024.q1 / floor, at_1024.q3 / floor),
            above=2.0,
            device=device,
        )
    if len(thread_counts) > 1:
        pooled = times[all_threads][1024]
        print(
            f"  on {label[all_threads]}: {format_seconds(pooled.median)}, "
            f"{speedup(pooled, at_1024)} its one-thread time"
        )

# %%
# Other work on the machine can decide the matrix product's verdict rather than the
# product itself: load stretches some timings more than others, and it is the one
# condition under which the measurements on record saw this verdict change. This
# run's load:
from effpt.machine import load_line

print(load_line())

# %%
# Where a verdict does not hold, an operation on a thousand elements still spends most
# of its time on fixed costs, and so would a program made of many of them; an
# all-threads time many times the one-thread time is the hand-off, a fixed cost on
# top, or, at milliseconds, a pool thread waiting for a core other work held (the load
# line above). Where one holds, that operation already spends at least half its time
# on work at a thousand elements, as the rule says. Either way the cure for fixed costs
# is the same: fewer, larger operations. Later pages apply it, vectorising a loop
# (:doc:`plot_batch_gather`) and fusing a chain of elementwise operations into one
# kernel (:doc:`plot_fusing_elementwise_work`).

# %%
# Summary
# -------
# - Every operation pays a fixed cost (Python, dispatcher, allocation, autograd
#   bookkeeping, and on a GPU the launch) before it does any work; measure it as the
#   flat start of time against size.
#
# - On a CPU with several threads, an operation above a size set by its kernel also
#   pays to dispatch its work to the thread pool. Just above that size it can be slower
#   than on one thread; measure both where small operations matter.
#
# - An operation is overhead-bound until its work outweighs its fixed costs; where that
#   happens depends on those costs and on how fast its work grows with its size.
#
# - "Hundreds of elements" is a rule of thumb; where the line lies for your operations,
#   device and thread count is one measurement away. Batch small operations into large
#   ones.
