"""
Find where a NaN starts
=======================

.. effpt-before-you-start::
   :learn: - Name the first module whose output is not finite, with forward hooks.
           - Find a NaN that only the backward pass makes, with anomaly mode, and
             measure what anomaly mode costs.
           - Stop a step on non-finite gradients with
             ``clip_grad_norm_(..., error_if_nonfinite=True)``.
           - Tell the steps GradScaler skips on purpose from a run that diverged, by
             its scale history.
   :read-first: :doc:`/auto_examples/numerics/plot_floating_point_formats` for the
                range of float16; :doc:`/auto_examples/amp/plot_why_scale_gradients`
                for what GradScaler does.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU); its float16 parts run on every
           device, the CPU included.

A loss that prints ``nan`` tells you that something went wrong, not where. Once one
value is NaN, every sum it enters is NaN too, so by the time the loss shows it, the
whole network may be poisoned. This page makes a NaN appear three ways (the log of
zero, a float16 overflow, one bad sample in the data) and traces each back to the
module, the operation or the sample that made it; then it separates GradScaler's
harmless skipped steps from a real divergence.
"""

# %%
# A model and a hook that names the first bad module
# --------------------------------------------------
# A forward hook runs after a module's ``forward`` and sees its output. Registered on
# every submodule, it fires in the order the modules finish, so the first name it
# records is the first module whose output contained a NaN or an infinity. The hook
# returns ``None``, so it changes nothing; keep the handles and remove them when done.
import torch
from torch import nn

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))


class LogFeatures(nn.Module):
    """log(relu(x)): a feature transform that forgets that relu can return 0."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(torch.relu(x))


def make_model() -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(8, 16), LogFeatures(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)
    ).to(device)


def watch_for_nonfinite(model: nn.Module) -> tuple[list[str], list]:
    bad: list[str] = []

    def hook(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        if not torch.isfinite(output).all():
            bad.append(f"{module_names[module]} ({type(module).__name__})")

    module_names = {m: name for name, m in model.named_modules() if name}
    handles = [m.register_forward_hook(hook) for m in module_names]
    return bad, handles


model = make_model()
x = torch.randn(32, 8, device=device)  # (batch, features)
bad, handles = watch_for_nonfinite(model)
loss = model(x).pow(2).mean()
print(f"loss: {loss.item()}")
print(f"modules with a non-finite output, in the order they ran: {bad}")
for h in handles:
    h.remove()

# sphinx_gallery_start_ignore
assert not torch.isfinite(loss)
assert bad[0] == "1 (LogFeatures)", bad
# sphinx_gallery_end_ignore

# %%
# The first entry is the culprit; the later ones only inherited its NaN. Here
# ``LogFeatures`` returned ``-inf`` wherever ``relu`` gave exactly 0, and the next
# ``Linear`` turned ``-inf`` times weights of both signs into ``-inf + inf``, which is
# NaN. Checking every output costs a reduction per module per step, so attach the hooks
# when a run has gone wrong (or every few hundred steps), not in every step of a healthy
# run.
#
# A float16 overflow
# ------------------
# float16 holds nothing above 65504 (see
# :doc:`/auto_examples/numerics/plot_floating_point_formats`). Under
# :func:`torch.autocast` with float16 a matrix product runs in float16, so inputs that
# are large but harmless in float32 overflow to ``inf``. The same hook names the module.
big = torch.full((4, 8), 300.0, device=device)  # large but ordinary inputs
model = make_model()
with torch.no_grad():
    model[0].weight.fill_(30.0)  # a layer whose weights have grown
    model[1] = nn.Identity()  # no log this time
bad, handles = watch_for_nonfinite(model)
with torch.autocast(device.type, dtype=torch.float16):
    out = model(big)
for h in handles:
    h.remove()
with torch.no_grad():
    in_float32 = model[0](big).max().item()
print(f"first layer in float32: max {in_float32:.0f}; under float16 autocast: {bad}")

# sphinx_gallery_start_ignore
assert in_float32 > 65504 and bad and bad[0] == "0 (Linear)", (in_float32, bad)
# sphinx_gallery_end_ignore

# %%
# A bad sample in the data
# ------------------------
# Sometimes no module is to blame: the NaN came in with the batch. One corrupt record
# (a division by zero in preprocessing, a missing value read as NaN) is enough. A
# forward *pre*-hook on the model sees its inputs before any layer runs; checking each
# row of the batch names the sample, and the index maps back to the file.
data = torch.randn(64, 8)  # (samples, features)
data[37, 2] = float("nan")  # one damaged record
model = make_model()
model[1] = nn.Identity()


def check_inputs(module: nn.Module, inputs: tuple) -> None:
    (batch,) = inputs
    rows = (~torch.isfinite(batch).all(dim=1)).nonzero().flatten()  # (bad rows,)
    if len(rows):
        msg = f"non-finite input in rows {rows.tolist()} of the batch"
        raise ValueError(msg)


handle = model.register_forward_pre_hook(check_inputs)
batch_size = 16
try:
    for start in range(0, len(data), batch_size):
        model(data[start : start + batch_size].to(device))
except ValueError as exc:
    print(f"batch starting at sample {start}: {exc}")
    found = start + int(str(exc).split("[")[1].split("]")[0].split(",")[0])
print(f"sample index in the data set: {found}")
handle.remove()

# sphinx_gallery_start_ignore
assert found == 37
# sphinx_gallery_end_ignore


# %%
# A NaN that only the backward pass makes
# ---------------------------------------
# A common "safe" log writes ``torch.where(x > 0, torch.log(x), 0)``, here on word
# counts, many of them 0, times a learned weight per feature. Its forward is finite
# everywhere, so forward hooks see nothing, yet its gradient is NaN: ``where`` sends a
# zero gradient to the branch it did not pick, the log's backward divides that zero by
# its input, which is 0, and zero divided by zero is NaN.
def safe_log_model(counts: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    scaled = counts * w  # (batch, features), 0 wherever a count is 0
    return torch.where(scaled > 0, torch.log(scaled), 0.0).sum()


counts = torch.poisson(torch.ones(32, 8)).to(device)  # (batch, features), about a third 0
w = (torch.rand(8) + 0.5).to(device).requires_grad_()  # (features,)
loss = safe_log_model(counts, w)
loss.backward()
print(
    f"loss {loss.item():.3f} is finite; NaN in w.grad: {w.grad.isnan().sum().item()} of {w.numel()}"
)

# sphinx_gallery_start_ignore
assert torch.isfinite(loss) and w.grad.isnan().any()
# sphinx_gallery_end_ignore

# %%
# Anomaly mode finds it
# ---------------------
# Under :class:`torch.autograd.detect_anomaly` with ``check_nan=True``, autograd checks
# the output of every backward function and raises at the first that returns a NaN. In
# the forward pass it records, for every operation, the stack where it was created, and
# when the backward fails it warns with that stack. Both are printed below as they came:
# the error names the backward function, the warning's last lines name the forward line.
import warnings

w.grad = None
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        with torch.autograd.detect_anomaly(check_nan=True):
            safe_log_model(counts, w).backward()
    except RuntimeError as exc:
        anomaly_error = exc
print(f"RuntimeError: {anomaly_error}\n")
for warning in caught:
    lines = str(warning.message).strip().splitlines()
    if "Error detected" in str(warning.message):  # the other warning says the mode is on
        print("\n".join([*lines[:1], "    ...", *lines[-3:]]))

# sphinx_gallery_start_ignore
assert "returned nan values" in str(anomaly_error), anomaly_error
assert any("torch.log(scaled)" in str(wr.message) for wr in caught), [
    str(wr.message) for wr in caught
]
# sphinx_gallery_end_ignore

# %%
# The error names ``LogBackward0``, the log's backward; the stack names the forward
# line with ``torch.log(scaled)``. The fix is to keep the log's input away from 0 in
# both branches, for example ``torch.log(torch.where(scaled > 0, scaled, 1.0))``, whose
# gradient is finite.
#
# What anomaly mode costs
# -----------------------
# Recording a stack for every operation and checking every gradient is not free. Before
# you read the numbers: how much slower do you expect a training step of this small
# network to run under anomaly mode on your machine, and would the ratio grow or shrink
# for a large network on a GPU? The cell times a step both ways, taking turns.
from effpt.bench import compare
from effpt.expect import expect
from effpt.records import speedup

model = make_model()
model[1] = nn.Identity()
batch = torch.randn(32, 8, device=device)  # (batch, features)


def step() -> None:
    model.zero_grad()
    model(batch).pow(2).mean().backward()


def step_with_anomaly() -> None:
    with torch.autograd.detect_anomaly(check_nan=True):
        step()


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "Anomaly Detection has been enabled", once per call
    timed = compare(
        "one training step",
        {"anomaly mode": step_with_anomaly, "plain": step},
        device=device,
        budget_s=0.3,
    )
_ = expect(
    "a small training step runs faster without anomaly mode than with it",
    speedup(timed[0], timed[1]),
    above=1.0,
    device=device,
)

# %%
# Recording a stack costs the same for an operation of any size, so it weighs most on
# small networks like this one, where each operation is cheap. The NaN check reads one
# yes-or-no back to the host after every backward function (autograd's engine calls
# ``.item()`` on it), which on a GPU also waits for the device each time. Either way, turn anomaly mode on
# to hunt a NaN, for a few steps, and off again.
#
# Refuse to clip a non-finite gradient
# ------------------------------------
# :func:`torch.nn.utils.clip_grad_norm_` computes the total norm of the gradients and
# scales them down to ``max_norm``. With a NaN among them the norm is NaN, and by
# default the scaling multiplies *every* gradient by NaN: one bad value spreads to all
# parameters at the next optimizer step. ``error_if_nonfinite=True`` raises instead.
model = make_model()  # with LogFeatures: its output and gradients hold NaN
model(x).pow(2).mean().backward()
total = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
finite_grads = sum(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
print(
    f"default: total norm {total.item()}, parameters with finite gradients after it: {finite_grads} of {len(list(model.parameters()))}"
)

model.zero_grad()
model(x).pow(2).mean().backward()
try:
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0, error_if_nonfinite=True)
except RuntimeError as exc:
    clip_error = exc
print(f"RuntimeError: {clip_error}")

# sphinx_gallery_start_ignore
assert total.isnan() and finite_grads == 0, (total, finite_grads)
assert "non-finite" in str(clip_error), clip_error
# sphinx_gallery_end_ignore

# %%
# Skipped steps or a divergence?
# ------------------------------
# With float16 and :class:`torch.amp.GradScaler`, non-finite gradients are normal now and
# then: the scaler multiplies the loss by a large factor, and when a scaled gradient
# overflows it skips the optimizer step and halves the factor (the mechanism is on
# :doc:`/auto_examples/amp/plot_why_scale_gradients`). Such a skip is no bug.
#
# A run that diverged looks different: its gradients overflow at every scale the scaler
# tries, so the scale halves step after step, and soon its *loss* itself is no longer
# finite, before any scaling. The cell trains the
# same network twice with a scaler, once with a sensible learning rate and once with
# one far too large, and records ``scaler.get_scale()`` after every step.
# ``torch.amp.GradScaler("cpu")`` exists in every release this site supports (torch
# 2.6 and later), so the scaler runs on the CPU too.
targets = x[:, :1].clone()  # (batch, 1)


def train_with_scaler(lr: float, steps: int = 40) -> tuple[list[float], list[float]]:
    torch.manual_seed(0)
    net = make_model()
    net[1] = nn.Identity()
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0**20, growth_interval=10)
    scales, losses = [], []
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast(device.type, dtype=torch.float16):
            loss = nn.functional.mse_loss(net(x), targets)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        losses.append(loss.item())
    return scales, losses


history = {"lr 0.05": train_with_scaler(0.05), "lr 50": train_with_scaler(50.0)}
for name, (scales, losses) in history.items():
    skipped = sum(b < a for a, b in zip([2.0**20, *scales[:-1]], scales, strict=True))
    first_bad = next((i for i, v in enumerate(losses) if not torch.isfinite(torch.tensor(v))), None)
    print(
        f"{name}: {skipped} of {len(scales)} steps skipped, final scale {scales[-1]:.3g}, "
        f"last loss {losses[-1]:.4g}, first non-finite loss at step {first_bad}"
    )

# sphinx_gallery_start_ignore
import itertools

good_scales, good_losses = history["lr 0.05"]
bad_scales, bad_losses = history["lr 50"]
assert all(torch.isfinite(torch.tensor(good_losses))), good_losses
assert good_losses[-1] < good_losses[0]
assert sum(b < a for a, b in itertools.pairwise(good_scales)) <= 10, good_scales
assert not torch.isfinite(torch.tensor(bad_losses[-1]))
assert bad_scales[-1] < good_scales[-1] * 2.0**-10, (bad_scales[-1], good_scales[-1])
# sphinx_gallery_end_ignore

# %%
# The scale history tells the two apart at a glance. The healthy run skips a few steps
# while its scale comes down from the too-high starting value, then holds it: it grows
# the scale every ``growth_interval`` steps and halves it again when that overflows.
# The divergent run's scale starts falling long before its loss turns non-finite (the
# step printed above), and falls without end: once the loss itself is ``inf`` or NaN, no scale can help, and the cure is in the learning
# rate, the data or the model.
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
for (name, (scales, _)), marker in zip(history.items(), "os", strict=True):
    ax.plot(range(1, len(scales) + 1), scales, marker, ms=4, label=name)
ax.set_yscale("log", base=2)
ax.set_xlabel("training step")
ax.set_ylabel("GradScaler scale after the step")
ax.set_title("Skipped steps settle; a divergence collapses the scale")
ax.legend()
plt.show()

# %%
# Summary
# -------
# - Forward hooks on every submodule name the first module whose output is not finite;
#   a forward pre-hook on the model names the bad sample in a batch.
#
# - A NaN born in the backward pass (``where`` around a log, a square root at 0) needs
#   ``torch.autograd.detect_anomaly(check_nan=True)``: it names the backward function
#   and the forward line. Its cost per step is measured above; use it to hunt, not to
#   train.
#
# - ``clip_grad_norm_(..., error_if_nonfinite=True)`` raises instead of spreading one
#   NaN to every gradient.
#
# - A GradScaler that skips a step now and then is working; a loss that is no longer
#   finite and a scale that keeps halving are a divergence.
#
# - Related: :doc:`/auto_examples/amp/plot_gradscaler_loop` for the float16 training
#   loop, :doc:`/auto_examples/numerics/plot_stable_softmax` for computing safely near
#   the edges of the float range.
