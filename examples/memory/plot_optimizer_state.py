"""
Optimizers: their state, their speed, their parameter groups
============================================================

.. effpt-before-you-start::
   :learn: - Measure what Adam keeps per parameter, in bytes, and time the for-loop,
             ``foreach`` and ``fused`` implementations of its step.
           - Keep weight decay off norms and biases with parameter groups.
           - Step inside ``backward`` with ``register_post_accumulate_grad_hook`` and
             count the gradient bytes it keeps from being alive at once.
           - Create the optimizer after ``load_state_dict(assign=True)``, and see what
             happens when it is created before.
   :read-first: :doc:`plot_account_for_memory`, which puts the optimizer's state among a
                training step's other memory.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU); the allocator's peak memory is
           read on CUDA only, and the page counts gradient bytes on every device.

The optimizer is often the largest thing in memory that nobody wrote down: Adam keeps
two tensors the size of the model. It is also a loop over every parameter, and how that
loop is run changes its speed. This page measures Adam's state, times three ways of
running its step, sets weight decay per parameter group, steps each parameter as soon
as its gradient is ready, and shows why the optimizer must be created after the
parameters it will update exist.
"""

# %%
# Adam keeps two tensors per parameter
# ------------------------------------
# :class:`torch.optim.Adam` keeps a running mean of the gradient (``exp_avg``) and of its
# square (``exp_avg_sq``) for every parameter, created at the first step, plus a
# one-element ``step`` counter. The cell sums their bytes after one step.
import torch
from torch import nn

from effpt.device import describe, pick_device

device = pick_device()
print(describe(device))
torch.manual_seed(0)
width = 1024 if device.type == "cuda" else 256


def make_model(on: torch.device | str = device) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(width, 4 * width, device=on),
        nn.GELU(),
        nn.Linear(4 * width, width, device=on),
        nn.LayerNorm(width, device=on),
    )


def nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


model = make_model()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
model(torch.randn(8, width, device=device)).square().mean().backward()
opt.step()
param_bytes = nbytes(model.parameters())
state = [opt.state[p] for p in model.parameters()]
moments = nbytes(s[k] for s in state for k in ("exp_avg", "exp_avg_sq"))
counters = nbytes(s["step"] for s in state)
print(f"parameters:           {param_bytes:>10,} bytes")
print(f"exp_avg + exp_avg_sq: {moments:>10,} bytes ({moments / param_bytes:.0f}× the parameters)")
print(f"step counters:        {counters:>10,} bytes, one per parameter tensor")

# sphinx_gallery_start_ignore
assert moments == 2 * param_bytes
assert all(set(s) == {"step", "exp_avg", "exp_avg_sq"} for s in state)
# sphinx_gallery_end_ignore

# %%
# With the gradients, a float32 model trained with Adam holds four copies of its
# parameters' size before any activation is saved: 16 bytes per parameter.

# %%
# Three ways to run the same step
# -------------------------------
# The for-loop implementation updates one parameter after another, a few small kernels
# each. ``foreach=True`` groups the tensors and runs each operation of the update over
# all of them at once; ``fused=True`` runs the whole update in one kernel per group.
# Fused Adam exists for CUDA, and in recent releases for the CPU and MPS; the cell asks
# this build. Many small parameters are where the grouping should count.
#
# Before reading on: which of the three is fastest on your machine, and by how much?
from effpt.bench import compare
from effpt.expect import expect
from effpt.records import speedup

layers = [nn.Linear(64, 64, device=device) for _ in range(32)]  # 64 small tensors
params = [p for layer in layers for p in layer.parameters()]
for p in params:
    p.grad = torch.randn_like(p)


def stepper(**how):
    copies = [p.detach().clone().requires_grad_() for p in params]
    for c, p in zip(copies, params, strict=True):
        c.grad = p.grad.clone()
    optimizer = torch.optim.Adam(copies, lr=1e-3, **how)
    optimizer.step()  # creates the state; an unsupported implementation raises here
    return optimizer.step


variants = {"for-loop": stepper(foreach=False), "foreach": stepper(foreach=True)}
try:
    variants["fused"] = stepper(fused=True)
except (RuntimeError, ValueError) as exc:
    print(f"fused Adam is not available here ({torch.__version__}, {device.type}): {exc}")
timed = compare(f"one Adam step over {len(params)} tensors", variants, device=device, budget_s=0.3)

# %%
# The expectations compare each grouped implementation with the for-loop.
_ = expect(
    f"foreach Adam steps {len(params)} small tensors faster than the for-loop",
    speedup(timed[0], timed[1]),
    above=1.0,
    device=device,
)
if len(timed) == 3:
    _ = expect(
        f"fused Adam steps {len(params)} small tensors faster than the for-loop",
        speedup(timed[0], timed[2]),
        above=1.0,
        device=device,
    )

# %%
# Without either flag PyTorch chooses for you (``foreach`` for tensors on CUDA, as its
# documentation says); ``fused`` has to be asked for.

# %%
# No weight decay on norms and biases
# -----------------------------------
# Weight decay pulls every decayed parameter toward zero. For the weight of a linear
# layer that is the regulariser you wanted; for a bias or a norm's scale it only drags
# a shift or a gain, which have nothing to overfit, toward zero. A list of dicts gives
# each group its own settings; here the decided rule is "decay the weights of linear
# layers, nothing else", chosen by module type rather than by name.
model = make_model()
decay, no_decay = [], []
for module in model.modules():
    for name, p in module.named_parameters(recurse=False):
        (decay if isinstance(module, nn.Linear) and name == "weight" else no_decay).append(p)
opt = torch.optim.AdamW(
    [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-2
)
names = {p: n for n, p in model.named_parameters()}
print("decayed:    ", [names[p] for p in opt.param_groups[0]["params"]])
print("not decayed:", [names[p] for p in opt.param_groups[1]["params"]])

# %%
# A step with zero gradients isolates the decay: AdamW's update is then decay alone.
before = {n: p.detach().clone() for n, p in model.named_parameters()}
for p in model.parameters():
    p.grad = torch.zeros_like(p)
opt.step()
for n, p in model.named_parameters():
    print(f"{n:>9}: changed {not torch.equal(p, before[n])}")

# sphinx_gallery_start_ignore
assert [names[p] for p in decay] == ["0.weight", "2.weight"]
assert {n for n, p in model.named_parameters() if not torch.equal(p, before[n])} == {
    "0.weight",
    "2.weight",
}
# sphinx_gallery_end_ignore

# %%
# Step inside ``backward``
# ------------------------
# An ordinary step waits until ``backward`` has produced every gradient, so all of them
# are alive at once. :meth:`torch.Tensor.register_post_accumulate_grad_hook` calls a
# function as soon as a parameter's gradient is complete; stepping that parameter there
# and dropping its gradient means at most a few gradients exist at any moment. Each
# parameter gets its own optimizer, and the loop no longer calls ``step``.
#
# Another hook, registered first, records the gradient bytes alive each time a gradient
# is complete, on every device. Before you look: how many times smaller will the peak be?


def grad_bytes_alive(model: nn.Module) -> int:
    return nbytes(p.grad for p in model.parameters() if p.grad is not None)


def train(in_backward: bool, steps: int = 3) -> tuple[nn.Module, list[int]]:
    torch.manual_seed(0)
    model, alive = make_model(), []
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(lambda _: alive.append(grad_bytes_alive(model)))
    if in_backward:
        per_param = {p: torch.optim.Adam([p], lr=1e-3, foreach=False) for p in model.parameters()}

        def step_now(p: torch.Tensor) -> None:
            per_param[p].step()
            per_param[p].zero_grad(set_to_none=True)

        for p in model.parameters():
            p.register_post_accumulate_grad_hook(step_now)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    data = torch.randn(steps, 32, width, device=device)
    for x in data:  # (32, width) per step
        alive.append(0)  # marks the start of a step
        model(x).square().mean().backward()
        if not in_backward:
            alive.append(grad_bytes_alive(model))
            opt.step()
            opt.zero_grad(set_to_none=True)
    return model, alive


usual, alive_usual = train(in_backward=False)
hooked, alive_hooked = train(in_backward=True)
largest = max(p.numel() * p.element_size() for p in usual.parameters())
print(f"gradient bytes alive at most, usual loop:    {max(alive_usual):>10,}")
print(f"gradient bytes alive at most, step in hooks: {max(alive_hooked):>10,}")
print(f"(all gradients {param_bytes:,} bytes; the largest one {largest:,})")
same = all(
    torch.allclose(a, b) for a, b in zip(usual.parameters(), hooked.parameters(), strict=True)
)
print(f"both loops end with the same weights: {same}")

# sphinx_gallery_start_ignore
assert max(alive_usual) == param_bytes
assert max(alive_hooked) == largest
assert same
# sphinx_gallery_end_ignore

# %%
# The usual loop peaks at every gradient; the hooked loop at the largest single one.
# On CUDA the allocator's peak also counts activations and workspace, so the saving is
# a smaller share of it: an expectation, read on CUDA only.
if device.type == "cuda":
    peaks = {}
    for in_backward in (False, True):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        train(in_backward)
        peaks[in_backward] = torch.cuda.max_memory_allocated()
    print(f"allocator peak: usual {peaks[False]:,} bytes, in hooks {peaks[True]:,} bytes")
    _ = expect(
        "stepping in backward lowers the allocator's peak of a training step",
        peaks[False] / peaks[True],
        above=1.0,
        device=device,
    )
else:
    print(f"on this {device.type} build: the allocator's peak needs CUDA; counted bytes above")

# %%
# The cost: gradient clipping by the global norm and accumulation over several batches
# need every gradient at once, so they do not combine with stepping in ``backward``.

# %%
# Create the optimizer after ``load_state_dict(assign=True)``
# -----------------------------------------------------------
# A large model is often built on the ``meta`` device, without memory, and then given
# its weights with ``load_state_dict(..., assign=True)``, which puts the loaded tensors
# in the module instead of copying into the existing ones. The optimizer keeps
# references to the tensors it was given. Created before the assignment, it holds the
# old ``meta`` parameters, and its step updates those, not the model.
checkpoint = make_model().state_dict()  # stands in for a file on disk


def load_and_train(create_optimizer_first: bool) -> tuple[bool, str]:
    model = make_model("meta")  # shapes only, no memory
    if create_optimizer_first:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loaded = {k: v.clone() for k, v in checkpoint.items()}  # as torch.load would return
    model.load_state_dict(loaded, assign=True)  # the model now holds these very tensors
    if not create_optimizer_first:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    held = opt.param_groups[0]["params"][0]
    model(torch.randn(8, width, device=device)).square().mean().backward()
    opt.step()
    moved = not torch.equal(model[0].weight, checkpoint["0.weight"])
    return moved, held.device.type


for first in (True, False):
    moved, held = load_and_train(first)
    when = "before" if first else "after "
    print(f"optimizer created {when} the load: holds {held} tensors, weights changed: {moved}")

# sphinx_gallery_start_ignore
assert load_and_train(True) == (False, "meta")
assert load_and_train(False) == (True, device.type)
# sphinx_gallery_end_ignore

# %%
# Nothing fails: the ``meta`` tensors the optimizer holds are no longer in the model and
# never receive a gradient, so its step skips them; the model keeps its loaded weights,
# and the loss simply does not move. Without ``assign=True`` the load
# copies into the existing tensors and the order would not matter; it is the
# assignment, needed to leave the ``meta`` device, that replaces them.

# %%
# What the page measured, in one figure
# -------------------------------------
# Left: the time of one step per implementation, its median with the quartiles.
# Right: the gradient bytes alive as ``backward`` completes each gradient, over three
# steps; each step starts at zero.
import matplotlib.pyplot as plt

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
for i, rec in enumerate(timed):
    low, high = (rec.median_s - rec.q1_s) * 1e6, (rec.q3_s - rec.median_s) * 1e6
    left.errorbar(i, rec.median_s * 1e6, yerr=[[low], [high]], fmt="o", color=f"C{i}", ms=8)
left.set(
    xticks=range(len(timed)),
    xticklabels=[r.variant for r in timed],
    xlim=(-0.5, len(timed) - 0.5),
    yscale="log",
    ylabel="µs per step",
    title=f"Adam step, {len(params)} tensors ({device.type})",
)
MiB = 2**20
right.step(
    range(len(alive_usual)), [b / MiB for b in alive_usual], where="post", label="usual loop"
)
right.step(
    range(len(alive_hooked)), [b / MiB for b in alive_hooked], where="post", label="step in hooks"
)
right.set(xlabel="gradient completed", ylabel="MiB of gradients alive", title="During backward")
right.legend()
plt.show()

# %%
# Summary
# -------
# - Adam keeps ``exp_avg`` and ``exp_avg_sq``, twice the parameters' bytes; with the
#   gradients a float32 model needs 16 bytes per parameter before activations.
#
# - ``foreach`` and ``fused`` run the same update over many tensors at once; the
#   verdicts above say what that bought on this machine. Ask for ``fused`` explicitly.
#
# - Parameter groups give biases and norms ``weight_decay=0.0``; choose them by module
#   type and check which parameters landed in which group.
#
# - A post-accumulate-grad hook can step each parameter during ``backward``, so at most
#   the largest gradient is alive, at the price of global clipping and accumulation.
#
# - Create the optimizer after ``load_state_dict(assign=True)``: before, it holds the
#   replaced tensors and trains nothing, without an error.
#
# - Related: :doc:`plot_account_for_memory` for the rest of a step's memory,
#   :doc:`/auto_examples/training/plot_checkpoint_files` for the ``meta`` device and
#   loading, and PyTorch's tutorial on
#   `optimizer step in backward <https://docs.pytorch.org/tutorials/intermediate/optimizer_step_in_backward_tutorial.html>`__.
