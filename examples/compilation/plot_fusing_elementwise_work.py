"""
Fuse elementwise work into one kernel
=====================================

A chain of elementwise operations in eager PyTorch runs one kernel per operation, and
each kernel reads its inputs from memory and writes its result back. Fusing the chain
into one kernel reads the inputs once and writes the output once. This page fuses the
intersection over union (IoU) of boxes with :func:`torch.compile`, checks what
TorchScript's fuser, which the source of this example used, still does, and measures
what fusion buys against this machine's memory bandwidth.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_fusing_elementwise_work.py``.
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
# one loop, C++ on a CPU and Triton on a GPU, that computes the whole expression per
# box pair. ``dynamic=True`` asks for code that works for any number of boxes, so one
# compilation serves every size measured below. ``run_and_get_code``, an internal
# helper of Inductor, returns the generated source; the fused kernels are listed by name.
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
kernels = sorted(set(re.findall(r"\b(cpp_fused_\w+|triton_\w+_fused_\w+)", "\n".join(sources))))
print(f"compiling took {format_seconds(compile_s)}; generated kernels: {kernels}")
print(f"max difference from the reference: {max_error(fused, reference):.1e}")

# sphinx_gallery_start_ignore
assert len(kernels) == 1, kernels
assert max_error(fused, reference) < 1e-5
# sphinx_gallery_end_ignore

# %%
# TorchScript's fuser, where it still runs
# ----------------------------------------
# The notebook fused the IoU with TorchScript and measured 238 µs eager against
# 40.3 µs fused for 100,000 pairs on a GPU, 5.9× faster. It picked TorchScript's legacy
# fuser, which current releases no longer use by default: a traced or scripted function
# now runs under the *profiling* executor, which fuses with NNC after a few calls. On a
# GPU, NNC compiles its kernels at run time with NVRTC; on a CPU its fusion is switched
# off by default and would also need an LLVM backend that the standard wheels leave
# out, so nothing fuses there. TorchScript is deprecated
# (:doc:`plot_torchscript_to_compile`); its warnings are silenced, by message and
# module, around the calls. Count the fusion groups in the optimised graph:
import contextlib
import warnings


@contextlib.contextmanager
def torchscript_quietly():
    """Ignore TorchScript's own deprecation warnings, of any category, inside the block."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"`torch\.jit\.\w+` is deprecated", module=r"torch\.jit"
        )
        yield


def fusion_groups(graph: torch.Graph) -> int:
    """Subgraphs fused by either TorchScript fuser (legacy or NNC) in ``graph``."""
    return len(graph.findAllNodes("prim::FusionGroup")) + len(
        graph.findAllNodes("prim::TensorExprGroup")
    )


torchscript_error = None
groups = 0
with torchscript_quietly():
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
# Where it fused (on a GPU), the timings below include TorchScript; where it did not,
# timing it would only time eager PyTorch again, and it is left out.
#
# Timing over sizes
# -----------------
# Each variant is timed with :func:`effpt.bench.compare` from a thousand to a few
# million box pairs, after a check against the float64 reference at every size. A
# variant that fails at some size is reported and dropped from the sizes after it.
#
# A fused IoU must read two boxes of four float32 numbers and write one number per
# pair: 36 bytes. As a yardstick, every comparison also times a plain copy that moves
# as many bytes (18 read, 18 written per pair): a copy runs as fast as memory allows,
# and memory is faster while the data still fits in the processor's caches. Timing
# the copy together with the variants, rather than once for the whole page, exposes
# it to the same load of this shared machine.
from effpt.bench import compare

sizes = (
    [10**3, 10**4, 10**5, 10**6, 10**7, 4 * 10**7]
    if device.type == "cuda"
    else [10**3, 10**4, 10**5, 10**6, 4 * 10**6]
)
variants = {"eager": iou, "torch.compile": iou_compiled}
if torchscript_error is None and groups > 0:
    variants["TorchScript fuser"] = iou_traced
bytes_per_pair = (2 * 4 + 1) * 4

records = {}  # (variant, size) -> Record
with torchscript_quietly():
    for n in sizes:
        a, b = make_boxes(n)
        expected = reference_iou(a, b)
        for name, fn in list(variants.items()):
            try:
                error = max_error(fn(a, b), expected)
            except RuntimeError as exc:  # TorchScript compiles again for new shapes
                print(f"{name} failed at {n:,} pairs ({str(exc).strip().splitlines()[0][:80]})")
                del variants[name]
                continue
            assert error < 1e-5, (name, n, error)
        src = torch.empty(bytes_per_pair * n // 2, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        timed = {name: (lambda fn=fn, a=a, b=b: fn(a, b)) for name, fn in variants.items()}
        timed["copy, same bytes"] = lambda src=src, dst=dst: dst.copy_(src)
        for record in compare(f"box IoU, {n:,} pairs", timed, device=device, show=n == 10**5):
            records[record.variant, n] = record

# sphinx_gallery_start_ignore
new_graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs_before
assert new_graphs == 1, f"torch.compile captured {new_graphs} graphs for {len(sizes)} sizes"
# sphinx_gallery_end_ignore

# %%
# The table above is the notebook's size, 100,000 pairs.
#
# Time against memory bandwidth
# -----------------------------
# The 36 bytes per pair divided by the time give an *effective* bandwidth: what the
# variant would need to move if it moved only what a fused kernel must (eager really
# moves far more, which is the point). For the copy it is its true bandwidth.
bandwidth = {}  # variant -> {size: bytes per second}
for (name, n), record in records.items():
    bandwidth.setdefault(name, {})[n] = bytes_per_pair * n / record.median_s

print(f"{'GB/s at pairs':>18}" + "".join(f"{n:>11,}" for n in sizes))
for name, row in bandwidth.items():
    cells = [f"{row[n] / 1e9:.1f}" if n in row else "" for n in sizes]
    print(f"{name:>18}" + "".join(f"{c:>11}" for c in cells))

# %%
# On the left, time per call with each measurement's interquartile range: flat at
# small sizes, where the fixed cost of running operations dominates, then rising in
# proportion to the size, where moving the bytes dominates. On the right, the same
# measurements as effective bandwidth. When the data outgrows a cache, the copy's
# line falls and stays lower, and a fused kernel bound by memory falls with it: a fall
# in both is the memory's doing, not the kernel's (a single point off its line is more
# likely this shared machine's noise). The copy is a yardstick, not a ceiling: it
# writes as many bytes as it reads, while the IoU writes one byte for every eight it
# reads, and on most CPUs a write first reads the memory it replaces.
import matplotlib.pyplot as plt

fig, (ax_time, ax_bw) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
for name in bandwidth:
    ns = [n for n in sizes if (name, n) in records]
    rec = [records[name, n] for n in ns]
    style = {"color": "gray", "linestyle": ":"} if name.startswith("copy") else {}
    yerr = [[r.median_s - r.q1_s for r in rec], [r.q3_s - r.median_s for r in rec]]
    ax_time.errorbar(
        ns, [r.median_s for r in rec], yerr=yerr, marker="o", capsize=3, label=name, **style
    )
    ax_bw.plot(ns, [bandwidth[name][n] / 1e9 for n in ns], marker="o", **style)
ax_time.set(xscale="log", yscale="log", xlabel="box pairs", ylabel="time per call (s)")
ax_time.set_title("Box IoU: time per call")
ax_bw.set(xscale="log", xlabel="box pairs", ylabel="effective bandwidth (GB/s)")
ax_bw.set_title("36 bytes per pair / time")
fig.legend(loc="outside right upper", fontsize="small")
plt.show()

# %%
# The notebook's figures against this machine
# --------------------------------------------
# The notebook timed 100,000 pairs on a GPU: 238 µs eager, 40.3 µs with TorchScript's
# fuser, 5.9× faster. Below, the smallest size, the notebook's and the largest, each
# speed-up with its interval and verdict. At the smallest size both versions pay
# mostly fixed costs, and the compiled function adds its own (checking its guards,
# calling the generated code), so fusion need not win there.
from effpt.bench import speedup

for n in (sizes[0], 10**5, sizes[-1]):
    line = f"{n:>11,} pairs: eager {format_seconds(records['eager', n].median_s)}"
    for name in variants:
        if name != "eager" and (name, n) in records:
            ratio = speedup(records["eager", n], records[name, n])
            line += (
                f"; {name} {format_seconds(records[name, n].median_s)}, {ratio} ({ratio.verdict})"
            )
    print(line)
largest = sizes[-1]
share = bandwidth["torch.compile"][largest] / bandwidth["copy, same bytes"][largest]
print(f"{largest:,} pairs: torch.compile reaches {share:.0%} of the copy's bandwidth")

# %%
# Summary
# -------
# - Eager PyTorch runs one kernel, and one pass over memory, per elementwise
#   operation; a fused kernel makes one pass for the whole chain.
# - :func:`torch.compile` fuses such chains on CPU and GPU; with ``dynamic=True`` one
#   compilation serves every size. Report its compile time apart from its run time.
# - Judge a kernel bound by memory by its effective bandwidth against a copy of the
#   same bytes timed beside it, not by its time alone: both slow down when the data
#   outgrows the caches.
# - TorchScript's fuser is legacy: standard CPU wheels do not fuse at all, and on a GPU
#   it depends on NVRTC at run time.
