"""
Fuse elementwise work into one kernel
=====================================

A chain of elementwise operations in eager PyTorch runs one kernel per operation, and
each kernel reads its inputs from memory and writes its result back. Fusing the chain
into one kernel reads the inputs once and writes the output once. This page fuses the
intersection over union (IoU) of boxes with :func:`torch.compile` and with
TorchScript's legacy fuser, and measures what the fusion buys against this machine's
memory bandwidth.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_fusing_elementwise_work.py``.
"""

# %%
# Intersection over union, one operation at a time
# ------------------------------------------------
# Boxes are rows ``(x, y, width, height)``. The IoU of two boxes is the area of their
# intersection divided by the area of their union; detection models compute it for
# many box pairs at once. In eager mode every arithmetic operation below is a kernel
# of its own, a full pass over memory. (``torch.max`` with two tensors is
# :func:`torch.maximum`; the legacy fuser further down only knows this spelling.)
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))


def iou(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    x1, y1, w1, h1 = boxes1.unbind(-1)  # each (n,)
    x2, y2, w2, h2 = boxes2.unbind(-1)
    inter_w = (torch.min(x1 + w1, x2 + w2) - torch.max(x1, x2)).clamp(min=0)
    inter_h = (torch.min(y1 + h1, y2 + h2) - torch.max(y1, y2)).clamp(min=0)
    inter = inter_w * inter_h
    union = w1 * h1 + w2 * h2 - inter
    return inter / union.clamp(min=1e-5)


def make_boxes(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    scale = torch.tensor([1.0, 1.0, 0.5, 0.5], device=device)  # corners in [0, 1), sides < 0.5
    return torch.rand(n, 4, device=device) * scale, torch.rand(n, 4, device=device) * scale


boxes1, boxes2 = make_boxes(100_000)  # (n, 4) each
print(f"{boxes1.shape[0]:,} pairs; mean IoU {iou(boxes1, boxes2).mean().item():.3f}")

# %%
# Before making it fast, pin down what it should return: :func:`effpt.ops.box_iou`
# computed in float64 is the reference every variant below is checked against.
from effpt.ops import box_iou

reference = box_iou(boxes1.double(), boxes2.double())
error = (iou(boxes1, boxes2).double() - reference).abs().max().item()
print(f"eager float32 against the float64 reference: max difference {error:.1e}")

# sphinx_gallery_start_ignore
assert error < 1e-5, error
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
import warnings

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
print(f"max difference from eager: {(fused - iou(boxes1, boxes2)).abs().max().item():.1e}")

# sphinx_gallery_start_ignore
assert len(kernels) == 1, kernels
torch.testing.assert_close(fused.double(), reference, rtol=0, atol=1e-5)
# sphinx_gallery_end_ignore

# %%
# TorchScript's fuser, where it still runs
# ----------------------------------------
# TorchScript fused elementwise chains too, and the source of this example measured a
# 5.9× speed-up from it on a GPU. It is deprecated; its warnings are silenced around
# the calls below. By default a TorchScript function runs under the *profiling*
# executor, which fuses with NNC; on a CPU that needs an LLVM backend that standard
# wheels leave out. Count the fusion groups in the optimised graph of a traced IoU:
import contextlib


@contextlib.contextmanager
def torchscript_quietly():
    """Ignore TorchScript's own deprecation warnings inside the block."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"`torch\.jit\.\w+` is deprecated", category=DeprecationWarning
        )
        yield


def fusion_groups(graph: torch.Graph) -> int:
    """Fused subgraphs of either TorchScript fuser (legacy or NNC) in ``graph``."""
    return len(graph.findAllNodes("prim::FusionGroup")) + len(
        graph.findAllNodes("prim::TensorExprGroup")
    )


with torchscript_quietly():
    iou_traced = torch.jit.trace(iou, (boxes1, boxes2))
    for _ in range(3):  # the profiling executor optimises after a few runs
        iou_traced(boxes1, boxes2)
    default_groups = fusion_groups(iou_traced.graph_for(boxes1, boxes2))
print(f"default executor on {device.type}: {default_groups} fusion group(s)")

# sphinx_gallery_start_ignore
torch.testing.assert_close(iou_traced(boxes1, boxes2), iou(boxes1, boxes2))
if device.type == "cpu" and not torch._C._llvm_enabled():
    assert default_groups == 0, default_groups
# sphinx_gallery_end_ignore

# %%
# The *legacy* fuser, the ``fuser0`` that the source used, runs only under the legacy
# executor, and neither can be switched on through a public API any more. Two private
# switches of ``torch._C`` still reach them; the context manager below flips them and
# restores them afterwards. Do not build on this: it is shown only to measure what the
# legacy fuser bought. Each trace is a fresh function, so the new trace picks up the
# switches on its first call.


@contextlib.contextmanager
def legacy_fuser():
    """Run TorchScript with its legacy executor and fuser (private switches, restored)."""
    was_profiling = torch._C._jit_set_profiling_executor(False)  # returns the old value
    could_fuse_cpu = torch._C._jit_can_fuse_on_cpu_legacy()
    torch._C._jit_override_can_fuse_on_cpu_legacy(True)
    try:
        with torchscript_quietly():
            yield
    finally:
        torch._C._jit_set_profiling_executor(was_profiling)
        torch._C._jit_override_can_fuse_on_cpu_legacy(could_fuse_cpu)


legacy_error = None
with legacy_fuser():
    try:
        start = time.perf_counter()
        iou_legacy = torch.jit.trace(iou, (boxes1, boxes2))  # its check run fuses and compiles
        legacy_out = iou_legacy(boxes1, boxes2)
        legacy_compile_s = time.perf_counter() - start
        legacy_groups = fusion_groups(iou_legacy.graph_for(boxes1, boxes2))
    except RuntimeError as exc:  # e.g. no C++ compiler for the CPU fuser
        legacy_error = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
if legacy_error is None:
    print(
        f"legacy executor on {device.type}: {legacy_groups} fusion group(s); tracing and compiling took {format_seconds(legacy_compile_s)}"
    )
    print(f"max difference from eager: {(legacy_out - iou(boxes1, boxes2)).abs().max().item():.1e}")
else:
    print(f"the legacy fuser did not run here ({legacy_error}); it is left out below")

# sphinx_gallery_start_ignore
if legacy_error is None:
    torch.testing.assert_close(legacy_out.double(), reference, rtol=0, atol=1e-5)
if device.type == "cpu":
    assert legacy_error is None and legacy_groups == 1, (legacy_error, legacy_groups)
# sphinx_gallery_end_ignore

# %%
# Timing over sizes
# -----------------
# Each variant is timed with :func:`effpt.bench.compare` from a thousand to a few million
# box pairs, after a check against the float64 reference at every size.
from effpt.bench import compare

sizes = (
    [10**3, 10**4, 10**5, 10**6, 10**7, 4 * 10**7]
    if device.type == "cuda"
    else [10**3, 10**4, 10**5, 10**6, 4 * 10**6]
)
variants = {"eager": iou, "torch.compile": iou_compiled}
if legacy_error is None:
    variants["TorchScript legacy fuser"] = iou_legacy

times = {name: [] for name in variants}
with legacy_fuser():
    for n in sizes:
        a, b = make_boxes(n)
        expected = box_iou(a.double(), b.double())
        for fn in variants.values():
            torch.testing.assert_close(fn(a, b).double(), expected, rtol=0, atol=1e-5)
        records = compare(
            f"box IoU, {n:,} pairs",
            {name: (lambda fn=fn, a=a, b=b: fn(a, b)) for name, fn in variants.items()},
            device=device,
            repeats=5,
            show=False,
        )
        for record in records:
            times[record.variant].append(record.median_s)

print(f"{'pairs':>26}" + "".join(f"{n:>11,}" for n in sizes))
for name, row in times.items():
    print(f"{name:>26}" + "".join(f"{format_seconds(t):>11}" for t in row))

# sphinx_gallery_start_ignore
new_graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs_before
assert new_graphs == 1, f"torch.compile captured {new_graphs} graphs for {len(sizes)} sizes"
# sphinx_gallery_end_ignore

# %%
# Time against memory bandwidth
# -----------------------------
# A fused IoU must read two boxes of four float32 numbers and write one number per
# pair: 36 bytes. Those bytes divided by the time give an *effective* bandwidth (eager
# really moves far more, which is the point). :func:`effpt.bench.copy_bandwidth`
# measures the practical peak by copying a large buffer.
from effpt.bench import copy_bandwidth

bytes_per_pair = (2 * 4 + 1) * 4
peak = copy_bandwidth(device)
print(f"copy bandwidth of this {device.type}: {peak / 1e9:.1f} GB/s (read + write)")
fraction = {
    name: [bytes_per_pair * n / t / peak for n, t in zip(sizes, row, strict=True)]
    for name, row in times.items()
}
for name, row in fraction.items():
    print(f"{name:>26}" + "".join(f"{f:>11.0%}" for f in row))

# %%
# On the left, time per call: flat at small sizes, where the fixed cost of launching
# kernels dominates (launch-bound), then rising in proportion to the size, where
# moving the bytes dominates (bandwidth-bound). On the right, the same measurements as
# a fraction of the copy bandwidth: fusion pays most where the work is bandwidth-bound,
# since it cuts the bytes moved.
import matplotlib.pyplot as plt

fig, (ax_time, ax_bw) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
for name, row in times.items():
    ax_time.loglog(sizes, row, marker="o", label=name)
    ax_bw.semilogx(sizes, [100 * f for f in fraction[name]], marker="o", label=name)
ax_time.set(xlabel="box pairs", ylabel="time per call (s)", title="Box IoU: time per call")
ax_bw.axhline(100, color="gray", linestyle=":", label="copy bandwidth")
ax_bw.set(
    xlabel="box pairs",
    ylabel="effective bandwidth (% of copy)",
    title="Box IoU: share of memory bandwidth",
)
ax_time.legend(fontsize="small")
ax_bw.legend(fontsize="small")
plt.show()

# %%
# The source's figures against this machine
# -----------------------------------------
# The source timed 100,000 pairs on a GPU: 238 µs eager, 40.3 µs with TorchScript's
# fuser, 5.9× faster. The same size here, and the largest size:
for n in (10**5, sizes[-1]):
    i = sizes.index(n)
    line = f"{n:>11,} pairs: eager {format_seconds(times['eager'][i])}"
    for name in list(variants)[1:]:
        line += (
            f", {name} {format_seconds(times[name][i])} ({times['eager'][i] / times[name][i]:.1f}×)"
        )
    print(line)
print(
    f"largest size, torch.compile: {fraction['torch.compile'][-1]:.0%} of this {device.type}'s copy bandwidth"
)

# %%
# Summary
# -------
# - Eager PyTorch runs one kernel, and one pass over memory, per elementwise
#   operation; a fused kernel makes one pass for the whole chain.
# - :func:`torch.compile` fuses such chains on CPU and GPU; with ``dynamic=True`` one
#   compilation serves every size. Report its compile time apart from its run time.
# - Judge a bandwidth-bound kernel by its effective bandwidth against a measured copy
#   (:func:`effpt.bench.copy_bandwidth`), not by its time alone.
# - TorchScript's fusers are legacy: on CPU the default one needs LLVM and the legacy
#   one is reachable only through private switches.
