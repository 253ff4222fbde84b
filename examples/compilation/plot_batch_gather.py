"""
Vectorise a batch gather: from a Python loop to one index_select
================================================================

.. effpt-before-you-start::
   :learn: - Replace a Python loop over the batch by one flat index, with its offsets made
             on the data's device.
           - See why ``torch.compile`` ties the loop to one batch size, and compare it and
             TorchScript with vectorising.
           - Compare advanced indexing with ``index_select`` on one thread and on all, and
             see a flat index read a negative index from the wrong batch element.
           - Measure how each version's cost grows with the batch size.
   :read-first: :doc:`plot_where_time_goes` for an operation's fixed cost;
                :doc:`plot_torchscript_to_compile` for TorchScript and ``torch.compile``;
                :doc:`/explanations/timing` for how ``compare`` measures.
   :needs: A CPU is enough, with a C++ compiler for ``torch.compile`` on the CPU;
           Inductor keeps what it builds in an on-disk cache. The page runs on a CUDA or
           Apple MPS GPU when there is one (``EFFPT_DEVICE=cpu`` keeps it on the CPU),
           with larger batches on CUDA; one-thread timings are taken on the CPU only, and
           ``take_along_dim``'s negative indices are tried on the CPU.

"For every batch element ``i``, pick the rows ``index[i]`` of ``input[i]``" is a loop
that appears all over machine-learning code, from beam search to point clouds. Written
as a Python loop it launches a few small operations per batch element. This page
writes it as a loop, compiles the loop two ways, vectorises it with a flat index,
compares two ways of using that index (advanced indexing and
:meth:`torch.Tensor.index_select`) on one thread and on all of them, and measures how
each version's cost grows with the batch size.
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
print(describe(device))  # on a CPU, the number of threads PyTorch uses

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
# be batched, and found it about 10 % faster. TorchScript is deprecated, and recent
# releases say so: :func:`effpt.torchscript.script` calls :func:`torch.jit.script` and
# prints that warning (on an older release, a line saying it raised none), caught the
# way :doc:`/auto_examples/compilation/plot_torchscript_to_compile` shows.
from effpt.torchscript import script

gather_loop_scripted = script(gather_loop)

# sphinx_gallery_start_ignore
assert torch.equal(gather_loop_scripted(data, index), gather_loop(data, index))
# sphinx_gallery_end_ignore

# %%
# The same loop under torch.compile
# ---------------------------------
# :func:`torch.compile` follows the Python loop while it captures, so the graph
# contains one copy of the loop body per batch element: the loop is *unrolled*, and
# the graph is tied to that batch size. ``torch._dynamo.explain`` counts the captured
# operations without compiling them.
op_counts = {}
for batch in (8, 32):
    report = torch._dynamo.explain(gather_loop)(*make_inputs(batch))
    op_counts[batch] = report.op_count
    print(f"batch {batch:>2}: {report.op_count} operations in the captured graph")

# sphinx_gallery_start_ignore
assert op_counts[32] > 3 * op_counts[8], op_counts
# sphinx_gallery_end_ignore

# %%
# A bigger graph takes longer to compile, and every new batch size means a new graph,
# so the compiled loop is measured at one small batch size only. The first call
# compiles; its cost is reported apart from the later calls.
import time

from effpt.bench import format_seconds, time_callable

compiled_batch = 8
gather_loop_compiled = torch.compile(gather_loop)
small_data, small_index = make_inputs(compiled_batch)
start = time.perf_counter()
gather_loop_compiled(small_data, small_index)
compile_s = time.perf_counter() - start
compiled_time = time_callable(
    lambda: gather_loop_compiled(small_data, small_index), device=device, budget_s=0.2
)
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
# Advanced indexing or index_select: rows, checks and threads
# -----------------------------------------------------------
# Both do the same job, but not the same work. On a CPU, advanced indexing is a
# general kernel: it looks up each row's index once, then copies the row one *number*
# at a time, in a loop written for tensors of any shape and stride.
# :meth:`~torch.Tensor.index_select` knows that whole rows are picked: it checks each
# index and copies the row in one piece (one ``memcpy``, in torch's source at the time
# of writing). With rows of one number both do the same work per number copied; the
# wider the rows, the more the copy in one piece saves, so on one thread
# index_select's lead should grow with the width.
#
# The function below picks 8,192 rows both ways; each of 7 rounds times the two back
# to back, so that a change in the machine's load hits both alike.
import statistics
from functools import partial

from effpt.bench import num_threads  # runs a block on n threads, then restores the number
from effpt.records import Ratio


def index_select_lead(width: int, rounds: int = 7) -> Ratio:
    """How many times faster index_select picks 8,192 rows than advanced indexing:
    the median over the rounds, within the rounds' quartiles."""
    wide = make_inputs(1024, width)  # 1024 × 8 = 8,192 rows picked
    ratios = []
    for _ in range(rounds):  # one block of at least 5 ms per variant and round
        advanced = time_callable(
            partial(gather_flat, *wide), device=device, repeats=1, min_block_s=0.005
        )
        selected = time_callable(
            partial(gather_index_select, *wide), device=device, repeats=1, min_block_s=0.005
        )
        ratios.append(advanced.median / selected.median)
    q1, median, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
    return Ratio(median, q1, q3)


# %%
# With more threads a second difference enters: each CPU kernel splits its work among
# the intra-op threads above a size of its own (in torch's source at the time of
# writing, advanced indexing above 3,000 numbers copied, index_select above 32,768: at
# rows 1 and 4 numbers wide only advanced indexing splits). Waking the pool is a fixed
# cost (:doc:`/explanations/timing` explains it), so where only one kernel pays it the
# ratio shows which woke the pool, not which does less work. A GPU does not use the
# CPU's pool. So the rows are picked on one thread and on all of PyTorch's threads.
#
# Predict first: on one thread, is index_select's lead at rows 16 numbers wide at least
# 1.5 times its lead at rows of one number, as copying whole rows alone suggests? And
# on all threads?
all_threads = torch.get_num_threads()
# A GPU kernel does not use the CPU's thread pool: one column there.
thread_counts = sorted({1, all_threads}) if device.type == "cpu" else [all_threads]
widths = [1, 4, 16, 64, 256]
lead = {}
for threads in thread_counts:
    with num_threads(threads):
        for width in widths:
            lead[threads, width] = index_select_lead(width)

columns = {t: f"{t} thread{'s' if t > 1 else ''}" for t in thread_counts}
if device.type != "cpu":
    columns = {all_threads: device.type}
print("index_select's speed over advanced indexing, 8,192 rows picked (median, quartiles)")
print(f"{'row width':>12}" + "".join(f"{label:>22}" for label in columns.values()))
for width in widths:
    print(f"{width:>12}" + "".join(f"{lead[t, width]!s:>22}" for t in thread_counts))

# %%
# Each column gets its verdict; the machine it names says how many threads ran.
from effpt.expect import expect

for threads in thread_counts:
    where = "on one thread" if threads == 1 else "on all threads"
    if device.type != "cpu":
        where = f"on {device.type}"
    with num_threads(threads):  # so that the verdict names the threads that ran
        expect(
            f"index_select's lead over advanced indexing grows from rows 1 to 16 numbers wide, {where}",
            lead[threads, 16] / lead[threads, 1],
            above=1.5,
            device=device,
        )

# %%
# On one thread, a lead that grows with the width is the row-at-a-time copy at work;
# one that shrinks again at the widest rows means moving the bytes has taken over. An
# all-threads column far from the one-thread one is most likely the thread pool's
# doing; on a GPU, a column near 1× is launch overhead. Take away the mechanism, not a
# ranking, and measure at the thread count that will run your code. The rows in the
# rest of this page are 8 numbers wide.
#
# The hardened version, and the trap it avoids
# --------------------------------------------
# The flat index has a trap: a negative index, which the loop reads from the end of
# its own rows, reaches into the *previous* element's rows. With three elements of four
# rows each, the first picking row 0 and the others row ``-1``, the loop returns 0, 7
# and 11; both flat versions hand the last two their neighbour's last row. An index
# past the end (``4`` here) reaches into the *next* element's rows the same way.
#
# :func:`effpt.ops.batch_gather` is ``gather_index_select`` hardened: it checks shapes,
# dtypes and devices with errors that name them, maps negative indices into their own
# row, does its bounds arithmetic in int64, and sends an index outside
# ``[-rows, rows)`` past the end of the table, so that index_select raises instead of
# quietly reading a neighbour's row.
from effpt.ops import batch_gather

tiny = torch.arange(12.0, device=device).reshape(3, 4, 1)  # (batch, rows, features)
last_but_first = torch.tensor([[0], [-1], [-1]], device=device)  # (batch, k)
print("loop:               ", gather_loop(tiny, last_but_first).flatten().tolist())
print("flat + offset:      ", gather_flat(tiny, last_but_first).flatten().tolist(), "<- wrong")
print(
    "flat + index_select:", gather_index_select(tiny, last_but_first).flatten().tolist(), "<- wrong"
)
print("effpt.ops version:  ", batch_gather(tiny, last_but_first).flatten().tolist())

# Row 4 of a four-row element: past its end, into the next element's row 0.
past_the_end = torch.tensor([[4], [0], [0]], device=device)  # (batch, k)
print("index 4, flat + offset:", gather_flat(tiny, past_the_end).flatten().tolist(), "<- wrong")
try:  # on the CPU: on a GPU an index out of range is a device-side assertion, fatal
    batch_gather(tiny.cpu(), past_the_end.cpu())
except IndexError as error:
    print("index 4, effpt.ops version: IndexError:", error)

# sphinx_gallery_start_ignore
assert gather_loop(tiny, last_but_first).flatten().tolist() == [0.0, 7.0, 11.0]
assert gather_flat(tiny, last_but_first).flatten().tolist() == [0.0, 3.0, 7.0]
assert gather_index_select(tiny, last_but_first).flatten().tolist() == [0.0, 3.0, 7.0]
assert torch.equal(batch_gather(tiny, last_but_first), gather_loop(tiny, last_but_first))
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
# Every variant is timed with :func:`effpt.bench.compare` at each batch size (on a CPU,
# on all of PyTorch's threads), after a check that it returns exactly what the loop
# returns (how ``compare`` measures: :doc:`/explanations/timing`).
from effpt.bench import compare, speedup

# on a CPU, four sizes a factor of 8 apart: the loop's slow calls at the large ones set the page's time
batch_sizes = [8, 64, 256, 1024, 4096, 16384] if device.type == "cuda" else [8, 64, 512, 4096]
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
        # per variant, unless the spread settles sooner: more at the two batch sizes the
        # verdicts read (their ratios sit far from their thresholds), the least (five
        # blocks) in between
        budget_s=0.2 if batch in (batch_sizes[0], batch_sizes[-1]) else 0.1,
        show=batch == batch_sizes[-1],  # print the largest batch's table
    )

# %%
# Other processes and the thread pool
# -----------------------------------
# On a CPU the vectorised kernels split their work among PyTorch's threads once it is
# large enough; the loop's small operations never do. When other processes keep every
# core busy, a kernel that split its work can wait at its end for a helper thread the
# operating system has not yet scheduled. So the largest batch's flat + index_select is
# timed again on all threads and on one, taking turns, beside the machine's load. The
# timing cannot see the cause: where one thread is far faster while the load nears or
# passes the number of cores (this process included), waiting is the likely one, and
# the growth below measures the load too.
from effpt.machine import load_line

last_batch = batch_sizes[-1]
if device.type == "cpu" and all_threads > 1:
    last_data, last_index = make_inputs(last_batch)

    def on_threads(n: int):
        def run() -> torch.Tensor:
            with num_threads(n):
                return gather_index_select(last_data, last_index)

        return run

    print(load_line())
    _ = compare(
        f"flat + index_select, batch {last_batch}, all threads or one",
        {f"{all_threads} threads": on_threads(all_threads), "1 thread": on_threads(1)},
        device=device,
        budget_s=0.2,
    )
elif device.type == "cpu":
    print("PyTorch runs on one thread here: no thread pool to wait for")
else:
    print(f"on {device.type}, the kernels do not use the CPU's thread pool")

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
# on the log–log axes (1 means proportional to the batch); the interval comes from
# the quartiles of the two measurements.
from math import log

span = batch_sizes[-1] / batch_sizes[0]


def growth(name: str) -> Ratio:
    """How many times the time per call grew from the smallest to the largest batch."""
    first, last = (
        next(r for r in records[b] if r.variant == name) for b in (batch_sizes[0], batch_sizes[-1])
    )
    return speedup(last, first)  # the larger batch's time over the smaller's, with its interval


def slope(name: str) -> tuple[float, float, float]:
    g = growth(name)
    return log(g.value) / log(span), log(g.low) / log(span), log(g.high) / log(span)


for name in variants:
    value, low, high = slope(name)
    print(f"{name:>20}: slope {value:.2f} ({low:.2f}–{high:.2f})")

# %%
# A loop pays per batch element from the start, so its slope should be close to one
# on any device. A vectorised version runs the same few operations at every batch
# size: while their fixed cost (see :doc:`plot_where_time_goes`) outweighs the
# copying, its time barely grows, so over this range its slope should come out below
# the loop's. Once the copying dominates, it too grows in proportion to the batch; on a
# CPU, a kernel that starts using the thread pool at some batch size adds a step.
expect(
    "The Python loop's cost grows nearly in proportion to the batch",
    slope("python loop"),
    above=0.8,
    unit="",
    device=device,
)
_ = expect(
    "flat + index_select's cost grows less with the batch than the Python loop's",
    growth("python loop") / growth("flat + index_select"),
    above=1.0,
    device=device,
)

# %%
# Each batch size is a separate comparison, and the machine's load can change in
# between: trust the trend, and a point with a long bar only as far as its interval.
#
# The guide's claims against this machine
# ---------------------------------------
# The Effective PyTorch guide claimed two speed-ups for this loop, one for scripting it
# and one for vectorising it. Its vectorised code called ``.cuda()``, so that claim is
# scored only on a GPU; for scripting the guide names no device. The claims are written
# once, in :mod:`effpt.claims` (the :doc:`/measurements` page reads them too);
# :meth:`~effpt.claims.Claim.check` prints each beside this run's ratio at a batch of
# 4096, with the guide's own vectorised form, flat + offset.
from effpt.claims import claim

at_4096 = {r.variant: r for r in records[4096]}
claim("guide: TorchScript batch gather").check(at_4096["python loop"], at_4096["TorchScript loop"])
_ = claim("guide: vectorised batch gather").check(at_4096["python loop"], at_4096["flat + offset"])

# %%
# Scripting leaves the loop's per-element operations in place and saves only the
# Python between them; vectorising replaces them with a few operations for the whole
# batch. So vectorising, here with flat + index_select, should gain far more than
# scripting:
largest = {r.variant: r for r in records[batch_sizes[-1]]}
scripted_gain = speedup(largest["python loop"], largest["TorchScript loop"])
vectorised_gain = speedup(largest["python loop"], largest["flat + index_select"])
_ = expect(
    "At the largest batch, vectorising the loop gains over 3× what scripting it gains",
    vectorised_gain / scripted_gain,
    above=3.0,
    device=device,
)

# %%
# And :func:`torch.compile`, measured at the one small batch it was compiled for:
small = {r.variant: r for r in records[compiled_batch]}
ratio = speedup(small["python loop"], compiled_time)
print(
    f"batch {compiled_batch}: torch.compile loop {ratio} the Python loop's speed, "
    f"{ratio.verdict}, after {format_seconds(compile_s)} of compiling"
)

# %%
# Summary
# -------
# - A Python loop over the batch costs a few small operations per element. Scripting
#   it keeps those operations; vectorising replaces them. :func:`torch.compile`
#   unrolls the loop into a graph that grows with the batch and is tied to its size.
#
# - One flat index (batch offset plus row) does the same work in a single call; create
#   its offsets on the data's device, never with ``.cuda()``.
#
# - ``index_select`` copies whole rows where an advanced index copies number by
#   number, which should favour it more the wider the rows; on several threads each
#   kernel splits its work at its own size, which can reverse the ranking. Measure at
#   the thread count your code runs with.
#
# - Flat indices turn negative or out-of-range indices into silent reads from a
#   neighbouring element; :func:`effpt.ops.batch_gather` guards against both.
