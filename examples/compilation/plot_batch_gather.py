"""
Vectorise a batch gather: from a Python loop to one index_select
================================================================

"For every batch element ``i``, pick the rows ``index[i]`` of ``input[i]``" is a loop
that appears all over machine-learning code, from beam search to point clouds. Written
as a Python loop it launches a few small operations per batch element. This page
writes it as a loop, compiles the loop two ways, vectorises it with a flat index, shows
why :meth:`torch.Tensor.index_select` is the fastest way to use that index, and
measures how each version's cost grows with the batch size.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_batch_gather.py``.
"""

# %%
# The task, and the loop everyone writes first
# --------------------------------------------
# ``output[i] = input[i, index[i]]``: ``input`` holds ``rows`` vectors of ``features``
# numbers per batch element, ``index`` names ``k`` of those rows per element.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

rows, features, k = 64, 8, 8


def make_inputs(batch: int, width: int = features) -> tuple[torch.Tensor, torch.Tensor]:
    data = torch.randn(batch, rows, width, device=device)  # (batch, rows, width)
    index = torch.randint(0, rows, (batch, k), device=device)  # (batch, k)
    return data, index


def gather_loop(data: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    picked = []
    for i in range(data.shape[0]):
        picked.append(data[i][index[i]])  # (k, features)
    return torch.stack(picked)  # (batch, k, features)


data, index = make_inputs(4)
print("output shape:", tuple(gather_loop(data, index).shape))

# %%
# The same loop under TorchScript
# -------------------------------
# The Effective PyTorch guide suggested :func:`torch.jit.script` for loops that cannot
# be batched, and found it about 10 % faster. TorchScript is deprecated
# (:doc:`plot_torchscript_to_compile`); recent releases warn, with a category that has
# changed between releases, so the warning is recognised by its message and module.
import re
import warnings

TORCHSCRIPT_DEPRECATION = r"`torch\.jit\.\w+` is deprecated"
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    gather_loop_scripted = torch.jit.script(gather_loop)
deprecations = [w for w in caught if re.match(TORCHSCRIPT_DEPRECATION, str(w.message))]
for w in deprecations[:1]:
    print(f"{w.category.__name__}: {w.message}")
if not deprecations:
    print(f"torch {torch.__version__} scripts it without a deprecation warning")

# sphinx_gallery_start_ignore
assert all(re.match(TORCHSCRIPT_DEPRECATION, str(w.message)) for w in caught), caught
assert torch.equal(gather_loop_scripted(data, index), gather_loop(data, index))
# sphinx_gallery_end_ignore

# %%
# The same loop under torch.compile
# ---------------------------------
# :func:`torch.compile` follows the Python loop while it captures, so the graph
# contains one copy of the loop body per batch element: the loop is *unrolled*, and
# the graph is tied to that batch size. ``torch._dynamo.explain`` counts the captured
# operations without compiling them.
for batch in (8, 32):
    report = torch._dynamo.explain(gather_loop)(*make_inputs(batch))
    print(f"batch {batch:>2}: {report.op_count} operations in the captured graph")

# sphinx_gallery_start_ignore
ops_8 = torch._dynamo.explain(gather_loop)(*make_inputs(8)).op_count
ops_32 = torch._dynamo.explain(gather_loop)(*make_inputs(32)).op_count
assert ops_32 > 3 * ops_8, (ops_8, ops_32)
# sphinx_gallery_end_ignore

# %%
# A bigger graph takes longer to compile, and every new batch size means a new graph,
# so the compiled loop is measured at one small batch size only. The first call
# compiles; its cost is reported apart from the later calls.
import time

from effpt.bench import format_seconds, time_callable

compiled_batch = 16
gather_loop_compiled = torch.compile(gather_loop)
small_data, small_index = make_inputs(compiled_batch)
start = time.perf_counter()
gather_loop_compiled(small_data, small_index)
compile_s = time.perf_counter() - start
compiled_time = time_callable(lambda: gather_loop_compiled(small_data, small_index), device=device)
print(f"batch {compiled_batch}: compiling took {format_seconds(compile_s)}")
print(f"batch {compiled_batch}: a call then takes {format_seconds(compiled_time.median)}")

# sphinx_gallery_start_ignore
assert torch.equal(
    gather_loop_compiled(small_data, small_index), gather_loop(small_data, small_index)
)
# sphinx_gallery_end_ignore

# %%
# Vectorised: one flat index
# --------------------------
# Merge the batch and row axes into one, so that row ``r`` of element ``i`` becomes
# row ``i * rows + r`` of a flat table, and shift each element's indices by that
# offset: one operation then picks every row. The guide's version of this trick built
# its offsets with ``torch.arange(...).cuda()``, which fails on a machine without a GPU
# and copies from the CPU on one that has it; ``device=data.device`` creates them where
# the data already is. The flat index can be used in two ways: as an advanced index,
# ``flat[flat_index]``, as in the guide, or with :meth:`~torch.Tensor.index_select`.


def flat_rows(data: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n = data.shape[:2]
    flat = data.reshape(batch * n, *data.shape[2:])  # (batch * rows, features)
    offset = torch.arange(batch, device=data.device) * n  # (batch,)
    return flat, index + offset[:, None]  # (batch, k) positions in flat


def gather_flat(data: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    flat, flat_index = flat_rows(data, index)
    return flat[flat_index]  # (batch, k, features)


def gather_index_select(data: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    flat, flat_index = flat_rows(data, index)
    picked = flat.index_select(0, flat_index.flatten())  # (batch * k, features)
    return picked.reshape(*index.shape, *data.shape[2:])  # (batch, k, features)


for fn in (gather_flat, gather_index_select):
    print(
        f"{fn.__name__}: same as the loop: {torch.equal(fn(data, index), gather_loop(data, index))}"
    )

# sphinx_gallery_start_ignore
assert torch.equal(gather_flat(data, index), gather_loop(data, index))
assert torch.equal(gather_index_select(data, index), gather_loop(data, index))
# sphinx_gallery_end_ignore

# %%
# Why index_select beats advanced indexing
# ----------------------------------------
# Both do the same job, but not the same work. Advanced indexing is a general kernel:
# for every *element* of the output it reads the index that applies, checks it,
# computes an address and copies one number. :meth:`~torch.Tensor.index_select` knows
# that whole rows are picked: it reads and checks each index once and copies the row
# in one piece. The difference should therefore grow with the width of a row. Below,
# the same 8,192 rows are picked from tables whose rows are 1 to 256 numbers wide.
# Each of 11 rounds times the two back to back, so that a change in this shared
# machine's load hits both alike; the ratio is the median over the rounds, and the
# quartiles of the rounds' ratios follow in brackets.
import statistics
from functools import partial

widths = [1, 4, 16, 64, 256]
by_width = {}
for width in widths:
    wide = make_inputs(1024, width)  # 1024 × 8 = 8,192 rows picked
    ratios = []
    for _ in range(11):
        advanced = time_callable(partial(gather_flat, *wide), device=device, repeats=1)
        selected = time_callable(partial(gather_index_select, *wide), device=device, repeats=1)
        ratios.append(advanced.median / selected.median)
    q1, by_width[width], q3 = statistics.quantiles(ratios, n=4, method="inclusive")
    print(
        f"rows {width:>3} numbers wide: index_select {by_width[width]:4.1f}× as fast ({q1:.1f}–{q3:.1f})"
    )

# sphinx_gallery_start_ignore
if device.type == "cpu":
    assert by_width[16] > 1.5 * by_width[1], by_width
# sphinx_gallery_end_ignore

# %%
# With rows of one number both do the same work, one index per number copied. The
# advantage of index_select appears as the rows widen; where it shrinks again, as
# copying the rows themselves takes over, depends on the device. The rows in the rest
# of this page are 8 numbers wide.
#
# The hardened version, and the trap it avoids
# --------------------------------------------
# The flat index has a trap: a negative index, which the loop reads from the end of
# its own rows, reaches into the *previous* element's rows instead. With three batch
# elements of four rows each, the first picking its row 0 and the others row ``-1``,
# the loop returns 0, 7 and 11; both flat versions hand the last two elements their
# neighbour's last row. An index past the end of its own rows (``4`` here) reaches
# into the *next* element's rows the same way. (Where the very first element's index
# is negative, index_select at least raises: the position falls before the start of
# the table.)
# :func:`effpt.ops.batch_gather` is ``gather_index_select`` hardened: it checks shapes,
# dtypes and devices with errors that name them, maps negative indices into their own
# row, does its bounds arithmetic in int64 whatever the index's integer dtype, and
# sends an index outside ``[-rows, rows)`` past the end of the table, so that
# index_select raises instead of quietly reading a neighbouring row.
from effpt.ops import batch_gather

tiny = torch.arange(12.0, device=device).reshape(3, 4, 1)  # (batch, rows, features)
last_but_first = torch.tensor([[0], [-1], [-1]], device=device)  # (batch, k)
print("loop:               ", gather_loop(tiny, last_but_first).flatten().tolist())
print("flat + offset:      ", gather_flat(tiny, last_but_first).flatten().tolist(), "<- wrong")
print(
    "flat + index_select:", gather_index_select(tiny, last_but_first).flatten().tolist(), "<- wrong"
)
print("effpt.ops version:  ", batch_gather(tiny, last_but_first).flatten().tolist())

# sphinx_gallery_start_ignore
assert gather_loop(tiny, last_but_first).flatten().tolist() == [0.0, 7.0, 11.0]
assert gather_flat(tiny, last_but_first).flatten().tolist() == [0.0, 3.0, 7.0]
assert gather_index_select(tiny, last_but_first).flatten().tolist() == [0.0, 3.0, 7.0]
assert torch.equal(batch_gather(tiny, last_but_first), gather_loop(tiny, last_but_first))
past_the_end = torch.tensor([[4], [0], [0]], device=device)
assert gather_flat(tiny, past_the_end).flatten().tolist() == [4.0, 4.0, 8.0]
# sphinx_gallery_end_ignore

# %%
# Vectorised: the library's gather
# --------------------------------
# :func:`torch.take_along_dim` (like :func:`torch.gather`, which needs its index
# expanded by hand) picks along one dimension with an index that broadcasts over the
# others; here the index gets a trailing axis of size 1 so that it covers every
# feature. How it treats a negative index has changed between releases: older ones
# raise an error, newer ones count from the end of each element's own rows, as the
# loop does. The second line shows what this one does on the CPU.


def gather_take_along(data: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return torch.take_along_dim(data, index[:, :, None], dim=1)  # (batch, k, features)


print("same as the loop:", torch.equal(gather_take_along(data, index), gather_loop(data, index)))
try:  # on the CPU: on a GPU a rejected index is a device-side assertion, fatal to the process
    picked = gather_take_along(tiny.cpu(), last_but_first.cpu()).flatten().tolist()
    print("with the negative indices above:", picked)
except RuntimeError as error:
    print("with the negative indices above:", error)

# sphinx_gallery_start_ignore
assert torch.equal(gather_take_along(data, index), gather_loop(data, index))
assert torch.equal(batch_gather(data, index), gather_loop(data, index))
# sphinx_gallery_end_ignore

# %%
# Timing over batch sizes
# -----------------------
# Every variant is timed with :func:`effpt.bench.compare` at each batch size, after a
# check that it returns exactly what the loop returns. The variants take turns, one
# block of each per round, so that a change in the machine's load hits them alike;
# the rounds go on until the spreads are small or the time budget is spent, and each
# measurement keeps its quartiles.
from effpt.bench import compare, speedup

batch_sizes = (
    [16, 64, 256, 1024, 4096, 16384] if device.type == "cuda" else [16, 64, 256, 1024, 4096]
)
variants = {
    "python loop": gather_loop,
    "TorchScript loop": gather_loop_scripted,
    "flat + offset": gather_flat,
    "flat + index_select": gather_index_select,
    "take_along_dim": gather_take_along,
    "effpt.ops": batch_gather,
}
records = {}
for batch in batch_sizes:
    data, index = make_inputs(batch)
    expected = gather_loop(data, index)
    for fn in variants.values():
        assert torch.equal(fn(data, index), expected)
    records[batch] = compare(
        f"batch gather, batch {batch}",
        {name: (lambda fn=fn, d=data, i=index: fn(d, i)) for name, fn in variants.items()},
        device=device,
        show=batch == batch_sizes[-1],  # print the largest batch's table
    )

# %%
# Cost against batch size
# -----------------------
# On log–log axes a cost proportional to the batch size is a line of slope one. The
# bars are each measurement's interquartile range; on the right, each speed-up over
# the loop carries the interval that those ranges allow (1 means no faster).
import matplotlib.pyplot as plt

fig, (ax_time, ax_speed) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
loop = [records[b][0] for b in batch_sizes]
for j, name in enumerate(variants):
    rec = [next(r for r in records[b] if r.variant == name) for b in batch_sizes]
    yerr = [[r.median_s - r.q1_s for r in rec], [r.q3_s - r.median_s for r in rec]]
    bars = ax_time.errorbar(
        batch_sizes, [r.median_s for r in rec], yerr=yerr, marker="o", capsize=3, label=name
    )
    if name == "python loop":
        continue  # the loop against itself is 1×
    ratios = [speedup(slow, fast) for slow, fast in zip(loop, rec, strict=True)]
    ax_speed.errorbar(
        [b * 1.04 ** (j - 3) for b in batch_sizes],  # side by side, not on top of each other
        [r.value for r in ratios],
        yerr=[[r.value - r.low for r in ratios], [r.high - r.value for r in ratios]],
        marker="o",
        capsize=3,
        color=bars[0].get_color(),
    )
ax_time.loglog(
    [compiled_batch],
    [compiled_time.median],
    marker="*",
    markersize=14,
    linestyle="none",
    color="black",
    label="torch.compile loop",
)
ax_time.set(xlabel="batch size", ylabel="time per call (s)", title="Batch gather: time per call")
ax_speed.axhline(1, color="gray", linestyle=":")
ax_speed.set(xscale="log", yscale="log", xlabel="batch size", ylabel="speed-up over the loop (×)")
ax_speed.set_title("Speed-up over the Python loop")
fig.legend(loc="outside right upper", fontsize="small")
plt.show()

# %%
# How fast each cost grows, as the slope between the smallest and the largest batch
# (1 means proportional to the batch):
from math import log

for name in variants:
    first, last = (
        next(r for r in records[b] if r.variant == name) for b in (batch_sizes[0], batch_sizes[-1])
    )
    slope = log(last.median_s / first.median_s) / log(batch_sizes[-1] / batch_sizes[0])
    print(f"{name:>20}: slope {slope:.2f}")


# sphinx_gallery_start_ignore
def _slope(name):
    first, last = (
        next(r for r in records[b] if r.variant == name) for b in (batch_sizes[0], batch_sizes[-1])
    )
    return log(last.median_s / first.median_s) / log(batch_sizes[-1] / batch_sizes[0])


assert _slope("python loop") > 0.8, _slope("python loop")
assert _slope("flat + index_select") < _slope("python loop"), _slope("flat + index_select")
# sphinx_gallery_end_ignore

# %%
# The loops pay per batch element from the start: their slope is close to one.
# ``flat + index_select`` grows far more slowly over this range, because at small
# batches its time is mostly the fixed cost of the few operations it runs (see
# :doc:`plot_where_time_goes`), which does not grow with the batch. Each batch size is
# a separate comparison, seconds after the previous one, and this shared machine's
# load changes in between; a point that leaves its line's trend, above all one with a
# long bar (repeats that disagree), says more about the machine than about the
# method. Trust the trend, and a ratio only as far as its interval.
#
# The guide's claims against this machine
# ---------------------------------------
# The Effective PyTorch guide found the TorchScript loop about 10 % faster than the
# Python loop and its vectorised version about 100 times faster. Its vectorised code
# called ``.cuda()``, so it was measured on a GPU; on another device the comparison is
# not like for like. The ratios at the largest batch measured here:
largest = {r.variant: r for r in records[batch_sizes[-1]]}
print(f"batch {batch_sizes[-1]}, {device.type}:")
for name, claim in (("TorchScript loop", "about 1.1×"), ("flat + offset", "about 100×")):
    ratio = speedup(largest["python loop"], largest[name])
    print(f"  {name:<16} {ratio} the Python loop's speed, {ratio.verdict}   (guide: {claim})")
# sphinx_gallery_start_ignore
scripted_gain = speedup(largest["python loop"], largest["TorchScript loop"]).value
vectorised_gain = speedup(largest["python loop"], largest["flat + index_select"]).value
assert vectorised_gain > 3 * scripted_gain, (scripted_gain, vectorised_gain)
# sphinx_gallery_end_ignore
small = {r.variant: r for r in records[compiled_batch]}
ratio = speedup(small["python loop"], compiled_time)
print(
    f"batch {compiled_batch}: torch.compile loop {ratio} the Python loop's speed, "
    f"{ratio.verdict}, after {format_seconds(compile_s)} of compiling"
)

# %%
# Summary
# -------
# - A Python loop over the batch costs a few small operations per element. At the
#   largest batch, scripting the loop with TorchScript gains far less than vectorising
#   it; :func:`torch.compile` unrolls the loop into a graph that grows with the batch
#   and is tied to its size.
# - One flat index (batch offset plus row) does the same work in a single call; create
#   its offsets on the data's device, never with ``.cuda()``.
# - Use that index with ``index_select``, which copies whole rows, rather than as an
#   advanced index, which works element by element.
# - Flat indices turn negative or out-of-range indices into silent reads from a
#   neighbouring element; :func:`effpt.ops.batch_gather` guards against both.
