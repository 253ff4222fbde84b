"""
Make a training run reproducible, and know where that stops
===========================================================

.. effpt-before-you-start::
   :learn: - Seed Python, NumPy and torch, and pass your own ``torch.Generator`` where
             other code shares the global stream.
           - See which operations ``torch.use_deterministic_algorithms(True)`` refuses on
             your device, and which CUDA settings go with it.
           - Count the distinct results of a float32 sum over 1 to 4 threads, and read the
             verdict.
           - Tell what no setting makes reproducible: other machines, devices and
             releases.
   :read-first: Nothing: this page needs no other page.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU); the sums over 1 to 4 threads run
           on the CPU on every machine, and the last section compares the CPU's random
           numbers with the GPU's only where there is one.

A run you can repeat bit for bit turns "the loss went up after my change" into a
question with an answer. A seed alone rarely gives you that: other code draws from the
same random stream, some kernels add in a different order every time, and the number of
threads changes the order of a sum. This page pins down each of these, shows what
:func:`torch.use_deterministic_algorithms` refuses, and measures on this machine what
no flag can promise.
"""

# %%
# Seeds repeat a stream
# ---------------------
# :func:`torch.manual_seed` resets the global generator of the CPU and of every GPU;
# Python's :mod:`random` and NumPy keep their own streams and need their own seeds.
# Reseeding repeats the draws exactly.
import random

import numpy as np
import torch

from effpt.device import describe, pick_device

device = pick_device()
print(describe(device))


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002  (NumPy's global stream, which libraries use)
    torch.manual_seed(seed)  # CPU and every CUDA/MPS device


seed_everything(0)
first = (random.random(), np.random.rand(), torch.rand(3))  # noqa: NPY002
seed_everything(0)
again = (random.random(), np.random.rand(), torch.rand(3))  # noqa: NPY002
print(first, again, sep="\n")

# sphinx_gallery_start_ignore
assert first[:2] == again[:2] and torch.equal(first[2], again[2])
# sphinx_gallery_end_ignore

# %%
# Pass a generator instead of sharing the global stream
# -----------------------------------------------------
# The global stream is shared with every library call that draws from it, so a harmless
# change elsewhere shifts your draws. Iterating a :class:`~torch.utils.data.DataLoader`
# is such a call: it draws one number from the global stream to seed its workers, even
# without workers and without shuffling. Below, an evaluation pass added before the
# shuffle changes the shuffle. A :class:`torch.Generator` that you create and pass is
# yours alone, and the same pass leaves its order unchanged.
from torch.utils.data import DataLoader


def evaluate() -> None:
    for _ in DataLoader(range(8), batch_size=4):  # an evaluation pass, no shuffling
        pass


orders = {}
for with_eval in (False, True):
    torch.manual_seed(0)
    own = torch.Generator().manual_seed(0)
    if with_eval:
        evaluate()
    orders[with_eval] = (torch.randperm(8), torch.randperm(8, generator=own))
print(f"global stream:  {orders[False][0].tolist()} -> {orders[True][0].tolist()}")
print(f"own generator:  {orders[False][1].tolist()} -> {orders[True][1].tolist()}")

# sphinx_gallery_start_ignore
assert not torch.equal(orders[False][0], orders[True][0])
assert torch.equal(orders[False][1], orders[True][1])
# sphinx_gallery_end_ignore

# %%
# The same holds for a DataLoader's shuffling (``DataLoader(..., generator=g)``) and for
# :mod:`torch.nn.init` functions, which take a ``generator`` argument too. With workers,
# each worker needs its own seed derived from that generator; how that goes wrong and how
# to fix it is :doc:`/auto_examples/data/plot_randomness_in_workers`.
#
# Ask for deterministic kernels
# -----------------------------
# Some kernels are nondeterministic by design: on a GPU, many threads add into the same
# place with atomic operations in whatever order they arrive. With
# ``torch.use_deterministic_algorithms(True)``, PyTorch picks a deterministic kernel where
# it has one and raises a ``RuntimeError`` where it has none. Which operations raise
# depends on the device: the cell runs a few on this page's device and prints what each
# did. ``put_`` without accumulation raises everywhere, since two writes to one index
# could land in either order; the others are among those that PyTorch's documentation
# lists as raising on CUDA.
import torch.nn.functional as F

ops = {
    "put_(accumulate=False)": lambda: torch.zeros(4, device=device).put_(
        torch.tensor([0, 0], device=device), torch.tensor([1.0, 2.0], device=device)
    ),
    "histc": lambda: torch.histc(torch.rand(16, device=device), bins=4),
    "bincount(weights=...)": lambda: torch.bincount(
        torch.tensor([0, 1, 1], device=device), weights=torch.rand(3, device=device)
    ),
    "adaptive_avg_pool2d backward": lambda: (
        F.adaptive_avg_pool2d(torch.rand(1, 1, 6, 6, device=device, requires_grad=True), 4)
        .sum()
        .backward()
    ),
}
outcome = {}
torch.use_deterministic_algorithms(True)
try:
    for name, op in ops.items():
        try:
            op()
            outcome[name] = "runs"
        except RuntimeError as exc:
            outcome[name] = "raises: " + str(exc).split(",")[0]
    empty = torch.empty(3, device=device)  # uninitialized memory is filled, with NaN
finally:
    torch.use_deterministic_algorithms(False)
for name, result in outcome.items():
    print(f"{device.type}: {name:<30} {result}")
print(f"torch.empty(3) in deterministic mode: {empty.tolist()}")

# sphinx_gallery_start_ignore
assert outcome["put_(accumulate=False)"].startswith("raises: put_ does not have a deterministic"), (
    outcome
)
if device.type in ("cpu", "cuda"):
    assert empty.isnan().all(), empty
# sphinx_gallery_end_ignore

# %%
# Deterministic mode also fills memory from :func:`torch.empty` with NaN (see
# ``torch.utils.deterministic.fill_uninitialized_memory``), so that reading memory nobody
# wrote shows up instead of varying from run to run. On CUDA two more settings belong
# with it: ``torch.backends.cudnn.benchmark = False``, so that cuDNN does not pick its
# algorithm by timing, and the environment variable ``CUBLAS_WORKSPACE_CONFIG=:4096:8``,
# set before the first cuBLAS call, without which deterministic mode refuses matrix
# products there.
import os

print(f"cudnn.benchmark: {torch.backends.cudnn.benchmark}")
print(f"CUBLAS_WORKSPACE_CONFIG: {os.environ.get('CUBLAS_WORKSPACE_CONFIG', 'not set')}")

# %%
# What the threads do to a sum
# ----------------------------
# A float32 sum rounds after every addition, so its bits depend on the order of the
# additions. A CPU reduction splits its numbers among the threads of the intra-op pool
# and adds the partial sums at the end, so another thread count can mean another order
# and other last bits. Whether it does depends on the kernel, the vector width and the
# size at which the pool splits the work. The cell sums the same numbers with 1 to 4
# threads (a CPU setting: this runs on the CPU on every machine) and counts the
# distinct results. Before you run it: will your CPU's sums change with the threads?
threads_before = torch.get_num_threads()
gen = torch.Generator().manual_seed(0)
distinct, by_threads = {}, {}
for n in (10_000, 100_000, 1_000_000):
    v = torch.randn(n, generator=gen)  # (n,) float32
    for name, reduce in (("sum", torch.sum), ("dot", lambda t: torch.dot(t, t))):
        results = []
        for threads in (1, 2, 3, 4):
            torch.set_num_threads(threads)
            results.append(reduce(v).item())
        by_threads[(name, n)] = results
        distinct[(name, n)] = len(set(results))
torch.set_num_threads(threads_before)
for (name, n), count in distinct.items():
    print(f"{name} of {n:>9,} float32 numbers: {count} distinct result(s) over 1-4 threads")

# %%
# The figure draws each result's distance from the one-thread result, in units of the
# spacing between adjacent float32 numbers there: points off zero are other bits.
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
for i, ((name, n), results) in enumerate(by_threads.items()):
    step = float(np.spacing(np.float32(results[0])))  # one float32 step at the 1-thread sum
    offsets = [(r - results[0]) / step for r in results]
    shift = (i - (len(by_threads) - 1) / 2) * 0.05  # keep equal points apart
    ax.plot([t + shift for t in (1, 2, 3, 4)], offsets, "o", label=f"{name}, n={n:,}")
ax.axhline(0, color="grey", linewidth=0.8)
ax.set(
    xticks=(1, 2, 3, 4),
    xlabel="threads",
    ylabel="float32 steps from the 1-thread result",
    title=f"{max(distinct.values())} distinct result(s) at most, over 1 to 4 threads",
)
ax.legend(fontsize=8, ncols=2)
plt.show()

# %%
# The expectation states that the bits depend on the thread count:
from effpt.expect import expect

worst = max(distinct.values())
_ = expect(
    "the bits of a float32 sum or dot product on this CPU depend on the thread count (1 to 4)",
    worst,
    above=1,
    unit="distinct results",
    device="cpu",
)

# %%
# What reproducibility cannot promise
# -----------------------------------
# On one machine, seeds, your own generators, deterministic mode and a fixed thread
# count remove the differences PyTorch controls; a run needs a little more. Set
# ``PYTHONHASHSEED`` before Python starts, or a set of strings may iterate in another
# order in each process. Keep deterministic mode strict: with ``warn_only=True`` an op
# without a deterministic kernel only warns, and still varies. Across processes,
# collectives such as all-reduce add in an order that changes with the number of ranks.
# Even then PyTorch's notes promise fewer sources of difference, not a bit-for-bit repeat.
#
# Across machines nothing does, as PyTorch's reproducibility notes say for releases,
# commits and platforms: wider vectors add in another order, a GPU runs other kernels
# and draws from a generator of another algorithm, and a new release may change a
# kernel or how many numbers a function draws. Where this page has a GPU, the cell
# shows the same seed giving other numbers there.
torch.manual_seed(0)
on_cpu = torch.rand(3)
if device.type != "cpu":
    torch.manual_seed(0)
    print(f"cpu: {on_cpu.tolist()}\n{device.type}: {torch.rand(3, device=device).tolist()}")
else:
    print(f"cpu: {on_cpu.tolist()} (no GPU here to compare with)")

# %%
# Summary
# -------
# - Seed Python, NumPy and torch; better, pass your own ``torch.Generator`` wherever a
#   function draws (``randperm``, ``DataLoader``, ``nn.init``): the global stream is
#   shared with every library call, and a DataLoader pass draws from it.
#
# - ``torch.use_deterministic_algorithms(True)`` picks deterministic kernels and raises
#   for operations that have none on the device (``put_`` everywhere, more on CUDA); on
#   CUDA add ``cudnn.benchmark = False`` and ``CUBLAS_WORKSPACE_CONFIG``.
#
# - Seed DataLoader workers as :doc:`/auto_examples/data/plot_randomness_in_workers`
#   shows.
#
# - Reproducible at best means: same machine, same versions, same thread count, same
#   ``PYTHONHASHSEED``, and deterministic mode that raises rather than warns. A float sum's
#   bits may change with the number of threads (measured above), and across devices
#   and releases; compare results across them with a tolerance, not bit for bit.
