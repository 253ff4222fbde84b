"""
torch.compile without surprises
===============================

.. effpt-before-you-start::
   :learn: - Find graph breaks and their reasons with ``torch._dynamo.explain``, and turn
             a break into an error with ``fullgraph=True``.
           - Count the recompilations that shapes, dtypes, ``requires_grad`` and Python
             values cause; declare varying sizes with ``dynamic=`` or ``mark_dynamic``.
           - See the recompile limit at work, catch late recompiles with
             ``torch.compiler.set_stance``, and compile one block instead of a whole model.
           - Measure a first compilation, the calls that repay it, and what the on-disk
             cache saves another process.
   :read-first: :doc:`/auto_examples/compilation/plot_torchscript_to_compile` for a first
                use of ``torch.compile`` and ``torch._dynamo.explain``.
   :needs: A CPU is enough. Up to "Compile one block", Dynamo runs alone and compiles
           nothing. The last two sections compile with Inductor on the page's device, in a
           new Python process and then in the page's own: that needs a C++ compiler on a
           CPU, Triton on a CUDA GPU. Both compile into a new temporary cache folder,
           deleted at the end (on a CPU, a few small checks stay in Inductor's usual
           folder).

:func:`torch.compile` speeds code up most when it captures that code in a few large
graphs and compiles them once. A print, a ``.item()`` or a new input shape can quietly
split the graph or trigger one compilation after another, and the first call of a
compiled function can cost seconds. This page counts graphs, graph breaks and
recompilations exactly, shows the switches that turn each surprise into an error, and
measures what compiling costs, when it pays off and what the on-disk cache saves.
"""

# %%
# A backend that counts graphs
# ----------------------------
# ``torch.compile`` has two halves. Dynamo runs the Python function and captures its
# tensor operations into FX graphs; a *backend* then compiles each graph (Inductor by
# default). A backend is any callable that takes a graph and example inputs and returns
# something to run. The one below records every graph it is given and runs it as it
# is: it compiles nothing, so it is fast, and it counts exactly what Dynamo captured.
# Until the sections on compile time and the cache, this page studies Dynamo alone,
# with this backend or ``backend="eager"``. The facts come from PyTorch's torch.compile
# documentation (its programming model and troubleshooting pages).
import torch
import torch._dynamo

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))


class CountGraphs:
    """A torch.compile backend that keeps every graph it is given and runs it unchanged."""

    def __init__(self):
        self.graphs = []

    def __call__(self, graph_module, _example_inputs):  # inputs unused here
        self.graphs.append(graph_module)
        return graph_module.forward  # run the captured graph as plain PyTorch

    def ops(self):  # the operations in each graph, in order
        return [sum(n.op.startswith("call") for n in g.graph.nodes) for g in self.graphs]


# %%
# Four ways to break a graph
# --------------------------
# When Dynamo meets something it cannot put in a graph, it ends the graph, lets Python
# run that bit, and starts a new graph after it: a *graph break*. The result stays
# right; the cost is a trip back to Python and smaller pieces for the compiler. Each
# function below has one classic cause: a ``print``, a ``.item()`` that turns a tensor
# into a Python number, an ``if`` on a tensor's value, and a call into C code that
# Dynamo cannot look into (Python's clock).
#
# ``torch._dynamo.explain`` runs a function under Dynamo and reports its graphs and the
# reason for each break, compiling nothing. It is private, with no public counterpart in
# torch 2.13; in a real program, ``TORCH_LOGS="graph_breaks"`` logs each break with its
# line. The reasons printed are Dynamo's own first lines (``generic_jump``: a jump that
# depends on a tensor). Python runs the print between
# two graphs, and the clock's
# break raises a warning, printed above the table.
import time
import warnings


def with_print(x):
    y = x.sin()
    print("  with_print runs its print in Python")
    return y.cos()


def with_item(x):
    scale = x.abs().max().item()  # a Python float
    return x.sin() / scale


def with_branch(x):
    if x.sum() > 0:  # a decision on the data
        return x.cos()
    return x.sin()


def with_clock(x):
    y = x.sin()
    started = time.perf_counter()  # C code Dynamo cannot trace
    return y.cos(), started


def clean(x):
    return x.sin().cos()


x = torch.randn(64, device=device)
reports = {}
with warnings.catch_warnings(record=True) as shown:  # Dynamo may also warn about a break
    warnings.simplefilter("always")
    for fn in (with_print, with_item, with_branch, with_clock, clean):
        reports[fn.__name__] = torch._dynamo.explain(fn)(x)
for w in shown:
    print(f"{w.category.__name__}: {str(w.message).split(' This function')[0]}")
for name, r in reports.items():
    reason = r.break_reasons[0].reason.splitlines()[0][:64] if r.break_reasons else "-"
    print(f"{name:>11}: {r.graph_count} graph(s), {r.graph_break_count} break(s)  {reason}")

# sphinx_gallery_start_ignore
for name, r in reports.items():
    expected = (1, 0) if name == "clean" else (2, 1)
    assert (r.graph_count, r.graph_break_count) == expected, (name, r)
# sphinx_gallery_end_ignore

# %%
# The branch has a fix that keeps it in the graph (``torch.where``), shown on
# :doc:`/auto_examples/compilation/plot_torchscript_to_compile`. The others have fixes of
# the same kind: print and time outside the compiled function, and keep a scale as a
# tensor (``x.sin() / x.abs().max()``) instead of a Python number.

# %%
# fullgraph=True: fail at the first break
# ---------------------------------------
# A break in a hot function is easy to miss, because the output is still right.
# ``fullgraph=True`` makes Dynamo raise at the first break instead, with the reason and
# hints. The error comes at the first *call*, when Dynamo traces, not at
# ``torch.compile``. ``.item()`` is a special case: recent releases capture it in the
# graph as a symbolic number when ``fullgraph=True`` asks for one graph, so the last
# line of output says whether this torch raised on it.
torch._dynamo.reset()
compiled_print = torch.compile(with_print, backend="eager", fullgraph=True)  # no error yet
try:
    compiled_print(x)
except torch._dynamo.exc.Unsupported as error:
    caught = error
    lines = str(error).splitlines()
    print(f"{type(error).__name__}: {lines[0]}\n{lines[1]}")

torch._dynamo.reset()
counter = CountGraphs()
try:
    torch.compile(with_item, backend=counter, fullgraph=True)(x)
    print(f"with_item under fullgraph=True: captured in {len(counter.graphs)} graph")
except torch._dynamo.exc.Unsupported as error:
    print(f"with_item under fullgraph=True: {type(error).__name__}")

# sphinx_gallery_start_ignore
assert "print" in str(caught), str(caught)
# sphinx_gallery_end_ignore

# %%
# What makes a function compile again
# -----------------------------------
# Along with each graph Dynamo records *guards*: the assumptions the graph relies on,
# such as each input's shape, dtype, device and whether it requires grad. Every call
# checks them; when one fails, Dynamo captures and compiles again. By default
# (``dynamic=None``) the first graph is specialised to the exact shape; when a second
# shape arrives, Dynamo recompiles with that size symbolic ("automatic dynamic"), and
# later sizes reuse it. A new dtype, ``requires_grad`` or number of dimensions is a new
# graph each time. ``TORCH_LOGS="recompiles"`` names the guard that failed.
torch._dynamo.reset()


def affine(x):
    return 2 * x + 1


counter = CountGraphs()
compiled = torch.compile(affine, backend=counter)
calls = {
    "length 8": torch.randn(8, device=device),
    "length 8 again": torch.randn(8, device=device),
    "length 16": torch.randn(16, device=device),
    "length 32": torch.randn(32, device=device),
    "length 32, float16": torch.randn(32, device=device).half(),
    "length 32, requires_grad": torch.randn(32, device=device, requires_grad=True),
    "4 x 8 (two dims)": torch.randn(4, 8, device=device),
}
graphs_after = {}
for name, arg in calls.items():
    compiled(arg)
    graphs_after[name] = len(counter.graphs)
    print(f"{name:>25}: graphs compiled so far {graphs_after[name]}")

# sphinx_gallery_start_ignore
assert list(graphs_after.values()) == [1, 1, 2, 2, 3, 4, 5], graphs_after
# sphinx_gallery_end_ignore

# %%
# When you know which sizes vary, say so up front and save the first, specialised
# compilation: ``dynamic=True`` makes every size symbolic, and
# :func:`torch._dynamo.mark_dynamic` marks one dimension of one input. ``dynamic=False``
# forbids symbolic sizes, so every new length compiles anew.
lengths = (8, 16, 32)
counts = {}
for dynamic in (False, True):
    torch._dynamo.reset()
    counter = CountGraphs()
    f = torch.compile(affine, backend=counter, dynamic=dynamic)
    for n in lengths:
        f(torch.randn(n, device=device))
    counts[f"dynamic={dynamic}"] = len(counter.graphs)

torch._dynamo.reset()
counter = CountGraphs()
f = torch.compile(affine, backend=counter)
for n in lengths:
    arg = torch.randn(n, device=device)
    torch._dynamo.mark_dynamic(arg, 0)  # dimension 0 of this tensor varies
    f(arg)
counts["mark_dynamic(x, 0)"] = len(counter.graphs)
print(f"graphs for lengths {lengths}: {counts}")

# sphinx_gallery_start_ignore
assert counts == {"dynamic=False": 3, "dynamic=True": 1, "mark_dynamic(x, 0)": 1}, counts
# sphinx_gallery_end_ignore

# %%
# The recompile limit
# -------------------
# A Python number that decides control flow is guarded on its exact value: below, each
# new ``n`` unrolls a different loop, so each is a new graph. Dynamo keeps at most
# ``torch.compiler.config.recompile_limit`` graphs per function (8 by default; older
# releases call it ``torch._dynamo.config.cache_size_limit``). When a
# call would need one more, it logs a warning and from then on runs the function
# *eagerly* for inputs the kept graphs do not cover: still correct, slower, and only
# that one warning says so.
# The log handler below catches that warning so that it shows on this page.
import logging


class KeepMessages(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def repeat_scale(x, n):
    for _ in range(n):  # unrolled while tracing: the graph depends on n
        x = x * 1.5
    return x


torch._dynamo.reset()
counter = CountGraphs()
compiled = torch.compile(repeat_scale, backend=counter)
dynamo_log, kept = logging.getLogger("torch._dynamo"), KeepMessages()
dynamo_log.addHandler(kept)
same, graphs_by_n = [], {}
try:
    for n in range(1, 13):
        same.append(torch.equal(compiled(x, n), repeat_scale(x, n)))
        graphs_by_n[n] = len(counter.graphs)
finally:
    dynamo_log.removeHandler(kept)
config = torch._dynamo.config
limit = getattr(config, "recompile_limit", None) or config.cache_size_limit
print(f"12 values of n: {len(counter.graphs)} graphs (limit {limit}), results equal: {all(same)}")
print("logged:", next(m for m in kept.messages if "hit config." in m).splitlines()[0])

# sphinx_gallery_start_ignore
assert len(counter.graphs) == limit == 8 and all(same), (len(counter.graphs), limit, same)
# sphinx_gallery_end_ignore

# %%
# The two counts side by side: the graphs compiled as the calls of the previous section
# arrived, and as ``n`` took 12 values against the limit.
import matplotlib.pyplot as plt

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), layout="constrained")
left.plot(range(len(graphs_after)), list(graphs_after.values()), "o-", drawstyle="steps-post")
left.set(
    xticks=range(len(graphs_after)),
    ylabel="graphs compiled so far",
    title="A recompile per new guard",
)
left.set_xticklabels(list(graphs_after), rotation=35, ha="right", fontsize=8)
right.plot(list(graphs_by_n), list(graphs_by_n.values()), "o", label="graphs kept")
right.axhline(limit, color="grey", linestyle="--", label=f"recompile_limit = {limit}")
right.set(xlabel="n (a Python int the loop unrolls)", ylabel="graphs", title="The limit")
right.legend(loc="lower right")
plt.show()

# %%
# Raising the limit only postpones the problem; the fix is to stop the recompiles (here,
# keep the loop in Python outside the compiled function, or compile its body). To make
# hitting the limit an error instead of a warning, set
# ``torch.compiler.config.fail_on_recompile_limit_hit = True`` (torch 2.13's name).

# %%
# Stances: change the rules without recompiling
# ---------------------------------------------
# :func:`torch.compiler.set_stance` changes what every compiled function does, as a
# context manager, a decorator or a plain call. ``"fail_on_recompile"`` raises where a
# recompilation would happen: wrap the steady state of a training loop in it, after
# the warm-up steps, and a guard that fails late cannot hide. ``"eager_on_recompile"``
# runs such calls eagerly instead, and ``"force_eager"`` ignores ``torch.compile``
# altogether, handy to tell whether a wrong result comes from the compiler.
torch._dynamo.reset()
counter = CountGraphs()
compiled = torch.compile(affine, backend=counter)
compiled(torch.randn(8, device=device))  # warm-up: one graph
with torch.compiler.set_stance("fail_on_recompile"):
    compiled(torch.randn(8, device=device))  # guards pass: runs the graph
    try:
        compiled(torch.randn(8, device=device).half())  # a new dtype
    except RuntimeError as error:
        stance_error = str(error)
        print("RuntimeError:", stance_error.splitlines()[0].split(". filename")[0])
with torch.compiler.set_stance("eager_on_recompile"):
    compiled(torch.randn(8, device=device).half())
with torch.compiler.set_stance("force_eager"):
    compiled(torch.randn(8, 8, device=device))
print(f"graphs compiled through all of this: {len(counter.graphs)}")

# sphinx_gallery_start_ignore
assert "fail_on_recompile" in stance_error, stance_error
assert len(counter.graphs) == 1
# sphinx_gallery_end_ignore

# %%
# Compile one block, not the whole model
# --------------------------------------
# A model that repeats one block, as transformers do, can be compiled whole or block by
# block (``block.compile()``, the "regional compilation" of PyTorch's recipes).
# Compiled whole, the model is one graph that grows with its depth, and Inductor's work
# grows with the operations captured. Compiled per block, each graph holds one block,
# blocks of the same class share graphs, and the Python between blocks (logging, a
# ``.item()`` for a progress bar) stays outside the compiler, where it cannot break a
# graph; ``fullgraph=True`` then guards each block. Compare the operations captured
# at two depths.
from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )

    def forward(self, x):  # (batch, width) -> (batch, width)
        return x + self.mlp(self.norm(x))


def make_net(depth, width=32):
    return nn.Sequential(*(Block(width) for _ in range(depth))).to(device)


batch = torch.randn(8, 32, device=device)  # (batch, width)
captured = {}
for depth in (3, 6):
    torch._dynamo.reset()
    counter = CountGraphs()
    torch.compile(make_net(depth), backend=counter)(batch)
    captured[f"whole, depth {depth}"] = counter.ops()
    torch._dynamo.reset()
    counter, net = CountGraphs(), make_net(depth)
    for block in net:
        block.compile(backend=counter, fullgraph=True)
    net(batch)
    captured[f"per block, depth {depth}"] = counter.ops()
for name, ops in captured.items():
    print(f"{name:>18}: {len(ops)} graph(s), operations per graph {ops}")

# sphinx_gallery_start_ignore
per_block = captured["per block, depth 3"]
assert captured["per block, depth 6"] == per_block and len(per_block) == 2, captured
assert captured["whole, depth 3"] == [3 * per_block[0]], captured
assert captured["whole, depth 6"] == [6 * per_block[0]], captured
# sphinx_gallery_end_ignore

# %%
# Per block, two graphs whatever the depth: the first block's input is data, which
# does not require grad, while every later block's input came through the first
# block's weights and does, so the ``requires_grad`` guard from above gives the first
# block a graph of its own and all later blocks share the other. Under
# :func:`torch.no_grad` one graph would serve them all.

# %%
# Compile time, and when it pays off
# ----------------------------------
# Now the real compiler. The first call of a function compiled with Inductor captures
# it, generates and builds code (C++ on a CPU, Triton kernels on a CUDA GPU) and runs
# it; later calls only check guards and run. To time a first compilation, a fresh
# Python process points Inductor at an empty cache folder (``TORCHINDUCTOR_CACHE_DIR``).
# It times its first call, later calls and the eager function with
# :func:`effpt.bench.time_callable` (how: :doc:`/explanations/timing`) and prints JSON.
# The function, GELU's tanh approximation, is eight elementwise operations that
# Inductor can fuse into one pass.
#
# On a CPU, the process first runs Inductor's check of the vector instructions the
# compiler can build (``pick_vec_isa``, private) in its usual folder: a few small
# builds, kept there, each loaded by a short-lived Python process. A process pays for
# the check once, not per function, so it stays off the clock.
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, os, sys, time
import torch
from torch._inductor.cpu_vec_isa import pick_vec_isa
from effpt.bench import synchronize, time_callable
from effpt.device import pick_device


def gelu(x):  # eight elementwise operations
    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3)))


torch.manual_seed(0)
torch.set_float32_matmul_precision("highest")  # the default, set: the cache key reads it
device = pick_device()
if device.type == "cpu":
    pick_vec_isa()  # the vector-instruction check, in the usual cache folder
os.environ["TORCHINDUCTOR_CACHE_DIR"] = sys.argv[1]  # empty: nothing compiled before
n = 1 << 22 if device.type == "cuda" else 1 << 20
x = torch.randn(n, device=device)
compiled = torch.compile(gelu)
start = time.perf_counter()
result = compiled(x)  # captures, generates and builds code, then runs it
synchronize(device)
report = {"first": time.perf_counter() - start, "gap": (result - gelu(x)).abs().max().item()}
for name, fn in (("eager", gelu), ("compiled", compiled)):
    t = time_callable(lambda fn=fn: fn(x), device=device, budget_s=0.2)
    report[name] = (t.median, t.q1, t.q3)
print(json.dumps(report))
"""


def run_child(cache_dir):
    """Run CHILD in a new Python process with cache_dir as its Inductor cache; return its report."""
    script = Path(cache_dir).parent / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(cache_dir)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


# %%
# The new process runs its own script, not this page; the launch still sits under the
# ``__main__`` guard, as on the site's other pages that start processes
# (:doc:`/explanations/workers`). The first call minus a later one is what compiling cost.
if __name__ == "__main__":
    workdir = Path(tempfile.mkdtemp(prefix="compile-cache-"))
    cache_dir = workdir / "inductor-cache"  # empty: nothing compiled before
    first_process = run_child(cache_dir)
    eager, fast = first_process["eager"], first_process["compiled"]  # (median, q1, q3) s
    cold = first_process["first"]
    print(f"first call, empty cache: {cold:8.3f} s")
    print(f"later compiled calls:    {fast[0] * 1e3:8.3f} ms (median)")
    print(f"eager calls:             {eager[0] * 1e3:8.3f} ms (median)")

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert first_process["gap"] < 1e-3, first_process
# sphinx_gallery_end_ignore

# %%
# Compiling pays off once the time saved per call has repaid the first call. How many
# calls that takes depends on the compiler's speed on the machine and on what the fused
# kernel saves over eager's eight passes (a CPU limited to scalar loops,
# ``ATEN_CPU_CAPABILITY=default``, may save nothing). Will 10,000 calls repay it on your
# machine? The expectation compares 10,000 eager calls with the first compiled call plus
# 9,999 more, the quartiles of both timings giving its interval.
from effpt.expect import expect

if __name__ == "__main__":
    saved = eager[0] - fast[0]  # seconds saved per call, from the medians
    if saved > 0:
        print(f"compiling pays for itself after about {(cold - fast[0]) / saved:,.0f} calls")
    else:
        print("the compiled calls were not faster here: compiling does not pay off")
    calls = 10_000
    expect(
        "compiling the GELU pays off within 10,000 calls, counting its first call",
        (
            calls * eager[0] / (cold + (calls - 1) * fast[0]),
            calls * eager[1] / (cold + (calls - 1) * fast[2]),
            calls * eager[2] / (cold + (calls - 1) * fast[1]),
        ),
        above=1.0,
        device=device,
    )

# %%
# The vector instructions decide that verdict: the compiled kernel's loops use the
# widest set torch's capability allows, and with ``DEFAULT`` they are scalar. This
# machine's:
if __name__ == "__main__":
    print(f"torch's CPU capability: {torch.backends.cpu.get_cpu_capability()}")

# %%
# The cache across processes
# --------------------------
# Inductor writes what it generates and builds into its cache folder: compiled graphs
# (its FX graph cache and AOTAutograd's cache) and kernels. A second process pointed at
# the same folder still runs Dynamo and checks guards, but finds the rest on disk.
# PyTorch's compile-time caching recipes describe these caches and
# :func:`torch.compiler.save_cache_artifacts` (torch 2.7 and later), which packs the
# entries a process made into bytes that :func:`torch.compiler.load_cache_artifacts`
# loads elsewhere.
#
# Here the second process is this page's own, which has not compiled the GELU: after
# the same check, it compiles once against the folder and counts the FX graph cache's
# hits. The cache's key includes global settings: both processes set the float32
# matmul precision to ``"highest"``, the default, since one that set it (as this site's
# build does) and one that did not can differ in the key and miss. (In a docs build that runs many pages in one process, Inductor is
# loaded already and that call is cheaper.) How much the folder saves depends on what
# the first compilation spent building; the expectation compares the two first calls.
import shutil

from torch._inductor.cpu_vec_isa import pick_vec_isa

from effpt.bench import synchronize


def gelu(x):  # the child's GELU, the same eight operations
    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3)))


if __name__ == "__main__":
    if device.type == "cpu":
        pick_vec_isa()  # the vector-instruction check, in this process's usual folder
    usual = os.environ.get("TORCHINDUCTOR_CACHE_DIR")  # the check set it; else None: default
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir)  # the folder the child filled
    try:
        torch._dynamo.reset()
        torch.set_float32_matmul_precision("highest")  # as the child did
        hits = torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"]
        x = torch.randn(1 << 22 if device.type == "cuda" else 1 << 20, device=device)
        start = time.perf_counter()
        result = torch.compile(gelu)(x)
        synchronize(device)
        warm = time.perf_counter() - start
        hits = torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"] - hits
    finally:
        if usual is None:
            del os.environ["TORCHINDUCTOR_CACHE_DIR"]
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = usual
    print(f"first call, empty cache, new process:     {cold:.3f} s")
    print(f"first call, same cache, this page's process: {warm:.3f} s")
    print(f"FX graph cache hits in that call: {hits}")
    expect(
        "a second process with the same TORCHINDUCTOR_CACHE_DIR compiles faster than the first",
        cold / warm,
        above=1.0,
        device=device,
    )
    shutil.rmtree(workdir)

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert (result - gelu(x)).abs().max().item() < 1e-3 and hits >= 1, hits
    assert "return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3)))" in CHILD
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Find graph breaks with ``torch._dynamo.explain`` or ``TORCH_LOGS="graph_breaks"``;
#   prints, ``.item()``, branches on tensor values and calls into untraceable C code
#   are the usual causes. ``fullgraph=True`` turns a break into an error at the first call.
#
# - Guards on shape, dtype, ``requires_grad`` and Python values decide recompilation;
#   ``TORCH_LOGS="recompiles"`` names them. Declare varying sizes with ``dynamic=True``
#   or ``mark_dynamic``.
#
# - Past ``recompile_limit`` graphs a function runs eagerly after one warning; make
#   that an error with ``fail_on_recompile_limit_hit``, or guard a loop's steady state
#   with ``torch.compiler.set_stance("fail_on_recompile")``.
#
# - Compile the repeated block rather than the whole model: small graphs, no breaks
#   from the Python around them.
#
# - The first call pays for compiling; count the calls it takes to repay it on your
#   device, and keep the ``TORCHINDUCTOR_CACHE_DIR`` folder between runs, so that the
#   next process finds the built code on disk.
