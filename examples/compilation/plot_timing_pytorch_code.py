"""
Time PyTorch code so that the numbers mean something
====================================================

Every other page in this family claims that one version of some code is faster than
another, and such claims are only as good as the timing behind them. This page shows
the three classic mistakes (timing asynchronous work, timing the first call, letting
hidden synchronisations in), the tools that avoid them, and a worked case where
measuring changes which formula you should use.

Why the rules below exist is explained in :doc:`/explanations/timing`.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_timing_pytorch_code.py``.
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
# A CUDA call returns as soon as the kernel is queued; the GPU works while Python moves
# on. A timer stopped right after the call measures the queueing, not the work. On a
# GPU the cell below shows exactly that. Without one it builds the same situation on
# the CPU: a worker thread plays the GPU, and ``submit`` plays the kernel launch.
from concurrent.futures import ThreadPoolExecutor

n = 4096 if device.type == "cuda" else 1024
a = torch.randn(n, n, device=device)
b = torch.randn(n, n, device=device)

if device.type == "cuda":
    torch.mm(a, b)  # warm-up: the first call loads cuBLAS
    torch.cuda.synchronize()
    start = time.perf_counter()
    c = torch.mm(a, b)
    launched = time.perf_counter() - start
    torch.cuda.synchronize()  # wait for the queued work
    finished = time.perf_counter() - start
else:
    print("no GPU here: a worker thread stands in for it")
    with ThreadPoolExecutor(max_workers=1) as gpu_standin:
        gpu_standin.submit(torch.mm, a, b).result()  # warm-up
        start = time.perf_counter()
        future = gpu_standin.submit(torch.mm, a, b)  # returns at once, like a launch
        launched = time.perf_counter() - start
        c = future.result()  # waits, like torch.cuda.synchronize()
        finished = time.perf_counter() - start
print(f"timer stopped after the call:       {launched * 1e3:8.3f} ms")
print(f"timer stopped after waiting for it: {finished * 1e3:8.3f} ms")
print(f"the first timer missed {1 - launched / finished:.0%} of the time")

# sphinx_gallery_start_ignore
assert torch.equal(c, a @ b) or torch.allclose(c, a @ b)
assert finished > launched
# sphinx_gallery_end_ignore

# %%
# Use ``time.perf_counter()`` (monotonic, high resolution), never ``time.time()``,
# and synchronise before starting and before stopping the clock.
# :func:`effpt.bench.synchronize` does the right thing on every device (nothing on
# the CPU, whose operators return only when their work is done).
#
# The first call pays for everything lazy
# ---------------------------------------
# The first call of an operation can load a library, pick an algorithm, allocate a
# cache or, with :func:`torch.compile`, generate and compile code. Timing it mixes
# one-off costs into the per-call figure. Here the first call of a compiled function
# is timed on its own, then :func:`effpt.bench.time_callable` (which warms up, then
# repeats) times the calls after it.
from effpt.bench import format_seconds, synchronize, time_callable


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3)))


compiled_gelu = torch.compile(gelu_tanh)
x = torch.randn(100_000, device=device)
synchronize(device)
start = time.perf_counter()
compiled_gelu(x)
synchronize(device)
first_call = time.perf_counter() - start
later_calls = time_callable(lambda: compiled_gelu(x), device=device).median
print(f"first call (compiles): {format_seconds(first_call)}")
print(f"each later call:       {format_seconds(later_calls)}")
print(f"the first call cost as much as {first_call / later_calls:,.0f} later ones")

# sphinx_gallery_start_ignore
torch.testing.assert_close(compiled_gelu(x), gelu_tanh(x))
assert first_call > 2 * later_calls, (first_call, later_calls)
# sphinx_gallery_end_ignore

# %%
# Synchronisation points that slip in
# -----------------------------------
# Some calls need a result on the host and therefore wait for the device: ``.item()``,
# ``.cpu()``, ``.tolist()``, ``print(tensor)``, ``if tensor > 0:``, and operators whose
# output size depends on the data, such as :func:`torch.nonzero`. Inside a training
# loop each one drains the GPU's queue. Below, a loop reads its running loss every
# step, and another keeps it on the device and reads it once at the end.
# :func:`effpt.bench.compare` times both and prints the ratio.
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
)

# sphinx_gallery_start_ignore
assert abs(read_every_step() - read_once()) < 1e-3 * abs(read_once())
# sphinx_gallery_end_ignore

# %%
# On a GPU the second loop wins because the device never idles while Python waits
# for a number. On a CPU there is no queue to drain: each operator has finished when
# it returns, so ``.item()`` is a plain memory read, and whatever ratio the table shows
# here is the cost of the calls themselves plus this machine's noise. To find
# synchronisations in real CUDA code, run it under
# ``torch.cuda.set_sync_debug_mode("warn")``: every synchronising call then warns.
#
# Two tools that do it right
# --------------------------
# :func:`effpt.bench.time_callable` and PyTorch's own :class:`torch.utils.benchmark.Timer`
# both warm up, synchronise and repeat; the latter also adapts the number of runs to
# the time available. On the same matrix product they should agree to within this
# machine's noise.
from torch.utils import benchmark

timer = benchmark.Timer(stmt="a @ b", globals={"a": a, "b": b})
theirs = timer.blocked_autorange(min_run_time=0.5).median
ours = time_callable(lambda: a @ b, device=device).median
print(f"torch.utils.benchmark: {format_seconds(theirs)} per product")
print(f"effpt.bench:           {format_seconds(ours)} per product")

# sphinx_gallery_start_ignore
assert 0.1 < theirs / ours < 10, (theirs, ours)
# sphinx_gallery_end_ignore

# %%
# A worked case: the uniformity loss
# ----------------------------------
# Wang and Isola (2020) measure how evenly embeddings ``x`` spread over the unit
# sphere with ``log mean_{i<j} exp(-t |x_i - x_j|²)``. Written straight from the paper
# it uses :func:`torch.pdist`. Since ``|x - y|² = |x|² + |y|² - 2⟨x, y⟩``, the same
# distances come out of one matrix product. (The version of this second form in the
# source notebook set ``t=2`` inside its body, silently ignoring the argument; the one
# below does not.) The inputs are unit vectors that require gradients.
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
print(f"{emb.shape[0]} embeddings of {emb.shape[1]} features on {device}")

# %%
# Before timing anything, check that the fast form computes the same thing. The
# reference is the paper's form in float64; both float32 results should match it
# to within float32's precision, and so should :func:`effpt.ops.uniformity_loss`,
# this site's version of the matrix-product form.
from effpt.ops import uniformity_loss

reference = uniformity_pdist(emb.detach().double()).item()
candidates = {"pdist": uniformity_pdist, "matmul": uniformity_matmul, "effpt.ops": uniformity_loss}
print(f"float64 reference: {reference:.8f}")
for name, fn in candidates.items():
    value = fn(emb).item()
    print(f"{name:>10} float32: {value:.8f}   difference {value - reference:+.1e}")

# sphinx_gallery_start_ignore
for fn in candidates.values():
    assert abs(fn(emb).item() - reference) < 1e-5
    assert abs(fn(emb.detach().double()).item() - reference) < 1e-12
grads = [torch.autograd.grad(fn(emb), emb)[0] for fn in candidates.values()]
for g in grads[1:]:
    torch.testing.assert_close(g, grads[0], rtol=1e-4, atol=1e-6)
# sphinx_gallery_end_ignore

# %%
# Now the timing, forward and backward together, since that is what training pays.
# The source measured 19.4 ms for ``pdist`` and 2.26 ms for the matrix product on a
# GPU, about 8.6× faster; the line under the table puts this machine's ratio beside it.


def forward_backward(fn):
    def step():
        (grad,) = torch.autograd.grad(fn(emb), emb)
        return grad

    return step


records = compare(
    "uniformity loss, forward + backward",
    {name: forward_backward(fn) for name, fn in candidates.items()},
    device=device,
    repeats=5,
)
speedup = records[0].median_s / records[1].median_s
print(f"matmul form vs pdist: {speedup:.1f}× here, 8.6× in the source (19.4 ms → 2.26 ms, GPU)")

# %%
# Where the time goes: the profiler
# ---------------------------------
# A ratio says which version wins, not why. :func:`torch.profiler.profile` records
# every operator that ran; its table below lists the ones that took the most time
# themselves (not counting the operators they called), for one forward and backward
# of each form. Profile after a warm-up, for the same reason as timing.
from torch.profiler import ProfilerActivity, profile

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
    ranked = sorted(prof.key_averages(), key=lambda e: getattr(e, sort_by), reverse=True)
    top_ops[name] = [e.key for e in ranked]

# sphinx_gallery_start_ignore
assert "aten::_pdist_backward" in top_ops["pdist"][:2], top_ops["pdist"][:5]
assert "aten::mm" in top_ops["matmul"][:6], top_ops["matmul"][:6]
# sphinx_gallery_end_ignore

# %%
# Most of the ``pdist`` form's time goes to ``aten::_pdist_backward``, the gradient of
# the specialised operator. The matrix-product form spreads its time over ``aten::mm``
# and elementwise work on the ``n × n`` matrix, twice as many entries as there are
# pairs. On the source's GPU, where a matrix product is the cheapest work there is,
# that trade won by 8.6×. On a CPU the margin is much smaller and can even reverse
# (the ratio printed above is this machine's answer): which formula wins depends on
# the device, and the only way to know is to measure on yours.

# %%
# Summary
# -------
# - Synchronise before starting and before stopping the clock, use
#   ``time.perf_counter()``, and never time the first call: warm up, then repeat
#   and take the median (:func:`effpt.bench.time_callable` does all of it).
# - ``.item()``, ``.cpu()``, ``print(tensor)`` and data-dependent shapes wait for the
#   device; keep them out of hot loops.
# - Check that a faster version computes the same thing, against a float64 reference,
#   before timing it; then profile to see where the time goes.
# - The formula can matter more than the implementation, but which formula is faster
#   depends on the device: measure, don't assume.
