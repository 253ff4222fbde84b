"""
Set the CPU's own knobs: threads, waiting, pinning and vector width
===================================================================

.. effpt-before-you-start::
   :learn: - Set the intra-op and inter-op thread pools, and tell which settings only a
             new process can change.
           - Measure what OpenMP's wait policy trades: the wake-up a small operation pays
             against the CPU time that idle threads use while they spin.
           - Avoid oversubscription when several processes each take every core, with a
             thread cap and, where the OS allows it, pinning.
           - Read the CPU capability torch picked, and measure bfloat16 against float32.
   :read-first: :doc:`/auto_examples/compilation/plot_where_time_goes`, which measures an
                operation's fixed costs and the thread pool's hand-off.
   :needs: Any CPU; the page measures the CPU even where a GPU is present. Pinning needs
           an OS with ``os.sched_setaffinity`` (Linux); elsewhere that part prints why it
           is skipped. The thread comparisons need at least two cores to mean anything.

PyTorch runs CPU operations on a pool of threads whose size, waiting habits and
instruction set are chosen when the process starts, from the machine and from a few
environment variables. Those defaults suit one program alone on a machine; a server
running several workers, a laptop busy with other work or a build timing small
operations may want others. This page sets each knob, starts a fresh process where a
knob is read only at start, and measures what each one changes on the machine that
built it.
"""

# %%
# What this process was given
# ---------------------------
# :func:`torch.get_num_threads` is the size of the intra-op pool, which splits one
# large operation across cores; :func:`torch.get_num_interop_threads` is the size of the
# inter-op pool, which runs independent operations side by side (TorchScript's
# ``fork``, some backends). :func:`effpt.machine.timing_environment` lists the variables
# that change timings and were set when this process started: an empty list means
# PyTorch's own defaults, the environment this site measures in.
import os
import sys

import torch

from effpt.device import describe
from effpt.machine import timing_environment

torch.manual_seed(0)
print(describe("cpu"))
cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
threads = torch.get_num_threads()
print(
    f"cores this process may use: {cores}; intra-op threads {threads}, "
    f"inter-op threads {torch.get_num_interop_threads()}"
)
print(f"timing variables set: {timing_environment() or 'none'}")

# %%
# Intra-op threads, changed in the running process
# ------------------------------------------------
# :func:`torch.set_num_threads` resizes the intra-op pool of the calling thread at any
# time. PyTorch's documentation asks for the call before eager, JIT or autograd code
# runs: threads that torch started earlier, such as autograd's per-device threads and
# the inter-op pool's, keep the count they started with. A matrix product large enough
# to split should finish sooner on all the threads than on one; where the machine has
# one core, or its cores are busy with other work, it may not.
from effpt.bench import compare
from effpt.expect import expect
from effpt.records import speedup

n = 384
a, b = torch.randn(n, n), torch.randn(n, n)


def product_on(count: int):
    def run():
        torch.set_num_threads(count)
        return a @ b

    return run


timed = compare(
    f"{n}×{n} matrix product",
    {"1 thread": product_on(1), f"{threads} threads": product_on(threads)},
    device="cpu",
    budget_s=0.3,
)
torch.set_num_threads(threads)  # back to the default
if threads > 1:
    expect(
        f"a {n}×{n} product runs faster on {threads} threads than on 1",
        speedup(timed[0], timed[1]),
        above=1.0,
        device="cpu",  # every knob here is the CPU's
    )
else:
    print("One intra-op thread here: there is no larger pool to compare with.")

# %%
# Knobs read only when a process starts
# -------------------------------------
# Three variables take effect only in a new process: ``OMP_NUM_THREADS`` sets the
# intra-op pool's starting size, ``OMP_WAIT_POLICY`` says whether OpenMP's idle threads
# spin or sleep, and ``ATEN_CPU_CAPABILITY`` caps the vector instructions of torch's
# kernels. The inter-op pool can be sized once, before its first use
# (:func:`torch.set_num_interop_threads`). So the page writes a small worker script to
# a temporary folder and starts it with :data:`sys.executable`, each copy with its own
# environment. The worker reads one JSON request per line and answers with one JSON
# line; timings inside it use :func:`~effpt.bench.time_callable`.
import json
import subprocess
import tempfile
from pathlib import Path

WORKER = r"""
import json, os, sys, time
import torch
from effpt.bench import time_callable

def answer(task):
    kind = task["kind"]
    if kind == "info":
        interop = [torch.get_num_interop_threads()]
        for count in (1, 2):  # the second call is refused
            try:
                torch.set_num_interop_threads(count)
                interop.append("set")
            except RuntimeError as err:
                interop.append(str(err))
        return {"threads": torch.get_num_threads(), "interop": interop,
                "capability": torch.backends.cpu.get_cpu_capability()}
    torch.set_num_threads(task["threads"])
    if kind == "small":  # the two small operations of the wait-policy table
        m, v = torch.randn(32, 32), torch.randn(65536)
        # one call a block: where a call waits for a core, a block sized on a fast
        # call would hold hundreds of slow ones
        times = {"32×32 product": time_callable(lambda: m @ m, device="cpu", number=1, budget_s=0.03),
                 "addition of 65,536 floats": time_callable(lambda: v + v, device="cpu", number=1, budget_s=0.03)}
        return {k: t.per_call for k, t in times.items()}
    if kind == "steps":  # small parallel additions with serial Python work between them
        v, cpu, began, steps = torch.randn(65536), time.process_time(), time.perf_counter(), 0
        while steps < 200 and (steps < 20 or time.perf_counter() - began < 0.05):
            v + v
            sum(range(300))
            steps += 1
        return (time.process_time() - cpu) / steps  # CPU seconds of all threads, per step
    if kind == "sigmoid":
        x = torch.randn(2**18)
        return time_callable(lambda: x.sigmoid(), device="cpu", budget_s=0.05).per_call
    if kind == "work":  # a fixed amount of work, timed from start to end
        everywhere = os.sched_getaffinity(0) if task["pin"] is not None else None
        if task["pin"] is not None:  # this thread's cores: at one thread it does all the work
            os.sched_setaffinity(0, task["pin"])
        m = torch.randn(96, 96)
        began = time.perf_counter()
        for _ in range(task["products"]):
            m @ m
        took = time.perf_counter() - began
        if everywhere is not None:
            os.sched_setaffinity(0, everywhere)
        return took
    raise ValueError(f"unknown task {kind!r}")

print(json.dumps("ready"), flush=True)
for line in sys.stdin:
    print(json.dumps(answer(json.loads(line))), flush=True)
os._exit(0)  # skip the interpreter's teardown, about half a second of CPU with torch loaded
"""
folder = tempfile.TemporaryDirectory()  # deleted at the end of the page
(Path(folder.name) / "worker.py").write_text(WORKER, encoding="utf-8")
KNOBS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "KMP_BLOCKTIME",
    "GOMP_SPINCOUNT",
    "ATEN_CPU_CAPABILITY",
)


def start(**settings):
    """A worker process with PyTorch's defaults plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if k not in KNOBS} | settings
    worker = subprocess.Popen(
        [sys.executable, str(Path(folder.name) / "worker.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    worker.settings = settings
    return worker


def send(worker, kind, **task):
    worker.stdin.write(json.dumps({"kind": kind, **task}) + "\n")
    worker.stdin.flush()


def receive(worker):
    line = worker.stdout.readline()
    if not line:
        raise RuntimeError(f"worker {worker.settings} exited with code {worker.wait()}")
    return json.loads(line)


# %%
# The workers start together, so that their imports of torch overlap; each says
# ``"ready"`` once it has. Two workers differ only in the wait policy; a third runs
# torch's portable kernels and starts with ``OMP_NUM_THREADS=1``. The
# oversubscription test further down pairs the default worker with a fourth one like
# it. Each start imports torch, which takes CPU time of its own, so the page starts no
# more than these.
workers = {
    "default": start(),
    "PASSIVE": start(OMP_WAIT_POLICY="PASSIVE"),
    "portable": start(ATEN_CPU_CAPABILITY="default", OMP_NUM_THREADS="1"),
    "default, second": start(),
}
for worker in workers.values():
    assert receive(worker) == "ready"
info = {}
for name, worker in workers.items():
    send(worker, "info")
    info[name] = receive(worker)
    count = info[name]["threads"]
    print(
        f"{name:>14}: {worker.settings or 'defaults'} -> {count} intra-op "
        f"thread{'s' * (count != 1)}, capability {info[name]['capability']}"
    )
print(
    f"set_num_interop_threads: first call {info['default']['interop'][1]}; "
    f"second: {info['default']['interop'][2]}"
)

# sphinx_gallery_start_ignore
assert info["portable"]["threads"] == 1
assert info["portable"]["capability"] in {"DEFAULT", "NO AVX"}  # torch 2.6 says "NO AVX"
assert info["default"]["interop"][1] == "set"
assert "cannot set number of interop threads" in info["default"]["interop"][2]
# sphinx_gallery_end_ignore

# %%
# Spinning or sleeping: OpenMP's wait policy
# ------------------------------------------
# When a parallel region ends, the threads that helped have nothing to do. By default
# they spin for a while, burning a core, so that the next region finds them awake;
# ``OMP_WAIT_POLICY=PASSIVE`` puts them to sleep at once, and every region then pays to
# wake them. The two workers time a 32 × 32 matrix product and an addition of 65,536
# float32 numbers at 2 threads, taking turns four times so that a change in the
# machine's load falls on both.
from effpt.bench import Timing
from effpt.records import format_seconds

policies = ("default", "PASSIVE")
small = {p: {} for p in policies}
for _ in range(4):
    for policy in policies:
        send(workers[policy], "small", threads=2)
        for op, per_call in receive(workers[policy]).items():
            small[policy][op] = small[policy].get(op, ()) + tuple(per_call)
small = {p: {op: Timing(t, 1) for op, t in ops.items()} for p, ops in small.items()}
for op in small["default"]:
    print(
        f"{op}: default {format_seconds(small['default'][op].median)}, "
        f"PASSIVE {format_seconds(small['PASSIVE'][op].median)}"
    )
    expect(
        f"the {op} at 2 threads takes longer with OMP_WAIT_POLICY=PASSIVE than by default",
        speedup(small["PASSIVE"][op], small["default"][op]),
        above=1.0,
        device="cpu",  # every knob here is the CPU's
    )

# %%
# These two verdicts turn on whether the worker's two threads each find a core free:
# a spinning helper pays only while it has a core of its own, and where the cores
# also run other work (another program, another job beside this page) it is
# descheduled or takes time from that work, so either policy can come out ahead. The
# line below prints the load average, where the OS reports it, beside the cores this
# process may use.
if hasattr(os, "getloadavg"):
    print(f"load average, last minute: {os.getloadavg()[0]:.1f}; cores for this process: {cores}")
else:
    print(f"no load average on this OS; cores for this process: {cores}")

# %%
# What spinning costs is the other side: a core that a spinning thread holds is a core
# other work does not get. Each worker below runs up to 200 steps (at least 20, and
# no more once they have taken a twentieth of a second) of one addition followed by
# serial Python work, and reports the CPU time its threads used per step. A helper
# thread that spins through the serial part adds that time to the step's CPU; one that
# sleeps adds its wake-up, which costs system calls on both sides. How long an idle
# thread spins before it sleeps depends on the OpenMP runtime, so either can cost more;
# the verdict says which did here.
cpu = {p: [] for p in policies}
for _ in range(4):
    for policy in policies:
        send(workers[policy], "steps", threads=2)
        cpu[policy].append(receive(workers[policy]))
cpu = {p: Timing(tuple(s), 1) for p, s in cpu.items()}
print(", ".join(f"{p}: {format_seconds(s.median)} of CPU per step" for p, s in cpu.items()))
_ = expect(
    "between small parallel operations, the default wait policy uses more CPU than PASSIVE",
    speedup(cpu["default"], cpu["PASSIVE"]),
    above=1.0,
    device="cpu",  # every knob here is the CPU's
)  # default / PASSIVE

# %%
# Oversubscription: several processes that each take every core
# --------------------------------------------------------------
# A few servers on one machine, or jobs started side by side, each start a pool of as
# many threads as there are cores. PyTorch's own launchers cap theirs: each DataLoader
# worker calls ``torch.set_num_threads(1)``, and ``torchrun`` sets
# ``OMP_NUM_THREADS=1`` for several processes a node unless it is already set. Two
# uncapped processes put twice as many threads as cores on the CPU, and a parallel
# region waits for whichever of its threads the OS has parked.
#
# The usual remedy is one thread per process (``OMP_NUM_THREADS=1`` when it starts,
# :func:`torch.set_num_threads` once it runs) and, where the OS allows, pinning each
# process to cores of its own with :func:`os.sched_setaffinity`. Predict first: do the
# two together pay on your machine? The default worker and its twin run the same
# products of 96 × 96 matrices at once, five rounds each way: with every core each,
# then at one thread each, pinned to a core apiece (the pin binds the calling thread,
# which does all the work). Each round's time is the later of the two.
#
# On crowded cores each product can wait for the OS's time slice, so a probe of four
# crowded products first sets how many a round runs (at most 20).
can_pin = hasattr(os, "sched_setaffinity") and cores >= 2
if not can_pin:
    why = "this OS has no os.sched_setaffinity" if cores >= 2 else "fewer than two cores"
    print(f"Pinning skipped: {why}; the capped pair runs unpinned.")
own_cores = sorted(os.sched_getaffinity(0))[:2] if can_pin else [None, None]
pair = ("default", "default, second")


def together(products: int, capped: bool) -> float:
    """Seconds until both workers of the pair have run ``products`` products at once."""
    for name, core in zip(pair, own_cores, strict=True):
        pin = [core] if capped and core is not None else None
        threads = 1 if capped else info[name]["threads"]
        send(workers[name], "work", threads=threads, pin=pin, products=products)
    return max(receive(workers[name]) for name in pair)


per_product = together(4, capped=False) / 4
products = max(4, min(20, int(0.05 / per_product)))
print(f"probe: {format_seconds(per_product)} a product with every core each; {products} a round")
capped_label = "one thread each, pinned" if can_pin else "one thread each"
rounds = {"each takes every core": [], capped_label: []}
for _ in range(5):  # at least four a side, or no interval can decide
    for label, times in rounds.items():
        times.append(together(products, capped=label == capped_label))
rounds = {label: Timing(tuple(t), 1) for label, t in rounds.items()}
for label, t in rounds.items():
    print(f"{label}: {format_seconds(t.median)} for both")
crowded, capped = rounds.values()
_ = expect(
    "two processes finish the same work sooner with one thread each than with every core each",
    speedup(crowded, capped),
    above=1.0,
    device="cpu",  # every knob here is the CPU's
)

# %%
# Vector instructions: what the CPU capability means for speed
# ------------------------------------------------------------
# :func:`torch.backends.cpu.get_cpu_capability` names the widest instruction set torch's
# own kernels use here (``AVX512``, ``AVX2``, ``SVE256``, ``DEFAULT``, which torch 2.6
# calls ``NO AVX``...). The
# ``portable`` worker was started with ``ATEN_CPU_CAPABILITY=default``; both it and the
# default worker time a sigmoid of 262,144 numbers on one thread, taking turns. The
# verdict's machine line names this page's own process and its threads, not the workers'.
vector = {"default": (), "portable": ()}
for _ in range(3):
    for name in vector:
        send(workers[name], "sigmoid", threads=1)
        vector[name] += tuple(receive(workers[name]))
vector = {name: Timing(t, 1) for name, t in vector.items()}
print(
    f"capability here: {torch.backends.cpu.get_cpu_capability()}; sigmoid on one thread: "
    f"{format_seconds(vector['default'].median)}, with portable kernels "
    f"{format_seconds(vector['portable'].median)}"
)
expect(
    "the CPU's own vector kernels compute a sigmoid faster than torch's portable ones",
    speedup(vector["portable"], vector["default"]),
    above=1.0,
    device="cpu",  # every knob here is the CPU's
)
for worker in workers.values():
    worker.stdin.close()
    worker.wait()
folder.cleanup()

# %%
# A narrower type is faster only where torch has fast kernels for it. Where torch uses
# oneDNN's bfloat16 kernels (on x86 with AVX-512 or AVX-NE-CONVERT, fastest with
# native bfloat16 arithmetic: AVX512-BF16, AMX; on Arm, its BF16 instructions) a
# bfloat16 matrix product should run at least as fast as a float32 one; elsewhere torch
# falls back to a generic kernel, which can be many times slower. A probe first times
# three 128 × 128 products in each type, keeping the fastest; where bfloat16 takes
# over four times as long, the comparison stays at that size. The line before the
# verdict says whether ``/proc/cpuinfo`` lists native bfloat16 instructions (unknown
# where there is none) and whether torch uses oneDNN's bfloat16 kernels here.
import time

from effpt.machine import bfloat16_support

probe = {}
for dtype in (torch.float32, torch.bfloat16):
    m = torch.randn(128, 128, dtype=dtype)
    m @ m  # the first call sets the kernels up
    calls = []
    for _ in range(3):  # the fastest of three, so that one preempted call cannot decide
        began = time.perf_counter()
        m @ m
        calls.append(time.perf_counter() - began)
    probe[dtype] = min(calls)
slower = probe[torch.bfloat16] / probe[torch.float32]
size = 512 if slower <= 4 else 128
x32 = torch.randn(size, size)
x16 = x32.to(torch.bfloat16)
print(
    f"probe, 128×128: float32 {format_seconds(probe[torch.float32])}, bfloat16 "
    f"{format_seconds(probe[torch.bfloat16])} ({slower:.3g}× float32's); size {size}"
)
bf16 = compare(
    f"{size}×{size} matrix product",
    {"float32": lambda: x32 @ x32, "bfloat16": lambda: x16 @ x16},
    device="cpu",
    budget_s=0.3,
)
print(f"capability {torch.backends.cpu.get_cpu_capability()}; {bfloat16_support()}")
_ = expect(
    f"a {size}×{size} bfloat16 product runs faster than a float32 one here",
    speedup(bf16[0], bf16[1]),
    above=1.0,
    device="cpu",  # every knob here is the CPU's
)

# %%
# What the page measured
# ----------------------
# Each point is a median, its bars the quartiles of the repeats, on logarithmic axes:
# the two small operations under each wait policy on the left, the two pairs of
# processes on the right.
import matplotlib.pyplot as plt

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), layout="constrained")
for shift, policy in zip((-0.08, 0.08), policies, strict=True):
    ops = list(small[policy])
    med = [small[policy][op].median * 1e6 for op in ops]
    low = [(small[policy][op].median - small[policy][op].q1) * 1e6 for op in ops]
    high = [(small[policy][op].q3 - small[policy][op].median) * 1e6 for op in ops]
    left.errorbar(
        [i + shift for i in range(len(ops))],
        med,
        yerr=[low, high],
        fmt="o",
        label=f"wait policy {policy}",
    )
left.set(
    xticks=range(len(ops)),
    xticklabels=ops,
    ylabel="µs per call",
    yscale="log",
    xlim=(-0.5, len(ops) - 0.5),
    title="At 2 threads",
)
left.legend()
labels = list(rounds)
right.errorbar(
    range(len(labels)),
    [rounds[k].median for k in labels],
    fmt="o",
    yerr=[
        [rounds[k].median - rounds[k].q1 for k in labels],
        [rounds[k].q3 - rounds[k].median for k in labels],
    ],
)
right.set(
    xticks=range(len(labels)),
    xticklabels=labels,
    ylabel="seconds for both",
    yscale="log",
    xlim=(-0.5, len(labels) - 0.5),
    title="Two processes at once",
)
plt.show()

# %%
# Summary
# -------
# - ``torch.set_num_threads`` resizes the calling thread's intra-op pool at any time
#   (call it early: threads torch started before keep their count); the inter-op pool
#   can be sized once. ``OMP_NUM_THREADS``, ``OMP_WAIT_POLICY`` and
#   ``ATEN_CPU_CAPABILITY`` are read when a process starts: set them before it starts.
#
# - The default wait policy keeps idle threads spinning for a while: small operations
#   skip the wake-up, and the spinning uses CPU time. ``PASSIVE`` puts them to sleep at
#   once and makes each parallel region pay to wake them. The verdicts above say which
#   weighed more here, for time and for CPU.
#
# - Several processes that each take every core oversubscribe the CPU; capping each to
#   its share of the cores, and pinning where the OS allows it, is the remedy to
#   measure, as the verdict above did here.
#
# - The capability torch reports is the instruction set its own kernels use; bfloat16
#   is fast only where torch has fast kernels for it on that CPU, so measure before
#   switching.
#
# - PyTorch's notes on
#   `CPU threading <https://docs.pytorch.org/docs/stable/notes/cpu_threading_torchscript_inference.html>`__
#   describe the two pools; this page measures what they change.
