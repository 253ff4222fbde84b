"""
Learning-rate schedules, warm-up and the order of steps
=======================================================

.. effpt-before-you-start::
   :learn: - Build warm-up then cosine decay with ``SequentialLR``, and ``OneCycleLR``,
             and plot the learning rate each step gets.
           - See what goes wrong when a schedule counted in batches is stepped per
             epoch, and read the warning about the order of ``optimizer.step()`` and
             ``scheduler.step()``, which GradScaler can raise in correct code.
           - Resume a schedule from its ``state_dict`` so that it continues exactly.
           - Keep a compiled optimizer step from compiling again when the learning
             rate changes.
   :read-first: :doc:`/auto_examples/training/plot_checkpoint_and_resume` for saving a
                whole run; :doc:`/auto_examples/amp/plot_gradscaler_loop` for GradScaler.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU). The compiled step uses a backend
           that compiles nothing, so no C++ compiler is needed.

A learning-rate schedule fails quietly: a warm-up that never ends, a decay that restarts
after a resume, a first step whose rate is skipped. The loss just looks a little worse.
This page draws two common schedules step by step, then breaks them the ways real code
does, shows the warning PyTorch gives (and when it gives it for correct code), and
checks that a resumed schedule continues exactly where it stopped.
"""

# %%
# Warm-up, then cosine; and one cycle
# -----------------------------------
# :class:`~torch.optim.lr_scheduler.SequentialLR` runs one scheduler after another:
# here :class:`~torch.optim.lr_scheduler.LinearLR` raises the rate from a tenth of its
# peak over the first steps, then
# :class:`~torch.optim.lr_scheduler.CosineAnnealingLR` lowers it along half a cosine.
# :class:`~torch.optim.lr_scheduler.OneCycleLR` does both in one: up to ``max_lr`` and
# down far below the start. Both count *optimizer steps*, so the cell steps them once
# per batch and records ``scheduler.get_last_lr()`` before each step.
import torch
from torch import nn
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, OneCycleLR, SequentialLR

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

epochs, batches_per_epoch = 5, 20
total_steps = epochs * batches_per_epoch  # the schedule's unit is one batch
warmup = 10


def warmup_cosine(optimizer: torch.optim.Optimizer) -> SequentialLR:
    ramp = LinearLR(optimizer, start_factor=0.1, total_iters=warmup)
    decay = CosineAnnealingLR(optimizer, T_max=total_steps - warmup, eta_min=1e-4)
    return SequentialLR(optimizer, [ramp, decay], milestones=[warmup])


def lr_per_step(make_scheduler, steps: int = total_steps) -> list[float]:
    model = nn.Linear(4, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = make_scheduler(optimizer)
    rates = []
    for _ in range(steps):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()  # after the real forward and backward
        scheduler.step()
    return rates


curves = {
    "LinearLR, then CosineAnnealingLR": lr_per_step(warmup_cosine),
    "OneCycleLR": lr_per_step(lambda opt: OneCycleLR(opt, max_lr=0.1, total_steps=total_steps)),
}
for name, rates in curves.items():
    peak = max(range(len(rates)), key=rates.__getitem__)
    print(
        f"{name}: first {rates[0]:.4f}, peak {rates[peak]:.4f} at step {peak}, last {rates[-1]:.2e}"
    )

# sphinx_gallery_start_ignore
seq = curves["LinearLR, then CosineAnnealingLR"]
assert abs(seq[0] - 0.01) < 1e-9 and abs(max(seq) - 0.1) < 1e-9, seq[:12]
assert seq[-1] < 0.001
# sphinx_gallery_end_ignore

# %%
# The figure shows every step's rate. The warm-up keeps the first updates small while
# the optimizer's statistics (Adam's moment estimates, for example) are still poor;
# the long decay lets the weights settle.
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
for (name, rates), marker in zip(curves.items(), "o^", strict=True):
    ax.plot(range(len(rates)), rates, marker, ms=3, label=name)
ax.axvline(warmup, color="grey", lw=0.8, ls=":")
ax.set_xlabel("optimizer step (one per batch)")
ax.set_ylabel("learning rate")
ax.set_title(
    f"Two schedules over {total_steps} steps ({epochs} epochs of {batches_per_epoch} batches)"
)
ax.legend()
plt.show()

# %%
# Per batch or per epoch
# ----------------------
# A schedule's lengths (``total_iters``, ``T_max``, ``total_steps``) are counted in
# calls to ``scheduler.step()``. Built in batches but stepped once per epoch, the same
# schedule has barely begun when training ends. The opposite mistake,
# ``OneCycleLR`` built with ``total_steps=epochs`` and stepped per batch, runs past its
# end, and ``OneCycleLR`` raises rather than invent a rate.
model = nn.Linear(4, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = warmup_cosine(optimizer)
for _ in range(epochs):
    for _ in range(batches_per_epoch):
        optimizer.step()
    scheduler.step()  # once per epoch: 5 steps of a 100-step schedule
per_epoch_rate = scheduler.get_last_lr()[0]
print(
    f"stepped per epoch: rate after training {per_epoch_rate:.4f}, scheduler steps taken "
    f"{scheduler.last_epoch} of a warm-up of {warmup}"
)

optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = OneCycleLR(optimizer, max_lr=0.1, total_steps=epochs)  # counted in epochs
try:
    for _ in range(batches_per_epoch):
        optimizer.step()
        scheduler.step()  # but stepped per batch
except ValueError as exc:
    one_cycle_error = exc
print(f"ValueError: {one_cycle_error}")

# sphinx_gallery_start_ignore
assert per_epoch_rate < 0.1 and "total steps" in str(one_cycle_error), one_cycle_error
# sphinx_gallery_end_ignore

# %%
# The first mistake raises nothing: the printed rate is still in the warm-up after the
# whole run. Whichever unit you choose, build the schedule in the unit you step it in.
#
# The scheduler stepped before the optimizer
# ------------------------------------------
# Since PyTorch 1.1, ``scheduler.step()`` belongs *after* ``optimizer.step()``. Called
# first, the scheduler moves to the second rate before the optimizer has used the
# first, and PyTorch warns on the first such call. The cell makes the mistake and
# prints the warning as it came.
import warnings


def first_step_warnings(step_order) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step_order()
    return [str(w.message) for w in caught if "lr_scheduler.step()" in str(w.message)]


def wrong_order() -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = warmup_cosine(optimizer)
    scheduler.step()
    optimizer.step()


wrong = first_step_warnings(wrong_order)
print(f"UserWarning: {wrong[0]}")

# sphinx_gallery_start_ignore
assert len(wrong) == 1 and "before `optimizer.step()`" in wrong[0], wrong
# sphinx_gallery_end_ignore

# %%
# The same warning in correct code
# --------------------------------
# With float16 and :class:`torch.amp.GradScaler`, ``scaler.step(optimizer)`` skips the
# optimizer's step when the scaled gradients overflowed, which is likely on the very
# first step, since the scaler starts with a large scale and lowers it from there.
# The scheduler then sees a ``step()`` with no optimizer step before it and warns,
# though the order in the code is right. The cell runs one such step with a scale
# chosen to overflow.
x = torch.randn(16, 4, device=device)  # (batch, features)


def scaler_skips_first_step() -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = warmup_cosine(optimizer)
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0**40)
    with torch.autocast(device.type, dtype=torch.float16):
        loss = model(x).pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)  # skipped: the scaled gradients are inf
    scaler.update()
    scheduler.step()
    skipped.append(scaler.get_scale() < 2.0**40)  # the scale fell: the step was skipped
    print(f"scale before {2.0**40:.3g}, after {scaler.get_scale():.3g}; step skipped: {skipped[0]}")


skipped: list[bool] = []


amp = first_step_warnings(scaler_skips_first_step)
print(f"UserWarning: {amp[0]}")

# sphinx_gallery_start_ignore
assert skipped == [True] and len(amp) == 1 and "before `optimizer.step()`" in amp[0], amp
# sphinx_gallery_end_ignore

# %%
# Here the warning is harmless: the step was skipped on purpose, the schedule lost one
# rate, and the next steps run in the right order. Silence it with a filter on its
# message if it bothers you, not by moving ``scheduler.step()`` before the optimizer.
#
# A resumed schedule continues where it stopped
# ---------------------------------------------
# A scheduler keeps its own state: how many steps it took, and for ``SequentialLR``
# which of its schedulers is running. Resuming means saving the scheduler's
# ``state_dict`` with the optimizer's and loading both into freshly built objects. The
# cell stops a run after 30 of its 100 steps, saves both to a buffer as a checkpoint
# file would, resumes, and compares every rate with the uninterrupted run. A run that
# rebuilds the scheduler without loading its state starts its warm-up again.
import io

stop_at = 30


def build() -> tuple[torch.optim.Optimizer, SequentialLR]:
    optimizer = torch.optim.SGD(nn.Linear(4, 1).to(device).parameters(), lr=0.1)
    return optimizer, warmup_cosine(optimizer)


def run(optimizer, scheduler, steps: int) -> list[float]:
    rates = []
    for _ in range(steps):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    return rates


uninterrupted = run(*build(), total_steps)

optimizer, scheduler = build()
before = run(optimizer, scheduler, stop_at)
buffer = io.BytesIO()
torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, buffer)

optimizer, scheduler = build()  # a new process would start here
buffer.seek(0)
checkpoint = torch.load(buffer, weights_only=True)
optimizer.load_state_dict(checkpoint["optimizer"])
scheduler.load_state_dict(checkpoint["scheduler"])
resumed = before + run(optimizer, scheduler, total_steps - stop_at)
restarted = before + run(*build(), total_steps - stop_at)

print(
    f"rate at step {stop_at}: uninterrupted {uninterrupted[stop_at]:.5f}, "
    f"resumed {resumed[stop_at]:.5f}, scheduler not restored {restarted[stop_at]:.5f}"
)
print(f"resumed run equals the uninterrupted one at every step: {resumed == uninterrupted}")

# sphinx_gallery_start_ignore
assert resumed == uninterrupted
assert restarted != uninterrupted and abs(restarted[stop_at] - 0.01) < 1e-9
# sphinx_gallery_end_ignore


# %%
# Build the scheduler before loading, so that its constructor's first step is
# overwritten by the loaded state. A whole run (model, GradScaler, generators and the
# data's position as well) is saved and resumed bit for bit on
# :doc:`/auto_examples/training/plot_checkpoint_and_resume`.
#
# A compiled optimizer step and a changing rate
# ---------------------------------------------
# :func:`torch.compile` can compile ``optimizer.step()``. The compiled code is guarded
# by the values it assumed, and a learning rate stored as a Python float is such a
# value: when the scheduler changes it, the guard fails and the step is compiled again.
# Stored as a tensor, ``torch.tensor(0.1)``, the rate is an input of the graph, and the
# scheduler writes the new value into the same tensor.
#
# Before you look: how many times
# do you expect each version to compile over six steps of a warm-up? The cell counts
# with a backend that compiles nothing, so no C++ compiler is needed; Inductor, the
# default backend, would compile the same number of times, each taking far longer.
# Whether the learning rate's guard fails does not depend on the device, so this cell
# keeps its one parameter on the CPU on every machine.
class CountCompiles:
    """A torch.compile backend that counts the graphs it is given and runs them unchanged."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, graph_module, _example_inputs):  # inputs unused here
        self.graphs += 1
        return graph_module.forward


compiles = {}
for kind, lr in (("float", 0.1), ("tensor", torch.tensor(0.1))):
    torch._dynamo.reset()
    weight = torch.zeros(4, requires_grad=True)  # one parameter (features,), on the CPU
    optimizer = torch.optim.SGD([weight], lr=lr, foreach=False)
    scheduler = LinearLR(optimizer, start_factor=0.1, total_iters=6)
    counter = CountCompiles()
    compiled_step = torch.compile(optimizer.step, backend=counter)
    for _ in range(6):
        weight.grad = torch.ones_like(weight)
        compiled_step()
        scheduler.step()
    compiles[kind] = counter.graphs
    print(f"lr as a {kind}: compiled {compiles[kind]} time(s) over 6 steps")

# sphinx_gallery_start_ignore
assert compiles["tensor"] == 1 and compiles["float"] > 1, compiles
# sphinx_gallery_end_ignore

# %%
# The tensor compiles once. How often the float compiles again depends on the release:
# recent ones recompile once and then treat the changed float as a symbol ("automatic
# dynamic"), older ones may compile anew for every value until the recompile limit.
# The tensor needs neither. PyTorch's tutorial on compiling the optimizer together
# with an LR scheduler shows the same pattern for Adam on a GPU.

# %%
# Summary
# -------
# - Build a schedule in the unit you step it in; most schedules are meant per batch.
#   Stepped per epoch, a per-batch warm-up never ends, silently.
# - ``optimizer.step()``, then ``scheduler.step()``. With GradScaler, a skipped first
#   step triggers the same warning in correct code; it costs one rate of the schedule.
# - Save and load the scheduler's ``state_dict`` with the optimizer's; without it the
#   schedule restarts.
# - For a compiled optimizer step, give the learning rate as ``torch.tensor(lr)``.
