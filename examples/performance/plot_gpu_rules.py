"""
A GPU's own rules
=================

.. effpt-before-you-start::
   :learn: - Time GPU work correctly: wait for the device before you stop the clock.
           - Find the calls that make the host wait (``.item()``, printing, data-dependent
             shapes) with ``torch.cuda.set_sync_debug_mode``, and avoid some of them.
           - Copy from pinned memory with ``non_blocking=True``, and turn on
             ``cudnn.benchmark`` for fixed-shape convolutions.
           - Choose a float32 matmul precision, and replay CUDA graphs with
             ``torch.compile(mode="reduce-overhead")``.
   :read-first: :doc:`/explanations/timing` for how the comparisons time their variants.
   :needs: A CPU runs the page and shows what it can: the stopwatch, data-dependent
           shapes, pinning's error, ``cudnn.benchmark``'s output and the float32
           precision levels. Counting synchronizing calls, timing copies and
           ``cudnn.benchmark``, and CUDA graphs need CUDA (each prints one skip line
           elsewhere). On Apple MPS the stopwatch and the precision sections also run
           on the GPU.

Code that is fast on a CPU can waste most of a GPU: a stopwatch that does not wait for
the device, one ``.item()`` per step, copies from ordinary host memory, untuned
convolutions, float32 products that could use tensor cores, and small kernels launched one
by one. This page measures each rule where the device that built it can show it. A
section that needs CUDA prints one line saying so on other devices; what a CPU can show,
it shows.
"""

# %%
# The device, and the sizes it gets
# ---------------------------------
# Every section uses the device below. ``wait()`` blocks until the device has finished
# everything queued so far: :func:`torch.cuda.synchronize` on CUDA,
# :func:`torch.mps.synchronize` on Apple's GPUs. On a CPU there is nothing to wait for:
# an operation has finished when the call returns. On Apple's GPUs (MPS) the stopwatch and
# the float32 precision sections run and the others print a skip line. The sizes fit the
# device.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
build = f"Skipped on this {device.type.upper()} build:"  # the start of every skip line
n, mib, batch = (4096, 256, 64) if device.type == "cuda" else (512, 16, 8)  # sizes per device
print(describe(device))
print(f"matrices {n} x {n}, copies of {mib} MiB, batches of {batch} images")


def wait() -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()
    # a CPU has finished every operation when it returns: nothing to wait for


# %%
# The host runs ahead of the device
# ---------------------------------
# On a GPU, a line of PyTorch queues a kernel and returns; the device works through the
# queue on its own (PyTorch's *CUDA semantics* notes call this asynchronous execution).
# A stopwatch stopped as soon as the call returns then measures the queuing, not the work.
# The function below times the same four matrix products in turns, once stopping the
# clock at once and once after ``wait()``. On a CPU both should agree, since there the
# work is done when the call returns; only noise can part them, and the verdict says
# whether it did here. How :func:`effpt.bench.compare` times correctly is
# explained in :doc:`/explanations/timing`.
import time

from effpt.bench import Timing
from effpt.expect import expect
from effpt.records import speedup

a = torch.randn(n, n, device=device)


def four_products() -> None:
    for _ in range(4):
        a @ a


def stopwatch(fn, repeats: int = 15) -> tuple[Timing, Timing]:
    at_once, after_wait = [], []
    fn()  # warm up: libraries load and allocate on the first call
    for i in range(repeats):
        turns = ((at_once, False), (after_wait, True))
        for samples, wait_at_end in turns if i % 2 else turns[::-1]:  # alternate who goes first
            wait()  # start with an empty queue
            start = time.perf_counter()
            fn()
            if wait_at_end:
                wait()
            samples.append(time.perf_counter() - start)
    return Timing(tuple(at_once), 1), Timing(tuple(after_wait), 1)


at_once, after_wait = stopwatch(four_products)
print(
    f"clock stopped at once:      {at_once.median * 1e3:8.3f} ms (median of {len(at_once.per_call)})"
)
print(f"clock stopped after wait(): {after_wait.median * 1e3:8.3f} ms")
ratio = speedup(after_wait, at_once)  # how many times longer the honest figure is
if device.type == "cpu":  # how far apart the two are, either way round (1 = equal)
    r = ratio
    apart = (max(r.value, 1 / r.value), max(1.0, r.low, 1 / r.high), max(r.high, 1 / r.low))
    expect(
        "on a CPU, waiting or not changes the measured time by less than 20 %",
        apart,
        below=1.2,
        device=device,
    )
else:
    expect(
        "a clock stopped without waiting reports under half the real time",
        ratio,
        above=2.0,
        device=device,
    )

# %%
# Calls that make the host wait
# -----------------------------
# On a GPU, some calls need a result on the host and therefore wait for the queue to drain:
# ``.item()``, ``.cpu()``, printing a tensor, a tensor in an ``if``, and operations whose
# output *shape* depends on the data, such as :meth:`~torch.Tensor.nonzero` and boolean
# masking. The host cannot allocate their output before the device has counted. The same
# expression applied to two tensors of one shape gives outputs of different lengths:
for values in (torch.tensor([1.0, -2.0, 3.0, 4.0]), torch.tensor([-1.0, -2.0, 3.0, -4.0])):
    print(f"{values.tolist()} -> values[values > 0] has shape {tuple(values[values > 0].shape)}")

# sphinx_gallery_start_ignore
assert values[values > 0].shape == (1,)
# sphinx_gallery_end_ignore

# %%
# On CUDA, :func:`torch.cuda.set_sync_debug_mode` turns such waits into warnings (or,
# with ``"error"``, exceptions), which finds them in a real training loop. Not every
# one: its documentation calls it experimental and leaves out, for now, the operations
# of ``torch.distributed`` and ``torch.sparse``. The cell counts the warnings each call
# raises. ``torch.where`` keeps the shape and
# :func:`torch.nonzero_static` fixes it in advance, so neither has to wait.
import warnings

x = torch.randn(n, device=device)
calls = {
    "x * 2": lambda: x * 2,
    "x.sum()": x.sum,
    "torch.where(x > 0, x, 0)": lambda: torch.where(x > 0, x, 0),
    "torch.nonzero_static(x, size=8)": lambda: torch.nonzero_static(x, size=8),
    "x.sum().item()": lambda: x.sum().item(),
    "bool(x.sum() > 0), as an if does": lambda: bool(x.sum() > 0),
    "x.cpu()": x.cpu,
    "str(x), as print(x) does": lambda: str(x),
    "x.nonzero()": x.nonzero,
    "x[x > 0]": lambda: x[x > 0],
}
waits = {}
if device.type == "cuda":
    torch.cuda.set_sync_debug_mode("warn")
    try:
        for name, call in calls.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                call()
            waits[name] = sum("synchroniz" in str(w.message) for w in caught)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for name, count in waits.items():
        print(f"{name:<32} {count} synchronizing call(s)")
else:
    print(f"{build} counting synchronizing calls needs CUDA.")

# sphinx_gallery_start_ignore
if device.type == "cuda":
    queued = ("x * 2", "x.sum()", "torch.where(x > 0, x, 0)", "torch.nonzero_static(x, size=8)")
    assert all(waits[k] == 0 for k in queued), waits
    assert all(waits[k] >= 1 for k in calls if k not in queued), waits
# sphinx_gallery_end_ignore

# %%
# Pinned memory and ``non_blocking=True``
# ---------------------------------------
# A GPU copies from host memory by DMA, which needs memory the operating system will not
# move: *pinned* (page-locked) memory. From ordinary, pageable memory CUDA first copies
# into a pinned staging buffer. From pinned memory, ``.to(device, non_blocking=True)``
# queues the copy and returns, so the host can prepare the next batch meanwhile (the CUDA
# semantics notes and PyTorch's *Performance Tuning Guide* both recommend this). Pinning
# needs an accelerator; without one, PyTorch refuses:
print(f"torch.cuda.is_available() = {torch.cuda.is_available()}")
if device.type != "cuda":
    try:
        torch.zeros(4).pin_memory()
        pin_error = None
    except RuntimeError as exc:
        pin_error = f"RuntimeError: {exc}"
    print(pin_error or "torch.zeros(4).pin_memory() worked on this machine")
    print(f"{build} timing pinned, pageable and non-blocking copies needs CUDA.")

# sphinx_gallery_start_ignore
if device.type == "cpu" and not torch.cuda.is_available():
    assert pin_error is not None and pin_error.startswith("RuntimeError"), pin_error
# sphinx_gallery_end_ignore

# %%
# On CUDA, :func:`effpt.bench.compare` copies the same bytes from pageable and from
# pinned memory, in turns. Predict first: does the pinned copy win on your GPU?
from effpt.bench import compare

if device.type == "cuda":
    pageable = torch.randn(mib * 2**18)  # mib MiB of float32 (2**18 numbers per MiB)
    pinned = pageable.pin_memory()
    copies = compare(
        f"copy {mib} MiB from host to GPU",
        {"pageable": lambda: pageable.to(device), "pinned": lambda: pinned.to(device)},
        device=device,
    )
    expect(
        "a copy from pinned memory beats one from pageable memory",
        speedup(*copies),
        above=1.0,
        device=device,
    )

# %%
# The second comparison pairs a pinned copy with host work that lasts as long as the copy
# (a stand-in for preparing the next batch): a blocking copy makes the two add up, a
# non-blocking one lets them overlap, up to twice as fast. Read the result of a
# non-blocking copy only after waiting for it.
if device.type == "cuda":
    copy_s = copies[1].median_s
    overlap = compare(
        "pinned copy, then host work as long as the copy",
        {
            "blocking": lambda: (pinned.to(device), time.sleep(copy_s)),
            "non_blocking=True": lambda: (pinned.to(device, non_blocking=True), time.sleep(copy_s)),
        },
        device=device,
    )
    expect(
        "non_blocking=True overlaps the copy with host work",
        speedup(*overlap),
        above=1.2,
        device=device,
    )
    on_gpu = pinned.to(device, non_blocking=True)
    wait()  # read a non-blocking copy only after waiting for it
    print(
        f"pinned: {pinned.is_pinned()}; copy equals the source: {torch.equal(on_gpu.cpu(), pageable)}"
    )

# sphinx_gallery_start_ignore
if device.type == "cuda":
    assert pinned.is_pinned() and not pageable.is_pinned()
    assert torch.equal(on_gpu.cpu(), pageable)
# sphinx_gallery_end_ignore

# %%
# ``cudnn.benchmark``: let cuDNN try its algorithms
# -------------------------------------------------
# cuDNN has several algorithms for each convolution. With
# ``torch.backends.cudnn.benchmark = True`` the first call with a new input shape times
# them and keeps the fastest for that shape; later calls reuse the choice. It pays when
# shapes repeat and costs a search for every new shape (the Performance Tuning Guide
# recommends it for fixed-size inputs). The flag only concerns cuDNN: on a CPU the
# convolution below gives bit for bit the same output either way.
from torch import nn

conv = nn.Conv2d(32, 32, 3, padding=1).to(device)
images = torch.randn(batch, 32, 56, 56, device=device)  # (batch, channels, height, width)


def convolve(benchmark: bool) -> torch.Tensor:
    torch.backends.cudnn.benchmark = benchmark
    with torch.no_grad():
        return conv(images)


same = torch.equal(convolve(False), convolve(True))
print(f"cuDNN available: {torch.backends.cudnn.is_available()}; same output either way: {same}")
if device.type == "cuda":
    tuned = compare(
        "3x3 convolution",
        {"benchmark off": lambda: convolve(False), "benchmark on": lambda: convolve(True)},
        device=device,
    )
    expect(
        "cudnn.benchmark makes a fixed-shape 3x3 convolution faster",
        speedup(*tuned),
        above=1.0,
        device=device,
    )
else:
    print(f"{build} timing cudnn.benchmark needs CUDA.")
torch.backends.cudnn.benchmark = False  # the default again

# sphinx_gallery_start_ignore
if device.type == "cpu":
    assert same
# sphinx_gallery_end_ignore

# %%
# Float32 matrix products in lower precision
# ------------------------------------------
# :func:`torch.set_float32_matmul_precision` lets float32 products compute internally
# with fewer mantissa bits: ``"highest"`` keeps float32, ``"high"`` allows TF32 (10 bits,
# on NVIDIA tensor cores since Ampere), ``"medium"`` allows bfloat16 (7 bits). Inputs and
# outputs stay float32. Its documentation says it only affects CUDA; torch 2.13 also
# passes the choice to oneDNN, which on CPUs with bfloat16 instructions (AVX-512 BF16,
# AMX) may then compute ``"medium"`` products in bfloat16. The cell sets each level,
# prints the per-backend settings it implies where this torch has them, and measures the
# error against a float64 product (computed on the CPU when the device lacks float64).
# The last line, for scale, is the error with
# inputs rounded to bfloat16.
b = torch.randn(n, n, device=device)
exact = a.cpu().double() @ b.cpu().double() if device.type == "mps" else a.double() @ b.double()
backends = {
    "cuda.matmul": torch.backends.cuda.matmul,
    "mkldnn.matmul": getattr(torch.backends.mkldnn, "matmul", None),
}
levels, errors = ("highest", "high", "medium"), {}
for level in levels:
    torch.set_float32_matmul_precision(level)
    product = (a @ b).to(exact.device, exact.dtype)
    errors[level] = ((product - exact).norm() / exact.norm()).item()  # relative error
    implied = {k: getattr(m, "fp32_precision", "-") for k, m in backends.items() if m is not None}
    print(f"{level:<8} error vs float64 {errors[level]:.1e}   implies {implied}")
torch.set_float32_matmul_precision("highest")
a16, b16 = (t.to(torch.bfloat16).to(exact.device, exact.dtype) for t in (a, b))  # rounded
bf16_error = ((a16 @ b16 - exact).norm() / exact.norm()).item()
print(f"inputs rounded to bfloat16: error vs float64 {bf16_error:.1e}")

# sphinx_gallery_start_ignore
assert errors["highest"] < 1e-5, errors
# sphinx_gallery_end_ignore

# %%
# Whether fewer bits are used, and faster, depends on the hardware: TF32 needs an NVIDIA
# GPU since Ampere, bfloat16 on a CPU needs oneDNN kernels for it. A level without such
# kernels falls back (``"medium"`` to ``"high"``, ``"high"`` to ``"highest"``) and has
# about the error of the level it fell back to, while a product that really rounds to
# bfloat16 comes near the last line above. The expectations below test ``"high"`` on
# CUDA and ``"medium"`` elsewhere.
fast = "high" if device.type == "cuda" else "medium"


def product_at(level: str) -> torch.Tensor:
    torch.set_float32_matmul_precision(level)
    return a @ b


speeds = compare(
    f"{n}x{n} float32 product",
    {lv: lambda lv=lv: product_at(lv) for lv in ("highest", fast)},
    device=device,
    budget_s=0.3,
)
torch.set_float32_matmul_precision("highest")
_ = expect(
    f"\"{fast}\" precision makes the product's error 10x float32's or more",
    errors[fast] / errors["highest"],
    above=10.0,
    device=device,
)
_ = expect(
    f'"{fast}" precision makes a float32 product faster', speedup(*speeds), above=1.0, device=device
)

# %%
# On a CPU, both verdicts turn on whether torch uses oneDNN's bfloat16 kernels there:
# where it uses none, ``"medium"`` has no bfloat16 path to take, runs as
# ``"highest"`` and changes neither the error nor the time. This machine's side:
if device.type == "cpu":
    from effpt.machine import bfloat16_support

    print(bfloat16_support())
else:
    print(f"on {device.type}, the CPU's bfloat16 kernels do not decide these verdicts")

# %%
# Newer torch also has per-backend switches, such as
# ``torch.backends.cuda.matmul.fp32_precision = "tf32"`` and
# ``torch.backends.mkldnn.matmul.fp32_precision = "bf16"``; PyTorch's CUDA semantics notes
# present them as the replacement of ``allow_tf32``. Use one style in a program: after a
# per-backend switch, this torch may refuse to report the global level. The cell shows
# what the installed torch does.
if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    try:
        print(f"get_float32_matmul_precision() = {torch.get_float32_matmul_precision()!r}")
    except RuntimeError as exc:
        print(f"RuntimeError: {str(exc)[:150]}...")
    torch.set_float32_matmul_precision("highest")  # one consistent state again
else:
    print(f"torch {torch.__version__} has no per-backend fp32_precision switches")

# %%
# CUDA graphs through ``torch.compile``
# -------------------------------------
# A small model on a large GPU can spend most of its time launching kernels, one per
# operation. A CUDA graph records the launches once and replays them as one.
# ``torch.compile(model, mode="reduce-overhead")`` fuses operations and records CUDA
# graphs (the CUDA semantics notes describe graphs and their constraints). The replayed
# graph reuses its output memory: an output kept from one call is overwritten by the
# next, and reading it then raises an error, so ``.clone()`` what you keep. This section
# needs CUDA; compiling on a CPU would also cost more time than this page may spend.
mlp = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(256, 256), nn.ReLU())]).to(device)
inputs = torch.randn(8, 256, device=device)  # (batch, features): small on purpose
if device.type == "cuda":
    graphed = torch.compile(mlp, mode="reduce-overhead")
    with torch.no_grad():
        launches = compare(
            "6 linear layers with ReLU, batch of 8",
            {"eager": lambda: mlp(inputs), "reduce-overhead": lambda: graphed(inputs)},
            device=device,
            warmup=3,
        )
        expect(
            "CUDA graphs make a launch-bound MLP faster",
            speedup(*launches),
            above=1.5,
            device=device,
        )
        kept = graphed(inputs)
        agree = torch.allclose(kept, mlp(inputs), rtol=1e-3, atol=1e-4)
        graphed(inputs)  # the next replay writes into the same memory
        try:
            kept.sum()
            overwritten = None
        except RuntimeError as exc:
            overwritten = f"RuntimeError: {str(exc)[:120]}..."
    print(f"same output as eager: {agree}")
    print(overwritten or "the kept output was still readable")
else:
    print(f"{build} CUDA graphs need CUDA.")

# sphinx_gallery_start_ignore
if device.type == "cuda":
    assert agree
    assert overwritten is not None and "overwritten" in overwritten, overwritten
# sphinx_gallery_end_ignore

# %%
# The figure shows the errors measured above against float64, on a log scale: one point
# per precision level on this build's device, and a dotted line at the error of inputs
# rounded to bfloat16, where a level that computes in bfloat16 would sit. Where the
# device ignores the setting (a CPU without a faster float32 path), the three points
# coincide.
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 2.6), layout="constrained")
ax.scatter(list(errors.values()), list(errors), color=["C0", "C1", "C3"], zorder=3)
ax.axvline(bf16_error, color="0.5", linestyle=":", label="inputs rounded to bfloat16")
ax.legend(loc="center", fontsize="small")
ax.set_xscale("log")
ax.grid(axis="x", which="both", alpha=0.3)
ax.invert_yaxis()
ax.set(
    xlabel="relative error of a float32 product vs float64",
    title=f"Float32 matmul precision ({device.type})",
)
plt.show()

# %%
# Summary
# -------
# - GPU work is queued: stop a stopwatch only after waiting for the device
#   (:doc:`/explanations/timing`). On a CPU the call has already finished.
# - ``.item()``, ``.cpu()``, printing and data-dependent shapes make the host wait;
#   ``torch.cuda.set_sync_debug_mode("warn")`` finds them, and ``torch.where`` or
#   ``nonzero_static`` avoid some.
# - Copy from pinned memory with ``non_blocking=True`` so the copy can overlap host work;
#   wait before reading a non-blocking result.
# - ``torch.backends.cudnn.benchmark = True`` tunes each new convolution shape once.
# - ``torch.set_float32_matmul_precision("high")`` allows TF32 on recent NVIDIA GPUs;
#   ``"medium"`` allows bfloat16, including on some CPUs. Check the error your model can take.
# - ``torch.compile(mode="reduce-overhead")`` replays CUDA graphs for launch-bound work;
#   clone outputs you keep across calls.
