"""
Vectorise a batch gather: five ways, measured
=============================================

"For every batch element ``i``, pick the rows ``index[i]`` of ``input[i]``" is a loop
that appears all over machine-learning code, from beam search to point clouds. Written
as a Python loop it launches a few small operations per batch element. This page
writes it five ways, checks that they agree, and measures how their cost grows with
the batch size.

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


def make_inputs(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    data = torch.randn(batch, rows, features, device=device)  # (batch, rows, features)
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
# The source of this example suggested :func:`torch.jit.script` for loops that cannot
# be batched, and found it about 10 % faster. TorchScript is deprecated (see the
# previous page): its warning is printed once here, then silenced around the call.
import warnings

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    gather_loop_scripted = torch.jit.script(gather_loop)
print(f"{caught[0].category.__name__}: {caught[0].message}")

# sphinx_gallery_start_ignore
assert issubclass(caught[0].category, DeprecationWarning)
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
compiled_s = time_callable(
    lambda: gather_loop_compiled(small_data, small_index), device=device
).median
print(
    f"batch {compiled_batch}: compiling took {format_seconds(compile_s)}, a call then takes {format_seconds(compiled_s)}"
)

# sphinx_gallery_start_ignore
assert torch.equal(
    gather_loop_compiled(small_data, small_index), gather_loop(small_data, small_index)
)
# sphinx_gallery_end_ignore

# %%
# Vectorised: flat indices plus an offset
# ---------------------------------------
# Merge the batch and row axes into one, then shift each element's indices by the
# number of rows before it: a single indexing operation does all the work. The
# original version of this trick built its offsets with ``torch.arange(...).cuda()``,
# which fails on a machine without a GPU and copies from the CPU on one that has it;
# ``device=data.device`` creates them where the data already is.


def gather_flat(data: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    batch, n = data.shape[:2]
    flat = data.reshape(batch * n, *data.shape[2:])  # (batch * rows, features)
    offset = torch.arange(batch, device=data.device) * n  # (batch,)
    return flat[index + offset[:, None]]  # (batch, k, features)


print("same as the loop:", torch.equal(gather_flat(data, index), gather_loop(data, index)))

# sphinx_gallery_start_ignore
assert torch.equal(gather_flat(data, index), gather_loop(data, index))
# sphinx_gallery_end_ignore

# %%
# The flat trick has a trap: a negative index, which the loop reads from the end of
# its own row, reaches into the *previous* element's rows instead. With three batch
# elements of four rows each and index ``-1`` everywhere, each element below should
# get its own last row (3, 7 and 11), and the flat version hands out its neighbour's.
# :func:`effpt.ops.batch_gather`, this site's vectorised version, maps negative
# indices into their own row and raises on anything out of range.
from effpt.ops import batch_gather

tiny = torch.arange(12.0, device=device).reshape(3, 4, 1)  # (batch, rows, features)
minus_one = torch.full((3, 1), -1, device=device)  # (batch, k)
print("loop:             ", gather_loop(tiny, minus_one).flatten().tolist())
print("flat + offset:    ", gather_flat(tiny, minus_one).flatten().tolist(), "<- wrong")
print("effpt.ops version:", batch_gather(tiny, minus_one).flatten().tolist())

# sphinx_gallery_start_ignore
assert gather_loop(tiny, minus_one).flatten().tolist() == [3.0, 7.0, 11.0]
assert gather_flat(tiny, minus_one).flatten().tolist() == [11.0, 3.0, 7.0]
assert torch.equal(batch_gather(tiny, minus_one), gather_loop(tiny, minus_one))
# sphinx_gallery_end_ignore

# %%
# Vectorised: the library's gather
# --------------------------------
# :func:`torch.take_along_dim` (like :func:`torch.gather`, which needs its index
# expanded by hand) picks along one dimension with an index that broadcasts over the
# others; here the index gets a trailing axis of size 1 so that it covers every feature.


def gather_take_along(data: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return torch.take_along_dim(data, index[:, :, None], dim=1)  # (batch, k, features)


print("same as the loop:", torch.equal(gather_take_along(data, index), gather_loop(data, index)))

# sphinx_gallery_start_ignore
assert torch.equal(gather_take_along(data, index), gather_loop(data, index))
assert torch.equal(batch_gather(data, index), gather_loop(data, index))
# sphinx_gallery_end_ignore

# %%
# Timing over batch sizes
# -----------------------
# Every variant is timed with :func:`effpt.bench.compare` at each batch size, after a
# check that it returns exactly what the loop returns. The table lists the median time
# per call.
from effpt.bench import compare

batch_sizes = (
    [16, 64, 256, 1024, 4096, 16384] if device.type == "cuda" else [16, 64, 256, 1024, 4096]
)
variants = {
    "python loop": gather_loop,
    "TorchScript loop": gather_loop_scripted,
    "flat + offset": gather_flat,
    "take_along_dim": gather_take_along,
    "effpt.ops": batch_gather,
}
times = {name: [] for name in variants}
for batch in batch_sizes:
    data, index = make_inputs(batch)
    expected = gather_loop(data, index)
    for fn in variants.values():
        assert torch.equal(fn(data, index), expected)
    records = compare(
        f"batch gather, batch {batch}",
        {name: (lambda fn=fn, d=data, i=index: fn(d, i)) for name, fn in variants.items()},
        device=device,
        repeats=5,
        show=False,
    )
    for record in records:
        times[record.variant].append(record.median_s)

print(f"{'batch':>18}" + "".join(f"{b:>10}" for b in batch_sizes))
for name, row in times.items():
    print(f"{name:>18}" + "".join(f"{format_seconds(t):>10}" for t in row))

# %%
# Cost against batch size
# -----------------------
# On log–log axes a cost proportional to the batch size is a line of slope one. The
# loops pay per batch element from the start; the vectorised versions pay a fixed
# overhead that hides the growth at small sizes. The right panel shows each
# variant's speed-up over the Python loop.
import matplotlib.pyplot as plt

fig, (ax_time, ax_speed) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
for name, row in times.items():
    ax_time.loglog(batch_sizes, row, marker="o", label=name)
    ax_speed.semilogx(
        batch_sizes,
        [loop / t for loop, t in zip(times["python loop"], row, strict=True)],
        marker="o",
        label=name,
    )
ax_time.loglog(
    [compiled_batch],
    [compiled_s],
    marker="*",
    markersize=14,
    linestyle="none",
    color="black",
    label="torch.compile loop",
)
ax_time.set(xlabel="batch size", ylabel="time per call (s)", title="Batch gather: time per call")
ax_speed.set_yscale("log")
ax_speed.set(
    xlabel="batch size", ylabel="speed-up over the Python loop (×)", title="Speed-up over the loop"
)
ax_time.legend(fontsize="small")
ax_speed.legend(fontsize="small")
plt.show()

# %%
# The source's claims against this machine
# ----------------------------------------
# The source found the TorchScript loop about 10 % faster than the Python loop and the
# vectorised version about 100 times faster. The ratios at the largest batch size
# measured here:
loop_s = times["python loop"][-1]
print(f"batch {batch_sizes[-1]}, on {device.type}:")
print(
    f"  TorchScript loop {loop_s / times['TorchScript loop'][-1]:6.2f}× the Python loop   (source: about 1.1×)"
)
for name in ("flat + offset", "take_along_dim", "effpt.ops"):
    print(f"  {name:<16} {loop_s / times[name][-1]:6.0f}× the Python loop   (source: about 100×)")
small = batch_sizes.index(compiled_batch)
print(
    f"batch {compiled_batch}: torch.compile loop {times['python loop'][small] / compiled_s:.1f}× the Python loop, after {format_seconds(compile_s)} of compiling"
)

# %%
# Summary
# -------
# - A Python loop over the batch costs a few small operations per element; no
#   compiler fixes that fully. TorchScript shaves a little; :func:`torch.compile`
#   unrolls the loop into a graph that grows with the batch and is tied to its size.
# - One indexing operation over flattened rows does the same work in a single call;
#   create its offsets on the data's device, never with ``.cuda()``.
# - Flat indices turn negative or out-of-range indices into silent reads from a
#   neighbouring element; :func:`effpt.ops.batch_gather` guards against both.
# - Check every variant against the loop before timing it.
