"""
Tell whether an operation pays for its work or for its overhead
===============================================================

Every PyTorch operation costs a fixed amount before it touches a single number: Python
calls into C++, the dispatcher picks a kernel, an output tensor is allocated, and on a
GPU a kernel is launched. On small tensors that fixed cost is all there is. This page
measures it on the machine that built it, finds the size above which the work itself
takes over, and checks a well-known rule of thumb against the result.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_where_time_goes.py``.
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
# :func:`effpt.bench.time_callable` (a timer that warms up, synchronises and repeats;
# :doc:`plot_timing_pytorch_code` builds one like it).
import torch

from effpt.bench import format_seconds, time_callable
from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

# %%
# Time against size
# -----------------
# The addition reads two tensors of ``n`` elements and writes one; the matrix product
# multiplies two square matrices of ``n`` elements each, so its arithmetic grows as
# ``n^1.5``. Each size is timed separately, and each result keeps its quartiles.
max_exp = 24 if device.type == "cuda" else 22  # up to 2**max_exp elements
add_sizes = [2**k for k in range(0, max_exp + 1, 2)]
mm_sides = [2**k for k in range(max_exp // 2 + 1)]  # matrices of side**2 elements

add_times = {}
for size in add_sizes:
    x, y = torch.randn(size, device=device), torch.randn(size, device=device)
    add_times[size] = time_callable(lambda x=x, y=y: torch.add(x, y), device=device)
mm_times = {}
for side in mm_sides:
    m = torch.randn(side, side, device=device)
    mm_times[side * side] = time_callable(lambda m=m: m @ m, device=device)

print(f"{'elements':>10}{'add':>11}{'matmul':>11}")
for size in add_sizes:
    mm = format_seconds(mm_times[size].median) if size in mm_times else ""
    print(f"{size:>10,}{format_seconds(add_times[size].median):>11}{mm:>11}")

# %%
# The smallest sizes cost about the same, up to this machine's noise: that is the
# fixed cost. Call it the median of the three smallest sizes; an operation is
# *overhead-bound* while its time is less than twice that, that is, while the fixed
# cost is more than half of it. One noisy size above that line proves nothing, so the
# crossover is the first size from which every larger size stays above it.


def fixed_cost_and_crossover(times: dict[int, object]) -> tuple[float, int | None]:
    sizes = sorted(times)
    floor = sorted(times[s].median for s in sizes[:3])[1]
    slow = [times[s].median >= 2 * floor for s in sizes]
    above = [s for i, s in enumerate(sizes) if all(slow[i:])]  # stays above from s on
    return floor, (above[0] if above else None)


add_floor, add_cross = fixed_cost_and_crossover(add_times)
mm_floor, mm_cross = fixed_cost_and_crossover(mm_times)
for name, floor, cross in (
    ("addition", add_floor, add_cross),
    ("matrix product", mm_floor, mm_cross),
):
    where = f"from {cross:,} elements" if cross else "at no size measured here"
    print(f"{name}: fixed cost {format_seconds(floor)}; at least twice that {where}")

# sphinx_gallery_start_ignore
assert add_cross is not None and mm_cross is not None, (add_cross, mm_cross)
largest = max(mm_times)
assert mm_times[largest].median > 5 * add_times[largest].median, largest
# sphinx_gallery_end_ignore

# %%
# On logarithmic axes a cost proportional to the size is a line of slope one. Both
# curves start flat, at their fixed cost, and bend upwards where the work takes over.
# Past its bend the matrix product climbs more steeply, since its arithmetic grows as
# ``n^1.5``. Which of the two bends first depends on their fixed costs as much as on
# their work; the crossovers printed above are this run's answer. The bars are the
# interquartile ranges of the repeats.
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
for name, times, cross in (
    ("torch.add(x, y)", add_times, add_cross),
    ("m @ m (square)", mm_times, mm_cross),
):
    sizes = sorted(times)
    medians = [times[s].median for s in sizes]
    errors = [
        [times[s].median - times[s].q1 for s in sizes],
        [times[s].q3 - times[s].median for s in sizes],
    ]
    line = ax.errorbar(sizes, medians, yerr=errors, marker="o", capsize=3, label=name)
    ax.axvline(cross, color=line[0].get_color(), linestyle=":")
ax.set(xscale="log", yscale="log", xlabel="elements per operand", ylabel="time per call (s)")
ax.set_title("Fixed cost, then work (dotted: from here on, over twice the fixed cost)")
ax.legend(loc="upper left")
plt.show()

# %%
# What the fixed cost is made of
# ------------------------------
# Below, one-element operations, each timed like the rest: a Python addition of two
# floats for scale; :func:`torch.add` into a preallocated output (``out=``), which
# skips allocating; the plain call; and the same with ``requires_grad=True``, which
# also records a node for autograd. Each is printed as a multiple of the plain call,
# with the interval the spread allows.
from effpt.bench import speedup

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

# sphinx_gallery_start_ignore
python_add = speedup(plain, parts["Python float addition"])
assert python_add.low > 5, python_add
# sphinx_gallery_end_ignore

# %%
# A one-element addition costs many times a Python addition: nearly all of it is
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
# The rule of thumb
# -----------------
# The same notebook offers a rule of thumb: with operands of "100s of elements, not
# single elements", the time Python and PyTorch's bookkeeping take is unlikely to be
# what slows a program down. Taken generously, an operation should stop being
# overhead-bound by a thousand elements. Against this machine's measurements:
for name, cross in (("an addition", add_cross), ("a matrix product", mm_cross)):
    verdict = "holds" if cross <= 1000 else "is optimistic"
    print(f"{name} stops being overhead-bound at about {cross:,} elements: the rule {verdict}")

# %%
# The rule speaks of Python's and PyTorch's administrative overhead; the measurement
# counts every fixed cost of an operation on this device, launches included. Where it
# says "optimistic", an operation on a few hundred elements still spends most
# of its time on fixed costs here, and so would a program made of many such
# operations. The cure is the same either way: fewer, larger operations. Later pages
# of this family apply it, by vectorising a loop (:doc:`plot_batch_gather`) and by fusing a
# chain of elementwise operations into one kernel (:doc:`plot_fusing_elementwise_work`).

# %%
# Summary
# -------
# - Every operation pays a fixed cost (Python, dispatcher, allocation, autograd
#   bookkeeping, and on a GPU the launch) before it does any work; measure it as the
#   flat start of time against size.
# - An operation is overhead-bound until its work outweighs that cost; where that
#   happens depends on its fixed cost and on how fast its work grows with its size.
# - "Hundreds of elements" is a rule of thumb; where the line lies for your operations
#   and device is one measurement away. Batch small operations into large ones.
