"""
Time PyTorch code so that the numbers mean something
====================================================

.. effpt-before-you-start::
   :learn: - Write a timer that warms up, synchronises, repeats, and reports the median
             and the IQR.
           - Time a compiled function's first call apart from its later calls, and spot
             calls such as ``.item()`` that wait for the device.
           - Compare your timer with ``torch.utils.benchmark.Timer`` at the same number of
             threads.
           - Check that a faster formula computes the same thing, then time it and read
             ``torch.profiler``'s table of operators.
   :read-first: :doc:`/explanations/timing` for why these rules exist, and how
                ``effpt.bench.compare`` measures.
   :needs: A CPU is enough; ``torch.compile`` runs with ``backend="eager"`` here, so
           no C++ compiler is needed. The page runs on a CUDA or
           Apple MPS GPU when there is one (``EFFPT_DEVICE=cpu`` keeps it on the CPU);
           without one, a worker thread stands in for the GPU in the first section. The
           float64 reference of the loss is computed on the CPU.

Most pages in this family time two versions of some code against each other, and what
they conclude is only as good as the timing behind it. This page writes a
correct timer in a dozen lines (warm up, synchronise, repeat, report the median and the
spread), shows the mistakes it avoids, checks it against PyTorch's own timer, and times
two formulas for one loss, where only a measurement on your device says which to use.

Why the rules below exist is explained in :doc:`/explanations/timing`.
"""

# %%
# The device, and a stamp of what ran this page
# ---------------------------------------------
# :func:`effpt.device.pick_device` chooses CUDA, then MPS, then the CPU;
# :func:`effpt.device.describe` names the hardware, so every number below can be read
# against the machine that produced it.
import time

import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

# %%
# A timer around asynchronous work measures the launch
# ----------------------------------------------------
# A CUDA (or MPS) call returns as soon as the kernel is queued; the GPU works while
# Python moves on. A timer stopped right after the call measures the queueing, not the
# work. ``synchronize`` below waits for the queue to drain; a CPU operator has
# finished when it returns, so there it does nothing. Without a GPU the cell builds
# the same situation on the CPU: a worker thread plays the GPU, and ``submit`` plays
# the launch. Predict first: how much longer than the launch does waiting for the work
# take?
from concurrent.futures import ThreadPoolExecutor

from effpt.expect import expect


def synchronize(device: torch.device) -> None:
    """Wait until the work queued on ``device`` has finished."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


n = 4096 if device.type == "cuda" else 512
a = torch.randn(n, n, device=device)
b = torch.randn(n, n, device=device)

if device.type in ("cuda", "mps"):
    torch.mm(a, b)  # warm-up: the first call loads the matrix library
    synchronize(device)
    start = time.perf_counter()
    c = torch.mm(a, b)
    launched = time.perf_counter() - start
    synchronize(device)  # wait for the queued work
    finished = time.perf_counter() - start
else:
    print("no GPU here: a worker thread stands in for it")
    with ThreadPoolExecutor(max_workers=1) as gpu_standin:
        gpu_standin.submit(torch.mm, a, b).result()  # warm-up
        start = time.perf_counter()
        future = gpu_standin.submit(torch.mm, a, b)  # returns at once, like a launch
        launched = time.perf_counter() - start
        c = future.result()  # waits, like synchronize(device)
        finished = time.perf_counter() - start
print(f"timer stopped after the call:       {launched * 1e3:8.3f} ms")
print(f"timer stopped after waiting for it: {finished * 1e3:8.3f} ms")
print(f"the first timer missed {1 - launched / finished:.1%} of the time")

expect(
    "waiting for the product takes over twice as long as launching it",
    finished / launched,
    above=2.0,
    device=device,
)

# sphinx_gallery_start_ignore
torch.testing.assert_close(c, a @ b)
# sphinx_gallery_end_ignore

# %%
# A timer that holds
# ------------------
# The core of a correct timer fits in one cell. It calls the function once or more
# before the clock runs (*warm-up*), synchronises before starting and before stopping
# the clock, uses ``time.perf_counter()`` (monotonic, high resolution; never
# ``time.time()``), runs ``number`` calls per timed block so that a fast call is not
# lost in the timer's resolution, and repeats the block. Of the repeats it reports the
# median, which one slow outlier cannot move, and the interquartile range (IQR), which
# says how far apart the middle half of the repeats lie.
import statistics


def measure(fn, device, *, warmup=1, repeats=7, number=1) -> list[float]:
    """Seconds per call of ``fn()``: one value per repeated block of ``number`` calls."""
    for _ in range(warmup):
        fn()  # one-off costs are paid before the clock runs
    times = []
    for _ in range(repeats):
        synchronize(device)  # work queued earlier is not counted
        start = time.perf_counter()
        for _ in range(number):
            fn()
        synchronize(device)  # the work just queued is counted
        times.append((time.perf_counter() - start) / number)
    return times


def median_iqr(times: list[float]) -> tuple[float, float]:
    q1, median, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return median, q3 - q1


median, iqr = median_iqr(measure(lambda: a @ b, device))
print(f"{n}×{n} matrix product: median {median * 1e3:.2f} ms, IQR {iqr * 1e3:.2f} ms")

# %%
# The rest of this site times with :func:`effpt.bench.time_callable`, this timer
# hardened (it chooses ``number`` and the number of repeats itself), and compares
# variants with :func:`effpt.bench.compare`, which reports each speed-up with the
# interval its spread allows; :doc:`/explanations/timing` says how they work.
#
# The first call pays for everything lazy
# ---------------------------------------
# The first call of an operation can load a library, pick an algorithm, allocate a
# cache or, with :func:`torch.compile` (introduced on
# :doc:`plot_torchscript_to_compile`; here it only serves as a function with a costly
# first call), capture the code into a graph. With ``backend="eager"`` the captured
# graph runs as plain PyTorch: the first call pays for the capture alone, not for the
# C++ or Triton code that the default backend would build, which with an empty cache
# costs seconds more and is timed on
# :doc:`/auto_examples/performance/plot_compile_without_surprises`.
# Below, ``measure`` runs without a warm-up and times every call on its own.
from effpt.bench import format_seconds


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3)))


compiled_gelu = torch.compile(gelu_tanh, backend="eager")  # captures, builds no code
signal = torch.randn(100_000, device=device)
calls = measure(lambda: compiled_gelu(signal), device, warmup=0, repeats=30)
first_call, later_calls = calls[0], statistics.median(calls[1:])
print(f"first call (captures): {format_seconds(first_call)}")
print(f"each later call:       {format_seconds(later_calls)} (median of the next 29)")
print(f"the first call cost as much as {first_call / later_calls:,.0f} later ones")

later_q1, _, later_q3 = statistics.quantiles(calls[1:], n=4, method="inclusive")
expect(
    "the first call of a compiled function costs more than 20 later calls",
    (first_call / later_calls, first_call / later_q3, first_call / later_q1),
    above=20,
    device=device,
)

# sphinx_gallery_start_ignore
torch.testing.assert_close(compiled_gelu(signal), gelu_tanh(signal))
# sphinx_gallery_end_ignore

# %%
# Plotted call by call, on a logarithmic axis so that both show, the first call stands
# above the others by the factor printed above. A mean over all 30 calls would carry
# that one-off cost; the median of the calls after a warm-up is what each call costs.
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
ax.semilogy(range(1, len(calls) + 1), calls, marker="o", linestyle="none")
ax.axhline(later_calls, color="gray", linestyle=":", label="median of calls 2–30")
ax.annotate("first call: captures", (1, first_call), xytext=(6, first_call / 3))
ax.set(xlabel="call", ylabel="time (s)", title="A compiled function, call by call")
ax.set_ylim(min(calls) / 3, first_call * 10)  # every call in view, the fastest too
ax.legend(loc="center right")
plt.show()

# %%
# Synchronisation points that slip in
# -----------------------------------
# Some calls need a result on the host: ``.item()``, ``.cpu()``, ``.tolist()``,
# ``print(tensor)``, ``if tensor > 0:``, and operators whose output size depends on the
# data, such as :func:`torch.nonzero`. Each copies a value from the device to the
# host (for ``nonzero``, its output's size), and PyTorch's `CUDA semantics notes
# <https://docs.pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution>`__
# (asynchronous execution) say such a copy synchronises: it waits for the work queued
# before it, so inside a training loop each one drains the GPU's queue. Below, one
# loop reads its running loss every step, another keeps it on the device and reads it
# once at the end.
from effpt.bench import compare

weights = torch.randn(256, 256, device=device)
inputs = torch.randn(64, 256, device=device)


def read_every_step() -> float:
    total = 0.0
    for _ in range(50):
        total += (inputs @ weights).square().mean().item()  # waits for the device
    return total


def read_once() -> float:
    total = torch.zeros((), device=device)
    for _ in range(50):
        total += (inputs @ weights).square().mean()  # stays queued
    return total.item()


sync_records = compare(
    "50 steps, reading the loss",
    {".item() every step": read_every_step, "once at the end": read_once},
    device=device,
    budget_s=0.2,
)

# sphinx_gallery_start_ignore
assert abs(read_every_step() - read_once()) < 1e-3 * abs(read_once())
# sphinx_gallery_end_ignore

# %%
# On a GPU, each ``.item()`` makes Python wait until the queue has drained, and the
# device then idles while Python launches the next step; the loop that reads once
# keeps the queue full. How much that buys depends on how long a step's kernels run
# against the cost of launching them: the table above is this device's answer. On a
# CPU there is no queue to drain: each operator has finished when it returns, so
# ``.item()`` is a plain memory read, and the verdict in the table is about the cost
# of the calls themselves. To find synchronisations in real CUDA code,
# run it under ``torch.cuda.set_sync_debug_mode("warn")``: every synchronising call
# then warns.
#
# Checked against PyTorch's own timer
# -----------------------------------
# :class:`torch.utils.benchmark.Timer` follows the same rules and adapts the number of
# runs to the time available. But it runs the statement on **one thread** unless it
# is given ``num_threads`` (its documentation explains the default: single-threaded
# speed is a good indicator of an algorithm's intrinsic efficiency), while everything
# else on this page runs on all of PyTorch's threads. On a CPU, where threads share
# the work, that alone can change its figure. Compared like for like, with the same
# number of threads, the two timers should agree within the noise; the lines and the
# two expectations at the end say what this run shows.
from torch.utils import benchmark

from effpt.bench import Timing, speedup, time_callable

threads = torch.get_num_threads()
# Timer synchronises CUDA itself, and other accelerators only in recent releases.
timer_globals = {"a": a, "b": b, "sync": lambda: synchronize(device)}
timers = {
    "benchmark.Timer, 1 thread (its default)": benchmark.Timer(
        stmt="a @ b; sync()", globals=timer_globals
    ),
    f"benchmark.Timer, num_threads={threads}": benchmark.Timer(
        stmt="a @ b; sync()", globals=timer_globals, num_threads=threads
    ),
}
threads_label = f"{threads} thread{'s' * (threads > 1)}"
ours_name = f"effpt.bench.time_callable, {threads_label}"
samples = {name: [] for name in [*timers, ours_name]}
for _ in range(4):  # interleaved rounds, so that a change in load hits all three alike
    for name, timer in timers.items():
        samples[name] += timer.blocked_autorange(min_run_time=0.05).times
    samples[ours_name] += time_callable(lambda: a @ b, device=device, repeats=3).per_call
timings = {name: Timing(per_call=tuple(times), number=1) for name, times in samples.items()}
for name, t in timings.items():
    print(f"{name:<42} median {format_seconds(t.median):>9}, IQR {format_seconds(t.iqr):>9}")

one_thread, same_threads, ours = timings.values()
for label, timing in (("1 thread", one_thread), (threads_label, same_threads)):
    ratio = speedup(timing, ours)  # Timer's time / time_callable's time
    outcome = {
        "inconclusive": "no difference beyond the noise",
        "faster": "Timer's figure is higher",
        "slower": "Timer's figure is lower",
    }[ratio.verdict]
    print(f"Timer on {label} / time_callable: {ratio}, {outcome}")

like_for_like = speedup(same_threads, ours)
expect(
    f"Timer's figure on {threads} thread{'s' * (threads > 1)} is at most 1.25× time_callable's",
    like_for_like,
    below=1.25,
    device=device,
)
_ = expect(
    f"Timer's figure on {threads} thread{'s' * (threads > 1)} is at least 0.8× time_callable's",
    like_for_like,
    above=0.8,
    device=device,
)

# %%
# A worked case: the uniformity loss
# ----------------------------------
# Wang and Isola (2020) measure how evenly embeddings ``x`` spread over the unit
# sphere with ``log mean_{i<j} exp(-t |x_i - x_j|²)``. Thomas Viehmann's notebook
# "Introduction to PyTorch" (ACDL 2020) takes this loss as its example. Written
# straight from the paper it uses :func:`torch.pdist`. Since
# ``|x - y|² = |x|² + |y|² - 2⟨x, y⟩``, the same distances come out of one matrix
# product. (The notebook's version of this second form set ``t=2`` inside its body,
# silently ignoring the argument; the one below does not.) The inputs are 1024 unit
# vectors of 128 features that require gradients, the notebook's sizes.
import torch.nn.functional as F


def uniformity_pdist(x: torch.Tensor, t: float = 2.0) -> torch.Tensor:
    return torch.pdist(x, p=2).pow(2).mul(-t).exp().mean().log()


def uniformity_matmul(x: torch.Tensor, t: float = 2.0) -> torch.Tensor:
    n = x.shape[0]
    sq_norms = x.pow(2).sum(dim=1)  # (n,)
    sq_dist = sq_norms[:, None] + sq_norms[None, :] - 2 * (x @ x.T)  # (n, n)
    upper = sq_dist.mul(-t).exp().triu(diagonal=1)  # keep pairs i < j, zero the rest
    return upper.sum().div(n * (n - 1) / 2).log()


emb = F.normalize(torch.randn(1024, 128, device=device), dim=1).requires_grad_()  # (n, features)
print(f"{emb.shape[0]} embeddings of {emb.shape[1]} features on {device.type}")

# %%
# Before timing anything, check that the fast form computes the same thing. The
# reference is the paper's form in float64, on the CPU (some devices have no float64);
# both float32 results should match it to within float32's precision, and so should
# :func:`effpt.ops.uniformity_loss`, this site's tested version of the matrix-product
# form (it also centres the points, so that points far from the origin keep their
# precision, and stays finite for large ``t``).
from effpt.ops import uniformity_loss

emb64 = emb.detach().cpu().double()
reference = uniformity_pdist(emb64).item()
candidates = {"pdist": uniformity_pdist, "matmul": uniformity_matmul, "effpt.ops": uniformity_loss}
print(f"float64 reference: {reference:.8f}")
for name, fn in candidates.items():
    value = fn(emb).item()
    print(f"{name:>10} float32: {value:.8f}   difference {value - reference:+.1e}")

# sphinx_gallery_start_ignore
for fn in candidates.values():
    assert abs(fn(emb).item() - reference) < 1e-5
    assert abs(fn(emb64).item() - reference) < 1e-12
grads = [torch.autograd.grad(fn(emb), emb)[0] for fn in candidates.values()]
for g in grads[1:]:
    torch.testing.assert_close(g, grads[0], rtol=1e-4, atol=1e-6)
# sphinx_gallery_end_ignore

# %%
# Now the timing, forward and backward together, since that is what training pays.
# The notebook timed both forms on a GPU. Its claim is written once, in
# :mod:`effpt.claims`, which this page and the site's :doc:`/measurements` page both
# read; under the table :meth:`~effpt.claims.Claim.check` prints it beside this run's
# ratio with its interval and a verdict: "not comparable" on any device but a GPU,
# where the notebook measured; on a GPU, whether this run meets the claim.
from effpt.claims import claim


def forward_backward(fn):
    def step():
        (grad,) = torch.autograd.grad(fn(emb), emb)
        return grad

    return step


records = compare(
    "uniformity loss, forward + backward",
    {name: forward_backward(fn) for name, fn in candidates.items()},
    device=device,
    budget_s=0.2,
)
_ = claim("notebook: uniformity loss by matmul").check(records[0], records[1])

# %%
# The medians and IQRs summarise repeats like the ones plotted below, taken with
# ``measure`` from the top of the page: each dot is one repeat, the diamond their
# median and the bar their middle half (the IQR). Where two bars overlap, the
# difference between the medians is not established by this run.
repeats = {
    name: measure(forward_backward(fn), device, repeats=7) for name, fn in candidates.items()
}

fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
for row, times in enumerate(repeats.values()):
    q1, med, q3 = (1e3 * q for q in statistics.quantiles(times, n=4, method="inclusive"))
    ax.plot([1e3 * t for t in times], [row] * len(times), "o", alpha=0.4, color="tab:blue")
    ax.plot([q1, q3], [row, row], color="black", linewidth=3)  # the IQR
    ax.plot(med, row, "D", color="black", markersize=8)  # the median
ax.set_yticks(range(len(repeats)), list(repeats))
ax.set_ylim(-0.5, len(repeats) - 0.5)
ax.set_xlim(left=0)
ax.set(xlabel="milliseconds per forward + backward")
ax.set_title("Uniformity loss: every repeat (dots), median (diamond), IQR (bar)")
plt.show()

# %%
# Where the time goes: the profiler
# ---------------------------------
# A ratio says which version wins, not why. :func:`torch.profiler.profile` records
# every operator that ran; its table below lists the ones that took the most time
# themselves (not counting the operators they called), for one forward and backward
# of each form. Profile after a warm-up, for the same reason as timing. On a CUDA GPU
# the table also lists each kernel, whose time its operator's row already holds, so the
# shares below add up the operators' rows only (:func:`effpt.profiling.profiler_rows`).
from torch.profiler import ProfilerActivity, profile

from effpt.profiling import profiler_rows

activities = [ProfilerActivity.CPU]
sort_by = "self_cpu_time_total"
if device.type == "cuda":
    activities.append(ProfilerActivity.CUDA)
    sort_by = "self_device_time_total"

top_ops = {}
for name in ("pdist", "matmul"):
    step = forward_backward(candidates[name])
    step()  # warm-up
    with profile(activities=activities) as prof:
        step()
        synchronize(device)
    print(f"--- {name} form")
    print(prof.key_averages().table(sort_by=sort_by, row_limit=5, max_name_column_width=28))
    operators = profiler_rows(prof.key_averages(), "operators")
    top_ops[name] = {op: getattr(e, sort_by) for op, e in operators.items()}  # op -> time

# %%
# The ``pdist`` form has one specialised operator for the distances and one,
# ``aten::_pdist_backward``, for their gradient. The matrix-product form runs
# ``aten::mm`` and elementwise work on the ``n × n`` matrix, about twice as many
# entries as there are pairs. On the notebook's GPU, which runs matrix products on
# hardware built for them, that trade won by the factor in the claim line under the
# timing table. The two expectations below print the share each operator took of its
# form's time here. Whether the trade pays on another device, and by how much, is not
# something to assume: the timing table above gives this machine's answer, and the
# only way to know yours is to measure on it.
for name, op in (("pdist", "aten::_pdist_backward"), ("matmul", "aten::mm")):
    percent = 100 * top_ops[name].get(op, 0) / sum(top_ops[name].values())
    expect(
        f"{op} takes over 20 % of the {name} form's profiled time",
        max(percent, 1e-6),
        above=20,
        unit="%",
        device=device,
    )

# %%
# Other work on the machine can decide those shares: load stretches some operators'
# times more than others while the profiler records them, and it is the one condition
# under which the measurements on record saw the ``aten::mm`` verdict change. This
# run's load:
from effpt.machine import load_line

print(load_line())

# %%
# Summary
# -------
# - A correct timer warms up, synchronises before starting and before stopping the
#   clock, uses ``time.perf_counter()``, repeats, and reports the median with the IQR;
#   :func:`effpt.bench.time_callable` is that timer, with the number of calls and of
#   repeats chosen for you.
# - Compare ``torch.utils.benchmark.Timer`` with another timer like for like: it runs
#   one thread unless given ``num_threads``.
# - ``.item()``, ``.cpu()``, ``print(tensor)`` and data-dependent shapes wait for the
#   device; keep them out of hot loops.
# - Check that a faster version computes the same thing before timing it, and report
#   a speed-up with its interval: a gain measured on one device (the notebook's
#   GPU) is not a gain on another until it is measured there.
