"""
Load a checkpoint into a model that changed
===========================================

.. effpt-before-you-start::
   :learn: - Strip the ``_orig_mod.`` prefix of a compiled model and the ``module.``
             prefix of a DDP-wrapped one from a saved ``state_dict``.
           - Read the missing and unexpected keys that ``strict=False`` returns, refuse a
             load that matched nothing, and load a backbone under a new head.
           - Freeze the backbone so that fine-tuning leaves it unchanged, normalisation
             statistics included, and build the optimizer over the right parameters.
           - Load into a model built on the ``meta`` device with ``assign=True``.
   :read-first: :doc:`/auto_examples/basics/plot_modules` for ``state_dict``;
                :doc:`/auto_examples/training/plot_checkpoint_files` for writing and
                reading the file itself.
   :needs: A CPU is enough. The fine-tuning runs on a CUDA or Apple MPS GPU when there is
           one (``EFFPT_DEVICE=cpu`` keeps it on the CPU); the DDP wrapper runs as a
           single gloo process on the CPU, in this process, and prints why it is skipped
           where ``torch.distributed`` is missing.

A checkpoint stores every tensor under the dotted path of the module that owned it. Wrap
the model, rename a layer or swap its last layer, and the paths in the file no longer
match the model you load it into. PyTorch then refuses the load and names every key that
did not match, or, with ``strict=False``, loads what it can and returns the rest in a
list that is easy to ignore. This page provokes each mismatch, prints the real message,
and fixes it.
"""

# %%
# A model and its keys
# --------------------
# The model is a small backbone (two linear layers with a batch norm between them) and a
# classification head. Its :meth:`~torch.nn.Module.state_dict` maps each dotted name to
# a tensor: parameters, and the batch norm's running statistics, which are buffers.
import torch
from torch import nn

from effpt.device import describe, pick_device

device = pick_device()
print(describe(device))
torch.manual_seed(0)


class Classifier(nn.Module):
    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU()
        )
        self.head = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))  # (batch, classes)


trained = Classifier()
print(list(trained.state_dict()))

# %%
# The ``_orig_mod.`` prefix of a compiled model
# ---------------------------------------------
# :func:`torch.compile` returns a wrapper that holds the original model as its
# ``_orig_mod`` attribute, so the wrapper's ``state_dict`` puts ``_orig_mod.`` in front
# of every key. Compiling happens at the first call, and the page never calls it: the
# wrapper's keys are all it needs. A file saved from the wrapper does not load into a
# plain model, and the error lists both sides.
try:
    compiled = torch.compile(trained)
except RuntimeError as exc:  # a Python or platform this release cannot compile on
    print(f"torch.compile is unavailable here ({exc}); a wrapper with the same attribute stands in")
    compiled = nn.Module()
    compiled._orig_mod = trained
from_compiled = compiled.state_dict()
print(list(from_compiled)[:2])
try:
    Classifier().load_state_dict(from_compiled)
except RuntimeError as exc:
    error = str(exc)
print(error[:420], "...")

# sphinx_gallery_start_ignore
assert all(k.startswith("_orig_mod.") for k in from_compiled)
assert "Missing key(s)" in error and "Unexpected key(s)" in error
# sphinx_gallery_end_ignore

# %%
# The fix for a file already written is
# :func:`~torch.nn.modules.utils.consume_prefix_in_state_dict_if_present`, which
# renames the keys in place (and leaves keys without the prefix alone). The fix for the
# next file is to save the model underneath: ``compiled._orig_mod.state_dict()``, or the
# ``trained`` object you compiled, whose parameters are the same tensors.
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

consume_prefix_in_state_dict_if_present(from_compiled, "_orig_mod.")
restored = Classifier()
print(restored.load_state_dict(from_compiled))
same = all(
    torch.equal(a, b)
    for a, b in zip(restored.state_dict().values(), trained.state_dict().values(), strict=True)
)
print(f"every tensor equal to the trained model's: {same}")

# sphinx_gallery_start_ignore
assert same and compiled._orig_mod is trained
# sphinx_gallery_end_ignore

# %%
# The ``module.`` prefix of DistributedDataParallel
# -------------------------------------------------
# :class:`~torch.nn.parallel.DistributedDataParallel` keeps the model as ``.module``,
# and needs a process group to exist before it wraps anything. One process is enough to
# see the keys: a gloo group of size one, whose rendezvous is a file in a temporary
# folder, with a 30-second timeout so that nothing can wait for long. The group is
# destroyed right after. ``nn.DataParallel`` adds the same ``module.`` prefix.
import datetime as dt
import tempfile

import torch.distributed as dist

if dist.is_available():
    from torch.nn.parallel import DistributedDataParallel

    with tempfile.TemporaryDirectory(prefix="effpt-ddp-") as folder:
        store = dist.FileStore(f"{folder}/store", 1)
        dist.init_process_group(
            "gloo", store=store, rank=0, world_size=1, timeout=dt.timedelta(seconds=30)
        )
        try:
            wrapped = DistributedDataParallel(Classifier())  # on the CPU: gloo
            from_ddp = wrapped.state_dict()
        finally:
            dist.destroy_process_group()
    print(list(from_ddp)[:2])
else:
    print("on this build: torch.distributed is not available; the keys are renamed by hand")
    from_ddp = {f"module.{k}": v for k, v in Classifier().state_dict().items()}
consume_prefix_in_state_dict_if_present(from_ddp, "module.")
print(Classifier().load_state_dict(from_ddp))

# sphinx_gallery_start_ignore
assert not dist.is_available() or not dist.is_initialized()
assert list(from_ddp) == list(trained.state_dict())
# sphinx_gallery_end_ignore

# %%
# ``strict=False`` can load nothing at all
# ----------------------------------------
# ``strict=False`` turns the error into a return value: a named tuple with the
# ``missing_keys`` the model wanted and the ``unexpected_keys`` the file had. Given the
# compiled model's file with its prefix, every key lands in one list or the other (all
# but ``backbone.1.num_batches_tracked``, which batch norm fills in itself for files
# older than that buffer, hence 10 missing and 11 unexpected), not one weight is loaded,
# yet nothing is raised. Read the tuple every time, and refuse a
# load that left a key you need.
from_compiled = compiled.state_dict()  # the prefixed file again
fresh = Classifier()
result = fresh.load_state_dict(from_compiled, strict=False)
print(f"missing: {len(result.missing_keys)}, unexpected: {len(result.unexpected_keys)}")
print(
    f"head weight equal to the trained one: {torch.equal(fresh.head.weight, trained.head.weight)}"
)


def load_checked(model: nn.Module, state: dict, *, may_miss: str = "") -> None:
    """Load with strict=False, and raise unless only keys starting with may_miss are left."""
    result = model.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys if not (may_miss and k.startswith(may_miss))]
    if missing or result.unexpected_keys:
        msg = f"missing {missing}, unexpected {result.unexpected_keys}"
        raise ValueError(f"{type(model).__name__}: the checkpoint does not fit: {msg}")


try:
    load_checked(Classifier(), from_compiled)
except ValueError as exc:
    print(str(exc)[:200], "...")

# sphinx_gallery_start_ignore
assert len(result.missing_keys) == len(trained.state_dict()) - 1  # num_batches_tracked is optional
assert not torch.equal(fresh.head.weight, trained.head.weight)
# sphinx_gallery_end_ignore

# %%
# A trained backbone under a new head
# -----------------------------------
# A new task with ten classes keeps the backbone and needs a head of another shape. A
# shape mismatch is not a missing key, so ``strict=False`` does not excuse it: both
# calls below raise, and the message names the parameter and both shapes.
checkpoint = trained.state_dict()
errors = {}
for strict in (True, False):
    try:
        Classifier(classes=10).load_state_dict(checkpoint, strict=strict)
    except RuntimeError as exc:
        errors[strict] = str(exc)
        print(f"strict={strict}: {exc}")

# sphinx_gallery_start_ignore
assert all("size mismatch for head.weight" in errors[s] for s in (True, False))
# sphinx_gallery_end_ignore

# %%
# Leave the old head out of what you load, then check that only the new head was left
# missing. ``load_checked`` refuses anything else.
tuned = Classifier(classes=10).to(device)
backbone_only = {k: v for k, v in checkpoint.items() if k.startswith("backbone.")}
load_checked(tuned, backbone_only, may_miss="head.")
print(
    f"{len(backbone_only)} tensors loaded; the head of shape {tuple(tuned.head.weight.shape)} starts fresh"
)

# %%
# Before a load, which keys will match
# ------------------------------------
# The same question asked of each file above: for every key the model has, is it in the
# file with the right shape, in it with another shape, or not there; and how many keys
# does the file have that the model does not. Answering before loading costs a loop over
# two dictionaries, and the figure shows the answers side by side.
import matplotlib.pyplot as plt


def match(model: nn.Module, state: dict) -> tuple[dict[str, str], int]:
    """For each key of ``model``: 'loads', 'shape differs' or 'missing'; and the extras."""
    own = model.state_dict()
    status = {
        k: "missing"
        if k not in state
        else "loads"
        if state[k].shape == v.shape
        else "shape differs"
        for k, v in own.items()
    }
    return status, len(set(state) - set(own))


files = {
    "compiled, as saved": (Classifier(), compiled.state_dict()),
    "DDP, prefix removed": (Classifier(), from_ddp),
    "new head, whole file": (Classifier(classes=10), checkpoint),
    "new head, backbone only": (Classifier(classes=10), backbone_only),
}
answers = {name: match(model, state) for name, (model, state) in files.items()}
keys = list(trained.state_dict())
colours = {"loads": "tab:green", "shape differs": "tab:orange", "missing": "tab:red"}
fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
for col, (status, extra) in enumerate(answers.values()):
    for row, key in enumerate(keys):
        ax.scatter(col, row, s=120, marker="s", color=colours[status[key]])
    ax.annotate(f"+{extra} unexpected", (col, len(keys) - 0.2), ha="center", fontsize=8)
for label, colour in colours.items():
    ax.scatter([], [], marker="s", color=colour, label=label)
ax.set(xticks=range(len(files)), yticks=range(len(keys)), ylim=(len(keys) + 0.4, -0.8))
ax.set_xticklabels([name.replace(", ", ",\n") for name in files], fontsize=8)
ax.set_yticklabels(keys, fontsize=8)
ax.set_title("Which of the model's keys each file provides")
ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
plt.show()

# sphinx_gallery_start_ignore
status, extra = answers["compiled, as saved"]
assert set(status.values()) == {"missing"} and extra == len(keys)
assert answers["new head, whole file"][0]["head.weight"] == "shape differs"
# sphinx_gallery_end_ignore

# %%
# Freeze the backbone, and its statistics
# ---------------------------------------
# ``requires_grad_(False)`` stops gradients from reaching the backbone's parameters, and
# an optimizer built over the parameters that still require a gradient cannot touch the
# others. A batch norm in training mode still updates its running mean and variance on
# every forward pass, though: those are buffers, which no optimizer and no
# ``requires_grad`` flag governs. Below, ten fine-tuning steps run twice from the same
# start, first with the backbone left in training mode, then in eval mode.
import copy

start = copy.deepcopy(tuned)
x = torch.randn(64, 8, device=device)  # (batch, features)
y = torch.randint(0, 10, (64,), device=device)  # (batch,)


def fine_tune(model: nn.Module, *, backbone_eval: bool) -> nn.Module:
    model.backbone.requires_grad_(False)
    model.train()
    if backbone_eval:
        model.backbone.eval()  # batch norm uses, and keeps, its loaded statistics
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-2)
    for _ in range(10):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def changed(before: nn.Module, after: nn.Module) -> dict[str, float]:
    """Largest absolute change of each tensor in the state_dict (float tensors only)."""
    return {
        k: (after.state_dict()[k] - v).abs().max().item()
        for k, v in before.state_dict().items()
        if v.is_floating_point()
    }


moved = {}
for backbone_eval in (False, True):
    delta = changed(start, fine_tune(copy.deepcopy(start), backbone_eval=backbone_eval))
    moved[backbone_eval] = [k for k, d in delta.items() if d > 0]
    print(f"backbone in eval mode: {backbone_eval}; tensors that changed: {moved[backbone_eval]}")

# sphinx_gallery_start_ignore
assert moved[True] == ["head.weight", "head.bias"], moved
assert set(moved[False]) == {"backbone.1.running_mean", "backbone.1.running_var", *moved[True]}
# sphinx_gallery_end_ignore

# %%
# The first run moved the batch norm's running statistics, the second only the head. The
# optimizer of a frozen model holds the head's two tensors and nothing else:
tuned.backbone.requires_grad_(False)
opt = torch.optim.AdamW([p for p in tuned.parameters() if p.requires_grad], lr=1e-2)
in_opt = sum(len(g["params"]) for g in opt.param_groups)
print(f"tensors in the optimizer: {in_opt} of {len(list(tuned.parameters()))}")

# sphinx_gallery_start_ignore
assert in_opt == 2
# sphinx_gallery_end_ignore

# %%
# ``assign=True``: load into a model that has no memory yet
# ---------------------------------------------------------
# A model built under ``torch.device("meta")`` has shapes and no storage, which skips
# the random initialisation that loading would overwrite anyway. Copying into such a
# model does nothing: each parameter stays on ``meta``, and PyTorch warns once per key.
import warnings

with torch.device("meta"):
    empty = Classifier()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    empty.load_state_dict(checkpoint)
print(
    f"{len(caught)} warnings; the first: {caught[0].message if caught else 'none on this release'}"
)
print(f"head.weight is on: {empty.head.weight.device}")

# sphinx_gallery_start_ignore
assert empty.head.weight.is_meta
# sphinx_gallery_end_ignore

# %%
# ``assign=True`` makes each loaded tensor the module's parameter instead of copying it.
# Two consequences follow: the parameters take the checkpoint's device and dtype (move
# the model afterwards), and they are new objects, so build the optimizer after the
# load, never before.
old = empty.head.weight
empty.load_state_dict(checkpoint, assign=True)
print(
    f"head.weight is on: {empty.head.weight.device}, same tensor as in the file: "
    f"{empty.head.weight.data_ptr() == checkpoint['head.weight'].data_ptr()}, "
    f"same object as before: {empty.head.weight is old}"
)

# sphinx_gallery_start_ignore
assert empty.head.weight.device == checkpoint["head.weight"].device and empty.head.weight is not old
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Save the unwrapped model (``compiled._orig_mod``, ``ddp.module``); for a file saved
#   from a wrapper, strip its prefix with ``consume_prefix_in_state_dict_if_present``.
#
# - ``strict=False`` returns what did not match instead of raising: check
#   ``missing_keys`` and ``unexpected_keys`` and refuse a load that left what you need.
#
# - A shape mismatch raises even with ``strict=False``; leave the tensors of a replaced
#   layer out of what you load.
#
# - Freezing is ``requires_grad_(False)`` plus an optimizer over the parameters that
#   still need gradients, plus eval mode for normalisation layers whose statistics must
#   stay.
#
# - ``assign=True`` loads into a ``meta`` model; the parameters are the checkpoint's
#   tensors, on its device and in its dtype, so move the model and build the optimizer
#   afterwards.
