"""
Size a model before you build it
================================

.. effpt-before-you-start::
   :learn: - Build a model on the ``meta`` device to count its parameters without
             allocating them.
           - Run its forward under ``FakeTensorMode`` to get activation shapes, and count
             the bytes backward would keep, for a model too large for this machine.
           - Materialise a ``meta`` model with ``to_empty()`` or
             ``load_state_dict(assign=True)``.
           - Check the estimate against a model small enough to build, and read the
             verdict on what the allocator adds.
   :read-first: :doc:`plot_account_for_memory` for the categories of a training step's
                memory; :doc:`plot_optimizer_state` for the optimizer's share.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU); on the CPU it reads allocations
           from the profiler, on a GPU from the allocator.

An out-of-memory error after an hour of loading is an expensive way to learn a model's
size. PyTorch can run the model's construction and its forward on tensors that have a
shape, a dtype and a device but no memory. This page sizes a model of 26.6 billion parameters
without allocating it, materialises a small one from the same code, and
checks the estimate against what the small one really takes.
"""

# %%
# One model definition, any size
# ------------------------------
# A stack of residual MLP blocks between an embedding and an output layer stands in for a
# language model. The same function builds the large model and the small one.
import torch
from torch import nn

from effpt.device import describe, pick_device

device = pick_device()
print(describe(device))
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (batch, tokens, width)
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


def build(vocab: int, width: int, layers: int) -> nn.Sequential:
    blocks = [Block(width) for _ in range(layers)]
    return nn.Sequential(
        nn.Embedding(vocab, width), *blocks, nn.LayerNorm(width), nn.Linear(width, vocab)
    )


# %%
# Parameters on the ``meta`` device
# ---------------------------------
# Under ``with torch.device("meta")`` every tensor the constructors create is a ``meta``
# tensor: it has a shape and a dtype and no storage, so building costs no memory and
# almost no time. The count below is read from the shapes, and checked against the
# arithmetic of the layers.
big_config = {"vocab": 50_304, "width": 8192, "layers": 48}
with torch.device("meta"):
    big = build(**big_config)
count = sum(p.numel() for p in big.parameters())
V, D, L = big_config.values()
by_hand = V * D + L * (2 * D + (D * 4 * D + 4 * D) + (4 * D * D + D)) + 2 * D + (D * V + V)
print(f"parameters: {count:,} ({count / 1e9:.1f} billion); by hand: {by_hand:,}")
print(f"a parameter lives on: {next(big.parameters()).device}")

# sphinx_gallery_start_ignore
assert count == by_hand
assert all(p.is_meta for p in big.parameters())
# sphinx_gallery_end_ignore

# %%
# Trained in float32 with Adam, each parameter costs 16 bytes (weight, gradient and two
# moments, see :doc:`plot_optimizer_state`), before any activation. The memory of this
# machine, read from the OS or the GPU, for comparison:
import os

GiB = 2**30
if device.type == "cuda":
    have = torch.cuda.get_device_properties(device).total_memory
else:
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not every OS answers
        have = None
print(f"weights in float32:            {4 * count / GiB:>8,.0f} GiB")
print(f"weights, gradients and Adam:   {16 * count / GiB:>8,.0f} GiB")
print(f"memory of this {device.type}: " + (f"{have / GiB:>15,.0f} GiB" if have else "unknown"))

# %%
# Activations under ``FakeTensorMode``
# ------------------------------------
# Parameters are only part of the bill: backward needs tensors that the forward saves.
# Under :class:`~torch._subclasses.fake_tensor.FakeTensorMode` every tensor created is a
# fake one, which runs each operation for its shape, dtype and device without memory,
# so the forward runs as written. (It lives in ``torch._subclasses``: a private module,
# used by ``torch.compile``, whose interface may change between releases.) A
# :class:`torch.autograd.graph.saved_tensors_hooks` pack hook sees each tensor autograd
# saves; counting each storage once, and leaving out the parameters and the input
# (both there before the forward), gives the bytes of saved activations.
from torch._subclasses.fake_tensor import FakeTensorMode


def forward_and_saved(model: nn.Module, tokens: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Run the forward; return its output and the bytes of activations saved for backward."""
    before = {p.untyped_storage()._cdata for p in model.parameters()}
    before.add(tokens.untyped_storage()._cdata)  # the input, saved by the embedding
    saved = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage._cdata not in before:  # a view of a weight or the input costs nothing new
            saved[storage._cdata] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(tokens)
    return out, sum(saved.values())


batch, tokens_per_row = 8, 2048
with FakeTensorMode():
    fake_big = build(**big_config)
    tokens = torch.randint(0, V, (batch, tokens_per_row))  # (batch, tokens)
    logits, saved_big = forward_and_saved(fake_big, tokens)
print(f"logits: {tuple(logits.shape)}, {type(logits).__name__}")
print(f"activations saved for backward: {saved_big / GiB:,.0f} GiB for a batch of {batch}")

# sphinx_gallery_start_ignore
assert tuple(logits.shape) == (batch, tokens_per_row, V)
# sphinx_gallery_end_ignore

# %%
# Both numbers come from shapes alone; the page never held more than a few tensors' worth
# of real memory. Halving the batch halves the activations and leaves the parameters'
# share unchanged.

# %%
# From ``meta`` to real memory
# ----------------------------
# A ``meta`` model gets memory in one of two ways. :meth:`~torch.nn.Module.to_empty`
# allocates every parameter on a device, uninitialised; the weights then come from a
# checkpoint, copied in by ``load_state_dict``, or from each module's
# ``reset_parameters``. ``load_state_dict(..., assign=True)`` instead puts the
# checkpoint's own tensors into the module, allocating nothing more. A small model built
# for real stands in for the checkpoint.
small_config = {"vocab": 1000, "width": 128, "layers": 2}
reference = build(**small_config).to(device)
checkpoint = reference.state_dict()

with torch.device("meta"):
    first, second = build(**small_config), build(**small_config)
first.to_empty(device=device)  # real, uninitialised memory
first.load_state_dict(checkpoint)  # copied in
second.load_state_dict(checkpoint, assign=True)  # the checkpoint's tensors, adopted
tokens = torch.randint(0, small_config["vocab"], (4, 64), device=device)  # (batch, tokens)
with torch.no_grad():
    want = reference(tokens)
    for name, model in (("to_empty + load", first), ("assign=True", second)):
        same = torch.equal(model(tokens), want)
        print(f"{name:>15}: {next(model.parameters()).device}, same output {same}")
shares = second[0].weight.data_ptr() == checkpoint["0.weight"].data_ptr()
print(f"assign=True shares the checkpoint's memory: {shares}")

# sphinx_gallery_start_ignore
assert torch.equal(first(tokens), want) and torch.equal(second(tokens), want)
assert shares and first[0].weight.data_ptr() != checkpoint["0.weight"].data_ptr()
# sphinx_gallery_end_ignore

# %%
# The estimate, checked on a model that fits
# ------------------------------------------
# The same counting on the small model, once with fake tensors and once for real, must
# give the same parameters and the same saved bytes: that is a fact, asserted. What the
# allocator holds after the forward is another matter. It holds the saved activations
# and the output, and it may round each block up or keep more: on CUDA the page reads
# ``torch.cuda.memory_allocated``, on MPS ``torch.mps.current_allocated_memory``, on the
# CPU the net bytes of the profiler's memory events.
#
# Before reading the output: will the allocator hold more than 10 % above the estimate?
from torch.profiler import ProfilerActivity, profile


def bytes_held_by_forward(model: nn.Module, tokens: torch.Tensor) -> tuple[int, torch.Tensor]:
    """Bytes the allocator holds after the forward that it did not hold before."""
    if device.type in ("cuda", "mps"):
        module = getattr(torch, device.type)
        held = (
            torch.cuda.memory_allocated
            if device.type == "cuda"
            else torch.mps.current_allocated_memory
        )
        module.synchronize()
        before = held()
        out = model(tokens)
        module.synchronize()
        return held() - before, out
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = model(tokens)
    return sum(e.self_cpu_memory_usage for e in prof.key_averages()), out


rows = []
for batch_size in (2, 4, 8):
    tokens = torch.randint(0, small_config["vocab"], (batch_size, 64), device=device)
    with FakeTensorMode():
        fake = build(**small_config)
        fake_tokens = torch.zeros(tokens.shape, dtype=tokens.dtype)  # (batch, tokens)
        fake_out, fake_saved = forward_and_saved(fake, fake_tokens)
        fake_count = sum(p.numel() for p in fake.parameters())
    _, real_saved = forward_and_saved(reference, tokens)
    assert fake_count == sum(p.numel() for p in reference.parameters())  # a fact: asserted
    assert fake_saved == real_saved
    held, out = bytes_held_by_forward(reference, tokens)
    estimate = fake_saved + fake_out.numel() * fake_out.element_size()
    rows.append((batch_size, estimate, held))
    print(
        f"batch {batch_size}: saved {fake_saved:,} bytes (fake) vs {real_saved:,} (real); "
        f"estimate with output {estimate:,}, held {held:,} ({held / estimate:.3f}×)"
    )
    del out

# %%
# The expectation takes the largest of the three ratios.
from effpt.expect import expect

worst = max(held / estimate for _, estimate, held in rows)
_ = expect(
    "the allocator holds at most 10 % more after a forward than the shapes predict",
    worst,
    below=1.10,
    device=device,
)

# %%
# Estimate against measurement
# ----------------------------
# Each point is one batch size; on the diagonal the estimate is exact.
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(5.5, 5), layout="constrained")
est = [e for _, e, _ in rows]
ax.plot(est, [h for *_, h in rows], "o", ms=9, label=f"held ({device.type})")
span = [min(est) / 2, max(est) * 2]
ax.plot(span, span, "--", color="grey", label="exact")
for b, e, h in rows:
    ax.annotate(f"batch {b}", (e, h), textcoords="offset points", xytext=(8, -12))
ax.set(xscale="log", yscale="log", xlabel="estimated bytes (fake tensors)", ylabel="bytes held")
ax.set_title("The estimate from shapes, checked")
ax.legend()
plt.show()

# %%
# Summary
# -------
# - ``with torch.device("meta")`` builds a model of any size for its shapes; count its
#   parameters and multiply by the bytes each costs in training.
# - ``FakeTensorMode`` runs the forward without memory; a saved-tensors hook counts the
#   activations backward would keep.
# - ``to_empty()`` then ``load_state_dict`` copies weights into fresh memory;
#   ``load_state_dict(assign=True)`` adopts the checkpoint's tensors. Create the
#   optimizer afterwards (:doc:`plot_optimizer_state`).
# - On a model that fits, the fake and the real counts agree exactly; the verdict above
#   says what the allocator added here.
# - Related: :doc:`/auto_examples/training/plot_checkpoint_files` loads a checkpoint into
#   a ``meta`` model, and PyTorch's notes on
#   `CUDA memory management <https://docs.pytorch.org/docs/stable/notes/cuda.html#memory-management>`__
#   explain what the allocator reserves beyond what it hands out.
