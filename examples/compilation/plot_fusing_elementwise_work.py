"""
Fuse elementwise work into one kernel
=====================================

.. effpt-before-you-start::
   :learn: - Fuse a chain of elementwise operations into one kernel with ``torch.compile``,
             and list the kernels it generates.
           - Check every variant against a float64 reference before timing it.
           - Count the fusion groups TorchScript's fuser makes, and know why standard CPU
             wheels make none.
           - Read a kernel's time as an effective bandwidth, against a copy of the same
             bytes, on all threads and on one.
   :read-first: :doc:`plot_where_time_goes` for fixed costs and the intra-op thread pool;
                :doc:`plot_torchscript_to_compile` for TorchScript and ``torch.compile``;
                :doc:`/explanations/timing` for how ``compare`` measures.
   :needs: A CPU is enough, with a C++ compiler for ``torch.compile`` on the CPU;
           Inductor keeps what it builds in an on-disk cache. The page runs on a CUDA or
           Apple MPS GPU when there is one (``EFFPT_DEVICE=cpu`` keeps it on the CPU), up
           to ten times more box pairs on CUDA; one-thread timings are taken on a CPU with
           more than one thread. The float64 reference is computed on the CPU.

A chain of elementwise operations in eager PyTorch runs one kernel per operation, and
each kernel reads its inputs from memory and writes its result back. Fusing the chain
into one kernel reads the inputs once and writes the output once. This page fuses the
intersection over union (IoU) of boxes with :func:`torch.compile`, checks what
TorchScript's fuser, which the notebook this example comes from used, still does, and measures
what fusion buys against this machine's memory bandwidth.
"""

# %%
# Intersection over union, one operation at a time
# ------------------------------------------------
# A box is ``(x, y, width, height)``. The IoU of two boxes is the area of their
# intersection divided by the area of their union; detection models compute it for
# many box pairs at once. Thomas Viehmann's notebook "Introduction to PyTorch" (ACDL
# 2020) passes the eight coordinates as eight separate tensors; here each set of boxes
# is one ``(4, n)`` tensor whose rows are those coordinates, so each coordinate is
# still contiguous in memory. In eager mode every arithmetic operation below is a
# kernel of its own, a full pass over memory.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))


def iou(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    x1, y1, w1, h1 = boxes1.unbind(0)  # each (n,)
    x2, y2, w2, h2 = boxes2.unbind(0)
    inter_w = (torch.min(x1 + w1, x2 + w2) - torch.max(x1, x2)).clamp(min=0)
    inter_h = (torch.min(y1 + h1, y2 + h2) - torch.max(y1, y2)).clamp(min=0)
    inter = inter_w * inter_h
    union = w1 * h1 + w2 * h2 - inter
    return inter / union.clamp(min=1e-5)


def make_boxes(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    scale = torch.tensor([[1.0], [1.0], [0.5], [0.5]], device=device)  # corners < 1, sides < 0.5
    return torch.rand(4, n, device=device) * scale, torch.rand(4, n, device=device) * scale


boxes1, boxes2 = make_boxes(100_000)  # (4, n) each
print(f"{boxes1.shape[1]:,} pairs; mean IoU {iou(boxes1, boxes2).mean().item():.3f}")

# %%
# Before making it fast, pin down what it should return: :func:`effpt.ops.box_iou`
# (which takes boxes as rows, hence the ``.T``) computed in float64 on the CPU is the
# reference every variant below is checked against.
from effpt.ops import box_iou


def reference_iou(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    return box_iou(boxes1.T.cpu().double(), boxes2.T.cpu().double())  # (n,)


def max_error(result: torch.Tensor, reference: torch.Tensor) -> float:
    return (result.cpu().double() - reference).abs().max().item()


reference = reference_iou(boxes1, boxes2)
print(
    f"eager float32 against the float64 reference: max difference {max_error(iou(boxes1, boxes2), reference):.1e}"
)

# sphinx_gallery_start_ignore
assert max_error(iou(boxes1, boxes2), reference) < 1e-5
# sphinx_gallery_end_ignore

# %%
# torch.compile: one fused kernel
# -------------------------------
# :func:`torch.compile` captures the function and its code generator (Inductor) emits
# one loop, C++ on a CPU, Triton on an NVIDIA GPU and Metal on Apple silicon, that
# computes the whole expression per box pair. ``dynamic=True`` asks for code that works
# for any number of boxes, so one compilation serves every size measured below.
# ``run_and_get_code``, an internal helper of Inductor, returns the generated source;
# every kernel it defines is listed by name.
import re
import time

from torch._inductor.utils import run_and_get_code

from effpt.bench import format_seconds

# sphinx_gallery_start_ignore
graphs_before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
# sphinx_gallery_end_ignore
iou_compiled = torch.compile(iou, dynamic=True)
start = time.perf_counter()
fused, sources = run_and_get_code(iou_compiled, boxes1, boxes2)
compile_s = time.perf_counter() - start
source = "\n".join(sources)
# Each kernel is defined as `name = async_compile.<cpp_pybinding|triton|metal>(...)`
# (or, on Apple silicon with older releases, `name = compile_mps_shader(...)`).
kernels = re.findall(r"^(\w+) = (?:async_compile\.\w+|compile_mps_shader)\(", source, re.MULTILINE)
print(f"compiling took {format_seconds(compile_s)}; generated kernels: {kernels}")
print(f"max difference from the reference: {max_error(fused, reference):.1e}")
if device.type == "cpu":
    print(f"the C++ loop opens an OpenMP parallel region: {'#pragma omp parallel' in source}")

# sphinx_gallery_start_ignore
assert len(kernels) == 1, kernels
assert max_error(fused, reference) < 1e-5
# sphinx_gallery_end_ignore

# %%
# TorchScript's fuser, where it still runs
# ----------------------------------------
# The notebook fused the IoU with TorchScript's legacy fuser and timed it on a GPU (its
# claim is checked in "The notebook's figures against this machine", below). Current
# releases no longer use that fuser by default: a traced or scripted function
# now runs under the *profiling* executor, which fuses with NNC after a few calls. On an
# NVIDIA GPU, NNC compiles its kernels at run time with NVRTC; on a CPU its fusion is switched
# off by default and would also need an LLVM backend that the standard wheels leave
# out, so nothing fuses there. TorchScript's deprecation warning is hidden by
# :func:`effpt.torchscript.quietly`, as
# :doc:`/auto_examples/compilation/plot_torchscript_to_compile` explains.
# Count the fusion groups in the optimised graph:
from effpt import torchscript


def fusion_groups(graph: torch.Graph) -> int:
    """Subgraphs fused by either TorchScript fuser (legacy or NNC) in ``graph``."""
    return len(graph.findAllNodes("prim::FusionGroup")) + len(
        graph.findAllNodes("prim::TensorExprGroup")
    )


torchscript_error = None
groups = 0
with torchscript.quietly():
    try:
        iou_traced = torch.jit.trace(iou, (boxes1, boxes2))
        for _ in range(3):  # the profiling executor optimises after a few runs
            iou_traced(boxes1, boxes2)
        groups = fusion_groups(iou_traced.graph_for(boxes1, boxes2))
    except RuntimeError as exc:  # on a GPU: NVRTC failed to compile NNC's kernel
        torchscript_error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:120]}"
if torchscript_error:
    print(f"TorchScript's fuser failed on {device.type}: {torchscript_error}")
    print("it is left out below; torch.compile does not depend on NVRTC")
else:
    print(f"TorchScript on {device.type}: {groups} fusion group(s)")

# sphinx_gallery_start_ignore
if torchscript_error is None:
    assert max_error(iou_traced(boxes1, boxes2), reference) < 1e-5
if device.type == "cpu" and not torch._C._llvm_enabled():
    assert groups == 0, groups
# sphinx_gallery_end_ignore

# %%
# Where it fused (on an NVIDIA GPU), the timings below include TorchScript; where it did not,
# timing it would only time eager PyTorch again, and it is left out.
#
# Timing over sizes, on all threads and on one
# --------------------------------------------
# Each variant is timed with :func:`effpt.bench.compare` (how it measures:
# :doc:`/explanations/timing`) from a thousand box pairs to four million (forty
# million on a CUDA GPU), after a check against the float64 reference at every size. A
# variant that fails at some size is reported and dropped from the sizes after it.
#
# A fused IoU must read two boxes of four float32 numbers and write one number per
# pair: 36 bytes. As a yardstick, every comparison also times a plain copy that moves
# as many bytes (18 read, 18 written per pair), in the same comparison as the variants
# so that a change in the machine's load falls on it too.
#
# On a CPU each size is timed on all of PyTorch's threads, then on one
# (:func:`torch.set_num_threads`, restored afterwards), because an operation is split
# over the intra-op threads only above a size (:doc:`/explanations/timing`) while a
# compiled loop may start its threads on every call. The thread count is part of what
# :func:`torch.compile` guards on, so the first one-thread call compiles once more, in
# the untimed warm-up.
from effpt.bench import compare

sizes = (
    [10**3, 10**4, 10**5, 10**6, 10**7, 4 * 10**7]
    if device.type == "cuda"
    else [10**3, 10**4, 10**5, 10**6, 4 * 10**6]
)
threads = torch.get_num_threads()
thread_counts = [threads, 1] if device.type == "cpu" and threads > 1 else [threads]
on = {
    t: f"{t} thread{'s' * (t > 1)}" if device.type == "cpu" else device.type for t in thread_counts
}
thr = {t: f"{t} thr" if device.type == "cpu" else device.type for t in thread_counts}  # short
print("timed on", " and on ".join(on.values()))
variants = {"eager": iou, "torch.compile": iou_compiled}
if torchscript_error is None and groups > 0:
    variants["TorchScript fuser"] = iou_traced
bytes_per_pair = (2 * 4 + 1) * 4

records = {}  # (variant, size, threads) -> Record
with torchscript.quietly():
    for n in sizes:
        a, b = make_boxes(n)
        check = slice(0, 10**6)  # float64 of at most a million pairs: 4·10⁷ would take GBs
        expected = reference_iou(a[:, check], b[:, check])
        for name, fn in list(variants.items()):
            try:
                error = max_error(fn(a, b)[check], expected)
            except RuntimeError as exc:  # TorchScript compiles again for new shapes
                print(f"{name} failed at {n:,} pairs ({str(exc).strip().splitlines()[0][:80]})")
                del variants[name]
                continue
            assert error < 1e-5, (name, n, error)
        src = torch.empty(bytes_per_pair * n // 2, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        timed = {name: (lambda fn=fn, a=a, b=b: fn(a, b)) for name, fn in variants.items()}
        timed["copy, same bytes"] = lambda src=src, dst=dst: dst.copy_(src)
        for t in thread_counts:
            torch.set_num_threads(t)
            task = f"box IoU, {n:,} pairs"
            if device.type == "cpu":
                task += f", {t} thread{'s' * (t > 1)}"
            show = n == 10**5 and t == threads
            # the most at the smallest size, whose verdict compares two close timings;
            # less at 100,000 pairs (a verdict on a wide speed-up) and at the largest size
            # (a printed ratio); least elsewhere (read by the figure, the bandwidth table
            # and the copy's thread lines, none of them an expectation)
            budget = 0.5 if n == sizes[0] else 0.3 if n == 10**5 else 0.2 if n == sizes[-1] else 0.1
            for record in compare(task, timed, device=device, budget_s=budget, show=show):
                records[record.variant, n, t] = record
        torch.set_num_threads(threads)

# sphinx_gallery_start_ignore
new_graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs_before
# How many graphs Dynamo makes (one per thread count in torch 2.13) is an internal of
# the installed torch, not the lesson: only that something was compiled is asserted.
assert new_graphs >= 1, (new_graphs, thread_counts)
# sphinx_gallery_end_ignore

# %%
# The table above is the notebook's size, 100,000 pairs, on all threads.
#
# Time against memory bandwidth
# -----------------------------
# The 36 bytes per pair divided by the time give an *effective* bandwidth: what the
# variant would need to move if it moved only what a fused kernel must (eager really
# moves far more, which is the point). For the copy it is its true bandwidth.
bandwidth = {}  # (variant, threads) -> {size: bytes per second}
for (name, n, t), record in records.items():
    bandwidth.setdefault((name, t), {})[n] = bytes_per_pair * n / record.median_s

print(f"{'GB/s at pairs':>26}" + "".join(f"{n:>11,}" for n in sizes))
for (name, t), row in bandwidth.items():
    cells = [f"{row[n] / 1e9:.1f}" if n in row else "" for n in sizes]
    print(f"{f'{name}, {thr[t]}':>26}" + "".join(f"{c:>11}" for c in cells))

# %%
# On the left, time per call with its interquartile range; on the right, effective
# bandwidth; solid lines ran on all threads, dashed ones on one. *Caches* bend both:
# where the bytes outgrow one, memory slows the copy, and a fused kernel bound by
# memory with it. *Threads* bend the all-threads line: below the grain size (32,768
# elements for elementwise work on a CPU) an eager operation or a copy stays on one
# thread, so there a gap between eager's or the copy's two lines is only load drift
# between the two blocks of timings. The lines under the figure compare the copy on both
# thread
# counts at each size and say which side of the grain size it is on.
#
# The copy is a yardstick, not a ceiling: it writes as many bytes as it reads, while
# the IoU writes one byte for every eight it reads, and on most CPUs a write first
# reads the memory it replaces.
import matplotlib.pyplot as plt

from effpt.bench import speedup

fig, (ax_time, ax_bw) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
colors = {name: f"C{i}" for i, name in enumerate(variants)} | {"copy, same bytes": "gray"}
for name, t in bandwidth:
    ns = [n for n in sizes if (name, n, t) in records]
    rec = [records[name, n, t] for n in ns]
    style = {"color": colors[name], "linestyle": "-" if t == threads else "--"}
    yerr = [[r.median_s - r.q1_s for r in rec], [r.q3_s - r.median_s for r in rec]]
    ax_time.errorbar(
        ns,
        [r.median_s for r in rec],
        yerr=yerr,
        marker="o",
        capsize=3,
        label=f"{name}, {thr[t]}",
        **style,
    )
    ax_bw.plot(ns, [bandwidth[name, t][n] / 1e9 for n in ns], marker="o", **style)
ax_time.set(xscale="log", yscale="log", xlabel="box pairs", ylabel="time per call (s)")
ax_time.set_title("Box IoU: time per call")
ax_bw.set(xscale="log", xlabel="box pairs", ylabel="effective bandwidth (GB/s)")
ax_bw.set_title("36 bytes per pair / time")
fig.legend(loc="outside right upper", fontsize="small")
plt.show()

GRAIN = 32_768  # elements; a uint8 copy below it stays on the calling thread
if len(thread_counts) > 1:
    for n in sizes:
        copied = bytes_per_pair * n // 2  # bytes, one uint8 element each
        ratio = speedup(records["copy, same bytes", n, threads], records["copy, same bytes", n, 1])
        line = f"copy of {copied / 1e3:,.0f} kB: one thread vs {threads}: {ratio} ({ratio.verdict})"
        if copied < GRAIN:
            line += ", below the grain size: one thread in both runs, so load drift, not threads"
        print(line)

# %%
# The notebook's figures against this machine
# --------------------------------------------
# The notebook timed 100,000 pairs on a GPU. Its claim is written once, in
# :mod:`effpt.claims`, which this page and the site's :doc:`/measurements` page both
# read; :meth:`~effpt.claims.Claim.check` prints it beside this run's ratio at that
# size on all threads, or says it was not measured where the fuser made no fusion
# group and was left out of the timings, as on a CPU with the standard wheels.
from effpt.claims import claim

fuser = records.get(("TorchScript fuser", 10**5, threads))  # None where it did not run
_ = claim("notebook: fused box IoU").check(records["eager", 10**5, threads], fuser)

# %%
# Below are, per thread count, each variant's speed-up over eager at the smallest
# size, the notebook's and the largest, with its interval and verdict, then the
# compiled kernel's share of the copy's bandwidth at the largest size. At the smallest
# size both versions pay mostly fixed costs, and the compiled function adds a check of
# its guards and a call into the generated code. Where the compilation cell printed
# that the C++ loop opens an OpenMP parallel region, it does so on every call,
# whatever the size.
#
# Predict first: at the smallest size, does the compiled function run faster on one
# thread than on all of them? Eager stays on one thread there whatever the count, so
# its gap between the two counts, printed last, is the load's drift: read the compiled
# function's gap against it.
from effpt.expect import expect

for t in thread_counts:
    for n in (sizes[0], 10**5, sizes[-1]):
        line = f"{thr[t]}, {n:>9,} pairs: eager {format_seconds(records['eager', n, t].median_s)}"
        for name in variants:
            if name != "eager" and (name, n, t) in records:
                ratio = speedup(records["eager", n, t], records[name, n, t])
                line += f"; {name} {format_seconds(records[name, n, t].median_s)}, {ratio} ({ratio.verdict})"
        print(line)
largest = sizes[-1]
share = (
    bandwidth["torch.compile", threads][largest] / bandwidth["copy, same bytes", threads][largest]
)
print(
    f"{largest:,} pairs, {thr[threads]}: torch.compile reaches {share * 100:.0f} % of the copy's bandwidth"
)

for t in thread_counts:
    torch.set_num_threads(t)  # the verdict names the machine as measured: t threads
    expect(
        f"torch.compile beats eager on the box IoU of 100,000 pairs, {on[t]}",
        speedup(records["eager", 10**5, t], records["torch.compile", 10**5, t]),
        above=1.0,
        device=device,
    )
torch.set_num_threads(threads)
if len(thread_counts) > 1:
    expect(
        f"the compiled IoU of {sizes[0]:,} pairs runs faster on 1 thread than on {threads}",
        speedup(records["torch.compile", sizes[0], threads], records["torch.compile", sizes[0], 1]),
        above=1.0,
        device=device,
    )
    drift = speedup(records["eager", sizes[0], threads], records["eager", sizes[0], 1])
    print(f"eager at {sizes[0]:,} pairs (one thread either way), 1 vs {threads} threads: {drift}")

# %%
# Summary
# -------
# - Eager PyTorch runs one kernel, and one pass over memory, per elementwise
#   operation; a fused kernel makes one pass for the whole chain.
#
# - :func:`torch.compile` fuses such chains on CPU and GPU; with ``dynamic=True`` one
#   compilation serves every size. Report its compile time apart from its run time.
#
# - Judge a kernel bound by memory by its effective bandwidth against a copy of the
#   same bytes timed beside it, not by its time alone. Time small sizes on one thread
#   and on all: waking the intra-op threads can cost more than the work, and a dip
#   caused by threads is not a cache's.
#
# - TorchScript's fuser is legacy: standard CPU wheels do not fuse at all, and on an
#   NVIDIA GPU it depends on NVRTC at run time.
