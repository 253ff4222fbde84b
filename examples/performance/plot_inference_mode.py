"""
Inference without autograd's costs
==================================

.. effpt-before-you-start::
   :learn: - Tell what ``eval()``, ``no_grad`` and ``inference_mode`` each turn off, and
             use ``eval()`` with one of the two contexts for inference.
           - Count the bytes a recorded graph keeps for backward, with saved-tensor hooks.
           - Recognise the two errors an inference tensor raises outside
             ``inference_mode``, and get an ordinary tensor back with ``.clone()``.
           - Measure what each switch saves and how batch size trades latency for
             throughput, and read the verdicts.
   :read-first: :doc:`/auto_examples/basics/plot_autograd` for the graph autograd records
                and its short section on ``no_grad`` and ``inference_mode``.
   :needs: A CPU is enough. On a CUDA or Apple MPS GPU the page runs with larger sizes
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU). Only the peak-memory cell needs
           CUDA; elsewhere it prints one line saying so. On a CPU the batch sweep runs at
           one thread and, where there are more, at all the machine's threads.

A model that only predicts has no use for a backward pass, yet by default every forward
records a graph and keeps the tensors a backward pass would read. :class:`torch.no_grad`
and :class:`torch.inference_mode` turn that work off, each to a different depth;
:meth:`~torch.nn.Module.eval`, often taken for a third way, changes what some layers
compute and nothing else. This page shows what each switch turns off, measures what that
saves on the machine that built it, shows the rule ``inference_mode`` adds, and measures
how batch size trades latency for throughput.
"""

# %%
# A small model with dropout and batch norm
# -----------------------------------------
# Two kinds of layer in the model behave differently in training and in evaluation:
# :class:`~torch.nn.Dropout` and :class:`~torch.nn.BatchNorm1d`. Its parameters require
# gradients, as they do in any model that was just trained. The sizes of every measurement
# on this page are set in one line, by device.
import torch
from torch import nn

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))
width, large, largest = (256, 512, 1024) if device.type == "cpu" else (1024, 4096, 16384)


def block(features: int) -> list[nn.Module]:
    return [nn.Linear(features, features), nn.BatchNorm1d(features), nn.ReLU(), nn.Dropout(0.1)]


model = nn.Sequential(*block(width), *block(width), nn.Linear(width, 10)).to(device)
x8 = torch.randn(8, width, device=device)  # (batch, features)
print(f"{sum(p.numel() for p in model.parameters()):,} parameters, width {width}")

# %%
# ``eval()`` and ``no_grad`` are independent switches
# ---------------------------------------------------
# ``model.eval()`` changes what two kinds of layer compute: dropout passes its input through
# unchanged, and batch norm normalizes with its running statistics instead of the batch's
# and stops updating them. It says nothing to autograd. ``no_grad`` is the other way round:
# it stops the recording and leaves the layers alone (:doc:`/auto_examples/basics/plot_autograd`
# shows it for dropout). The four combinations below run the model twice on the same batch
# and report what happened.
bn = model[1]
rows = {}
for train in (True, False):
    for grad in (True, False):
        model.train(train)
        stats_before = bn.running_mean.clone()
        with torch.set_grad_enabled(grad):
            first, second = model(x8), model(x8)
        rows["train" if train else "eval", "grad" if grad else "no_grad"] = (
            not torch.equal(first, second),  # dropout drew different masks
            not torch.equal(stats_before, bn.running_mean),  # batch norm updated its stats
            first.grad_fn is not None,  # autograd recorded a graph
        )
print(f"{'mode':<7}{'context':<9}{'calls differ':>13}{'stats move':>12}{'graph':>7}")
for (mode, context), (differ, moved, graph) in rows.items():
    print(f"{mode:<7}{context:<9}{differ!s:>13}{moved!s:>12}{graph!s:>7}")

# sphinx_gallery_start_ignore
for (mode, context), (differ, moved, graph) in rows.items():
    assert differ == (mode == "train") and moved == (mode == "train"), rows
    assert graph == (context == "grad"), rows
# sphinx_gallery_end_ignore

# %%
# Two rows are common slips. ``eval grad``: a model in evaluation mode whose forward still
# builds a graph; its output requires a gradient and carries the last layer's backward
# node, printed below. ``train no_grad``: evaluating without ``eval()`` draws dropout masks
# and moves batch norm's running statistics, so the evaluation changes the model.
model.eval()
out = model(x8)
print(f"eval(), grad enabled: requires_grad={out.requires_grad}, grad_fn={out.grad_fn.name()}")

# sphinx_gallery_start_ignore
assert out.requires_grad and out.grad_fn is not None
# sphinx_gallery_end_ignore

# %%
# What ``no_grad`` turns off: the graph and the tensors it keeps
# --------------------------------------------------------------
# A recorded graph keeps every tensor that backward will read (a linear layer's input, a
# ReLU's output) alive for as long as the output lives. Saved-tensor hooks
# (:class:`torch.autograd.graph.saved_tensors_hooks`) see each tensor as autograd saves it;
# the function below adds up the memory behind them, leaving out the parameters, the
# buffers and the input, which exist anyway. Under ``no_grad`` and ``inference_mode``
# nothing is saved; with a graph, the bytes grow with the batch.
from torch.autograd.graph import saved_tensors_hooks


def saved_bytes(run, batch: torch.Tensor) -> int:
    """Bytes of memory the graph of ``run(batch)`` keeps alive for backward."""
    exists = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    exists.add(batch.untyped_storage().data_ptr())
    found = {}  # storage address -> bytes, so that a tensor saved twice counts once

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in exists:
            found[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with saved_tensors_hooks(pack, lambda t: t):
        run(batch)  # what the graph saved stays alive until run's output is dropped
    return sum(found.values())


contexts = {
    "grad": torch.enable_grad,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}
kept = {}
for b in (1, large):
    batch = torch.randn(b, width, device=device)  # (batch, features)
    for name, context in contexts.items():
        with context():
            kept[name, b] = saved_bytes(model, batch)
    print(f"batch {b:>5}: " + ", ".join(f"{n} {kept[n, b] / 1024:,.1f} KiB" for n in contexts))
    print(f"{'':>12}that is {kept['grad', b] / b:,.0f} bytes per sample with a graph")

# sphinx_gallery_start_ignore
for b in (1, large):
    assert kept["no_grad", b] == 0 and kept["inference_mode", b] == 0, kept
assert 0 < kept["grad", 1] < kept["grad", large], kept
# sphinx_gallery_end_ignore

# %%
# On CUDA the allocator's peak should show the same difference: with a graph, every saved
# activation is still held when the forward ends; without one, each can be freed once the
# next layer has read it. The peak also holds what the kernels allocate for themselves, so
# the ratio is an expectation, measured where the CUDA allocator reports a peak.
from effpt.expect import expect


def peak_bytes(context, batch: torch.Tensor) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    with context():
        model(batch)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


if device.type == "cuda":
    batch = torch.randn(large, width, device=device)  # (batch, features)
    peaks = {name: peak_bytes(context, batch) for name, context in contexts.items()}
    print({name: f"{p / 2**20:.1f} MiB" for name, p in peaks.items()})
    expect(
        f"recording the graph raises a batch-{large} forward's peak memory over no_grad",
        peaks["grad"] / peaks["no_grad"],
        above=1.0,
        device=device,
    )
else:
    print(
        f"Peak memory is read from the CUDA allocator; on {device.type} the bytes above stand in."
    )

# %%
# What ``inference_mode`` turns off as well: version counters and views
# ---------------------------------------------------------------------
# Autograd gives every tensor a version counter that each in-place write bumps; a saved
# tensor whose version changed before backward raises an error instead of giving a wrong
# gradient (:doc:`/auto_examples/basics/plot_in_place_operations`). It also remembers that
# a view shares its base's memory, so that a write through the view reaches the base's
# history. ``no_grad`` keeps both, because a tensor made under it may meet autograd later.
# Under ``inference_mode`` every newly allocated tensor is an *inference tensor*: no version
# counter (reading ``_version`` raises) and no view tracking. ``_version``, ``_is_view`` and
# ``_base`` are internals, read here only to look.
source = torch.ones(4, device=device)
with torch.no_grad():
    a = source * 2
    a.add_(1)  # an in-place write: bumps a's version
    view_a = a[:2]
with torch.inference_mode():
    b = source * 2
    b.add_(1)
    view_b = b[:2]
try:
    b._version
except RuntimeError as err:
    version_error = str(err)
print(f"no_grad:        inference tensor {a.is_inference()}, view tracked {view_a._is_view()}")
print(f"{'':16}version {a._version} after one in-place write")
print(f"inference_mode: inference tensor {b.is_inference()}, view tracked {view_b._is_view()}")
print(f"{'':16}reading the version raises RuntimeError: {version_error}")

# sphinx_gallery_start_ignore
assert a._version == 1 and view_a._is_view() and view_a._base is a and not a.is_inference()
assert "do not track version counter" in version_error
assert b.is_inference() and view_b.is_inference() and not view_b._is_view()
# sphinx_gallery_end_ignore

# %%
# What each costs
# ---------------
# The three forwards below run the same model in evaluation mode, so the only difference
# is autograd's work. Recording costs a fixed amount per operation (a node, its edges,
# references to its saved tensors), paid on the calling thread, while the arithmetic grows
# with the batch; so the gain of ``no_grad`` should be clearest at batch 1. At a large
# batch the kept activations cannot be reused for the next layer's output, which
# lands in memory colder in the cache, a cost that grows with the batch. ``inference_mode`` skips a little more bookkeeping per tensor,
# which can drown in the noise.
#
# The comparisons run at one CPU thread, which keeps the intra-op pool out of the
# differences (how they are timed: :doc:`/explanations/timing`). Both contexts also work
# as decorators, the usual form for a prediction function. Predict first: at batch 1, how
# much faster is ``no_grad`` than recording a graph? At a large batch?
from effpt.bench import compare
from effpt.records import speedup


def forward_with_graph(batch: torch.Tensor) -> torch.Tensor:
    return model(batch)


@torch.no_grad()
def forward_no_grad(batch: torch.Tensor) -> torch.Tensor:
    return model(batch)


@torch.inference_mode()
def forward_inference(batch: torch.Tensor) -> torch.Tensor:
    return model(batch)


threads = torch.get_num_threads()
torch.set_num_threads(1)  # restored after the expectations below
gains = {}
for b in (1, large):
    batch = torch.randn(b, width, device=device)  # (batch, features)
    runs = {
        "graph recorded": lambda x=batch: forward_with_graph(x),
        "no_grad": lambda x=batch: forward_no_grad(x),
        "inference_mode": lambda x=batch: forward_inference(x),
    }
    timed = compare(f"forward, batch {b}", runs, device=device, budget_s=0.2)
    gains[b] = (speedup(timed[0], timed[1]), speedup(timed[1], timed[2]))
    print()

# %%
# The three expectations, each with this machine's verdict (the machine's name gives the
# thread count they ran at):
expect(
    "no_grad makes a batch-1 forward faster than recording the graph",
    gains[1][0],
    above=1.0,
    device=device,
)
expect(
    f"no_grad's gain over recording is larger at batch 1 than at batch {large}",
    gains[1][0] / gains[large][0],
    above=1.0,
    device=device,
)
expect(
    "inference_mode makes a batch-1 forward faster than no_grad",
    gains[1][1],
    above=1.0,
    device=device,
)
torch.set_num_threads(threads)  # back to the machine's setting

# %%
# A tensor made under ``inference_mode`` cannot re-enter autograd
# ---------------------------------------------------------------
# :doc:`/auto_examples/basics/plot_autograd` shows the first error below; here is why, and
# the second. Without a version counter, autograd cannot check later that a saved tensor was
# left alone, so it refuses to save an inference tensor for backward; and since an in-place
# write outside inference mode would have to bump a counter that does not exist, that is
# refused too. Reading one is fine, and so is an operation of a graph that saves nothing
# (an addition): the error comes when autograd would save it. Below, features computed
# under ``inference_mode`` meet a new head that is being trained.
features = forward_inference(x8)  # an inference tensor, (8, 10)
head = nn.Linear(10, 1).to(device)
errors = {}
try:
    head(features).sum().backward()  # the linear layer saves its input for backward
except RuntimeError as err:
    errors["used in a graph"] = str(err)
try:
    features.add_(1)  # an in-place write outside inference_mode
except RuntimeError as err:
    errors["written in place"] = str(err)
for what, message in errors.items():
    print(f"{what}: RuntimeError: {message.split('.')[0]}.")  # the first sentence
doubled = features * 2  # reading is allowed: the result is an ordinary tensor
shifted = features + head.bias  # recorded, but an addition saves neither input
print(f"features * 2 is an inference tensor: {doubled.is_inference()}")
print(f"features + head.bias requires grad: {shifted.requires_grad}")

# sphinx_gallery_start_ignore
assert "Inference tensors cannot be saved for backward" in errors["used in a graph"]
assert "Inplace update to inference tensor outside InferenceMode" in errors["written in place"]
assert not doubled.is_inference() and shifted.requires_grad
# sphinx_gallery_end_ignore

# %%
# The way out is a copy made outside inference mode: ``.clone()`` allocates an ordinary
# tensor with its own version counter, which autograd can save and which may be written in
# place. Where results must often go back into training, ``no_grad`` avoids the copy.
ordinary = features.clone()
head(ordinary).sum().backward()
ordinary.add_(1)
print(f"clone is an inference tensor: {ordinary.is_inference()}")
print(f"the head got a gradient through it: {head.weight.grad is not None}")

# sphinx_gallery_start_ignore
assert not ordinary.is_inference() and head.weight.grad is not None
# sphinx_gallery_end_ignore

# %%
# Batch size: latency against throughput
# ---------------------------------------
# A server chooses how many requests to answer in one forward. A larger batch spreads the
# fixed cost of each call (Python, dispatch, and on a GPU one kernel launch per operation)
# over more samples, so samples per second should rise with the batch until the arithmetic
# itself fills the machine; from there on, a larger batch only makes each caller wait
# longer.
#
# The sweep runs ``forward_inference`` on batches from 1 to ``largest``, on a CPU at one
# thread and at all its threads (the intra-op pool splits a matrix product only above a
# size that differs per machine: :doc:`/explanations/timing`). Each call is timed on its
# own (``number=1``), the device synchronized after it: the time one caller waits.
from effpt.bench import time_callable
from effpt.records import format_seconds

inputs = torch.randn(largest, width, device=device)  # (largest, features)
batches = sorted({4**k for k in range(8) if 4**k <= largest} | {largest // 2})  # 1, 4, ..., largest
thread_counts = sorted({1, threads}) if device.type == "cpu" else [threads]
sweep = {}
for n in thread_counts:
    torch.set_num_threads(n)
    sweep[n] = [
        time_callable(
            lambda b=b: forward_inference(inputs[:b]), device=device, number=1, budget_s=0.1
        )
        for b in batches
    ]
torch.set_num_threads(threads)  # restore the machine's setting
for n, timings in sweep.items():
    rate = [b / t.median for b, t in zip(batches, timings, strict=True)]  # samples per second
    knee = next(b for b, r in zip(batches, rate, strict=True) if r >= 0.8 * max(rate))
    on = f"{n} thread{'s' if n > 1 else ''}" if device.type == "cpu" else device.type
    print(
        f"{on}: batch 1 takes {format_seconds(timings[0].median)}, "
        f"batch {largest} {format_seconds(timings[-1].median)}; samples per second first "
        f"reach 80 % of their best ({max(rate):,.0f}) at batch {knee}"
    )

# %%
# The left panel is the time one batch takes (what a caller waits), its bars spanning the
# quartiles of the repeats; the right one is the samples per second it amounts to. A line
# that rises in proportion to the batch on the left is a flat line on the right.
import matplotlib.pyplot as plt

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
for n, timings in sweep.items():
    label = f"{n} thread{'s' if n > 1 else ''}" if device.type == "cpu" else device.type
    median = [t.median for t in timings]
    left.errorbar(
        batches,
        [m * 1e3 for m in median],
        label=label,
        marker="o",
        ms=3,
        yerr=[
            [(m - t.q1) * 1e3 for m, t in zip(median, timings, strict=True)],
            [(t.q3 - m) * 1e3 for m, t in zip(median, timings, strict=True)],
        ],
    )
    right.plot(
        batches,
        [b / m for b, m in zip(batches, median, strict=True)],
        marker="o",
        ms=3,
        label=label,
    )
left.set(xscale="log", yscale="log", xlabel="batch size", ylabel="ms per batch", title="Latency")
right.set(
    xscale="log", yscale="log", xlabel="batch size", ylabel="samples per second", title="Throughput"
)
for ax in (left, right):
    ax.set_xticks(batches[::2], [str(b) for b in batches[::2]])  # 1, 16, 256, ...
    ax.tick_params(axis="x", which="minor", bottom=False)
right.legend()
fig.suptitle(f"inference_mode forward of the model (width {width}) on {device.type}", fontsize=10)
plt.show()

# %%
# Two expectations test that story at each thread count: that batching pays, and that
# samples per second have stopped growing by the last doubling. The first can fail where
# the fixed cost per call is small against one sample's arithmetic; the second where the
# largest batch does not yet fill the device (a GPU with a small model). The batch printed
# above, where 80 % of the best rate is first reached, is a rough reading of where this
# machine's curve flattens; noisy timings move it from run to run.


def rate_gain(timings: list, i: int, j: int) -> tuple[float, float, float]:
    """How many times more samples per second batch ``batches[j]`` gives than ``batches[i]``."""
    longer = speedup(timings[j], timings[i])  # time of batch j over time of batch i
    k = batches[j] / batches[i]
    return k / longer.value, k / longer.high, k / longer.low


for n, timings in sweep.items():
    torch.set_num_threads(n)  # the verdict names the thread count it was measured at
    on = f"{n} thread{'s' * (n > 1)}" if device.type == "cpu" else device.type  # one per count
    expect(
        f"batch {largest} gives over 4× the samples per second of batch 1, {on}",
        rate_gain(timings, 0, -1),
        above=4.0,
        device=device,
    )
    expect(
        f"samples per second have saturated: doubling the batch from {largest // 2} to "
        f"{largest} adds under 20 %, {on}",
        rate_gain(timings, -2, -1),
        below=1.2,
        device=device,
    )
torch.set_num_threads(threads)

# %%
# Summary
# -------
# - ``model.eval()`` changes what dropout and batch norm compute; it does not stop autograd.
#   ``no_grad`` stops autograd; it does not change the layers. Inference wants ``eval()``
#   and one of the two contexts.
#
# - Under ``no_grad`` no graph is recorded, outputs have no ``grad_fn``, and nothing is
#   saved for backward, so activations are freed as soon as the next layer has read them.
#
# - ``inference_mode`` also skips version counters and view tracking. Its tensors cannot be
#   saved for backward nor written in place outside it; ``.clone()`` makes an ordinary copy.
#   Use ``no_grad`` where results go back into training.
#
# - What each saves in time depends on the batch, the thread count and the device: the
#   verdicts above say what held here. A larger batch trades the time each caller waits
#   for samples per second; where that stops paying depends on the device, and the
#   figure shows it for this one.
#
# - PyTorch describes these switches in the "Locally disabling gradient computation"
#   section of its
#   `Autograd mechanics <https://docs.pytorch.org/docs/stable/notes/autograd.html>`__ notes
#   and in its note
#   `Inference Mode <https://docs.pytorch.org/cppdocs/notes/inference_mode.html>`__; this
#   page checks what it uses from them.
