"""
Checkpoint a training run and resume it exactly
===============================================

.. effpt-before-you-start::
   :learn: - Save everything a run's future depends on: model, optimizer, LR scheduler,
             GradScaler, every generator's state and the next epoch.
           - Check that a stopped and resumed run matches the uninterrupted one bit for
             bit, and see what a checkpoint of weights and optimizer alone changes.
           - Save from two processes with ``torch.distributed.checkpoint``, and load the
             checkpoint into one.
   :read-first: :doc:`/auto_examples/basics/plot_modules` for ``state_dict`` and
                checkpointing the optimizer; :doc:`plot_reproducible_runs` for seeds and
                generators; :doc:`/explanations/workers` for the ``__main__`` guard.
   :needs: A CPU is enough. The page trains on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU), in float16 autocast on every
           device. The last section starts two processes that run on the CPU with gloo:
           run as a file, by the platform's default start method; without a file (a
           notebook), by fork where the OS has it. The checkpoints go to a new temporary
           folder (``effpt-ckpt-...``), which the page deletes at the end.

A job that is stopped and resumed should end where the uninterrupted job would have:
then a preempted run costs time, not a different result, and a bug can be replayed from
its last checkpoint. That takes more than the model's weights. This page saves
everything a run's future depends on, proves that a stopped and resumed run matches the
uninterrupted one bit for bit, shows what a checkpoint of weights and optimizer alone
changes, and saves from two processes with :mod:`torch.distributed.checkpoint`.
"""

# %%
# A run with every kind of state
# ------------------------------
# The run below has all the state a real one has: weights, AdamW's moments, a
# learning-rate schedule, a GradScaler (float16 autocast, on every device), dropout that
# draws from torch's generator, an augmentation that draws from Python's :mod:`random`
# and NumPy, and a :class:`~torch.utils.data.distributed.DistributedSampler` whose
# shuffle is a function of its seed and epoch. The last part of the page starts
# processes, which re-import this file under spawn or forkserver; the work sits under
# ``MAIN`` (see :doc:`/explanations/workers`).
import random
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from effpt.device import describe, pick_device

MAIN = __name__ == "__main__"
SEED = 0


def seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002  (the global stream the augmentation draws from)
    torch.manual_seed(seed)


def make_data() -> TensorDataset:
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(96, 8, generator=gen)  # (samples, features)
    return TensorDataset(x, x[:, :2].sum(dim=1, keepdim=True))  # targets (samples, 1)


def make_run(device: torch.device) -> SimpleNamespace:
    torch.manual_seed(SEED)
    model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 1))
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=8, gamma=0.7)
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0**8, growth_interval=4)
    data = make_data()
    sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=SEED)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    return SimpleNamespace(
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        scaler=scaler,
        sampler=sampler,
        loader=loader,
        device=device,
    )


# %%
# The loop sets the sampler's epoch before each epoch; that number is all the sampler
# needs to repeat its shuffle. ``train`` runs the epochs ``first`` to ``last - 1`` and
# returns one loss per step.
def train(run: SimpleNamespace, first: int, last: int) -> list[float]:
    losses = []
    for epoch in range(first, last):
        run.sampler.set_epoch(epoch)  # the shuffle of this epoch
        for xb, yb in run.loader:
            scale = random.uniform(0.9, 1.1)  # augmentation from Python's stream and NumPy's
            noise = torch.from_numpy(np.random.normal(0, 0.01, xb.shape)).float()  # noqa: NPY002
            x, y = (xb * scale + noise).to(run.device), yb.to(run.device)  # (16, 8), (16, 1)
            run.optimizer.zero_grad(set_to_none=True)
            with torch.autocast(run.device.type, dtype=torch.float16):
                loss = F.mse_loss(run.model(x), y)
            run.scaler.scale(loss).backward()
            run.scaler.step(run.optimizer)
            run.scaler.update()
            run.scheduler.step()
            losses.append(loss.item())
    return losses


# %%
# Save every generator's state
# ----------------------------
# The generators are state too. Torch's CPU generator also seeds each DataLoader pass;
# each GPU has its own. NumPy's state holds an array, which ``weights_only`` loading
# (below) refuses, so it is stored as a list.
def rng_state() -> dict:
    name, key, pos, has_gauss, gauss = np.random.get_state()  # noqa: NPY002
    state = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": [name, key.tolist(), pos, has_gauss, gauss],
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if torch.backends.mps.is_available():
        state["mps"] = torch.mps.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    name, key, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, np.array(key, dtype=np.uint32), pos, has_gauss, gauss))  # noqa: NPY002
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])
    if "mps" in state:
        torch.mps.set_rng_state(state["mps"])


# %%
# A checkpoint is then a dictionary of state dicts, the generators' states and the next
# epoch. Loading uses ``weights_only=True``: it reads tensors, numbers, strings and
# containers of them, and refuses to run code from the file. ``map_location="cpu"`` lets
# a checkpoint written on a GPU load anywhere; ``load_state_dict`` moves each tensor.
def checkpoint(run: SimpleNamespace, next_epoch: int) -> dict:
    return {
        "model": run.model.state_dict(),
        "optimizer": run.optimizer.state_dict(),
        "scheduler": run.scheduler.state_dict(),
        "scaler": run.scaler.state_dict(),
        "epoch": next_epoch,
        "rng": rng_state(),
    }


def restore(run: SimpleNamespace, state: dict, everything: bool = True) -> int:
    run.model.load_state_dict(state["model"])
    run.optimizer.load_state_dict(state["optimizer"])
    if everything:
        run.scheduler.load_state_dict(state["scheduler"])
        run.scaler.load_state_dict(state["scaler"])
        set_rng_state(state["rng"])
    return state["epoch"]


# %%
# Stop, resume, compare
# ---------------------
# The uninterrupted run trains 6 epochs. The interrupted one trains 3, saves, and is
# thrown away; then a fresh run, after every generator has been reseeded to something
# else (as a new process would start), loads the file and trains epochs 3 to 5. A third
# run restores only the model and the optimizer, as many scripts do. The files go to a
# temporary folder that the end of the page deletes (and Python does, at exit, if the
# page stops before).
import tempfile
from pathlib import Path

if MAIN:
    device = pick_device()
    print(describe(device))
    workdir = tempfile.TemporaryDirectory(prefix="effpt-ckpt-")
    folder = Path(workdir.name)
    seed_all(SEED)
    whole = make_run(device)
    reference = train(whole, 0, 6)

    seed_all(SEED)
    run = make_run(device)
    first_half = train(run, 0, 3)
    torch.save(checkpoint(run, next_epoch=3), folder / "run.pt")
    del run
    resumed = {}
    for everything in (True, False):
        seed_all(1234)  # other generator states, as a new process would start with
        run = make_run(device)
        state = torch.load(folder / "run.pt", map_location="cpu", weights_only=True)
        start = restore(run, state, everything)
        resumed[everything] = first_half + train(run, start, 6)
        final = torch.cat([p.detach().reshape(-1) for p in run.model.parameters()])
        resumed[everything, "same weights"] = torch.equal(
            final, torch.cat([p.detach().reshape(-1) for p in whole.model.parameters()])
        )
    for everything, name in ((True, "everything"), (False, "model + optimizer only")):
        same = resumed[everything] == reference
        print(
            f"resumed with {name:<22}: same losses {same}, "
            f"same weights {resumed[everything, 'same weights']}"
        )

# sphinx_gallery_start_ignore
if MAIN:
    assert resumed[True] == reference and resumed[True, "same weights"]
    assert resumed[False] != reference and not resumed[False, "same weights"]
    assert resumed[False][:18] == reference[:18]
# sphinx_gallery_end_ignore

# %%
# The full checkpoint reproduces every loss and every bit of the final weights. The
# partial one restarts the scheduler's step count (the learning rate itself comes back
# with the optimizer's state) and the loss scale from their initial values, and draws
# its dropout masks and augmentations from other random numbers: a different run from
# epoch 3 on. Its shuffle is the same, since the epoch was restored and the sampler's
# order follows from it. The figure draws the three loss curves; the exact resume lies
# on the uninterrupted run.
if MAIN:
    import matplotlib.pyplot as plt  # under the guard: a spawned rank need not import it

    fig, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
    ax.semilogy(reference, linewidth=4, alpha=0.4, color="C0", label="uninterrupted")
    ax.semilogy(
        resumed[True], linewidth=1.2, color="C0", linestyle="--", label="resumed, everything"
    )
    ax.semilogy(resumed[False], linewidth=1.2, color="C3", label="resumed, model + optimizer")
    ax.axvline(len(first_half) - 0.5, color="gray", linewidth=0.8)
    ax.set(
        xlabel="step (checkpoint at the gray line)",
        ylabel="training loss",
        title="Resumed runs against the uninterrupted one",
    )
    ax.legend()
    plt.show()

# %%
# This checkpoint is taken between epochs. To stop mid-epoch, also save the number of
# batches already taken in the epoch and skip that many on resume (the sampler's order
# is the same); and the DataLoader's workers, if any, must be seeded from the restored
# generator, as :doc:`/auto_examples/data/plot_randomness_in_workers` shows. The same run
# also needs the same thread count and device to repeat its bits:
# :doc:`plot_reproducible_runs` explains why.
#
# Save from several processes, load into one
# ------------------------------------------
# :mod:`torch.distributed.checkpoint` (DCP) saves a checkpoint from all ranks at once:
# each rank writes its own file and rank 0 writes the metadata that maps every tensor to
# its place. With sharded training (FSDP) each rank writes only its shard, and loading
# reshards for any number of processes; with DDP, as here, every rank holds the whole
# model. Two gloo ranks below train one step, then save together.
# Each rank joins the process group through :func:`effpt.ddp.process_group`: a timeout,
# a barrier on success and the group destroyed in any case, the block that
# :doc:`/auto_examples/amp/plot_autocast_ddp` writes out.
import os
from datetime import timedelta

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.nn.parallel import DistributedDataParallel

from effpt.ddp import process_group


def save_together(path: str) -> torch.Tensor:
    torch.manual_seed(SEED)
    model = DistributedDataParallel(nn.Linear(8, 4))
    gen = torch.Generator().manual_seed(dist.get_rank())  # each rank its own batch
    model(torch.randn(16, 8, generator=gen)).square().mean().backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    dcp.save({"model": model.module.state_dict()}, checkpoint_id=path)
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def dcp_rank(path: str) -> torch.Tensor:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // 2))  # two ranks share the cores
    with process_group("gloo", timeout=timedelta(seconds=60)):
        return save_together(path)


# %%
# :func:`effpt.ddp.launch` starts the ranks as ``torchrun`` would (by fork where the page
# runs without a file, as in this site's build, and the OS has fork). Then this single process, without a
# process group, loads the checkpoint into a model of its own: ``dcp.load`` fills the
# state dict it is given, in place. It may warn that it assumes a single process, which
# is the case here; the cell prints each warning's message alone, without the line of
# torch's source that raised it.
import warnings
from multiprocessing import get_all_start_methods

from effpt.ddp import launch

if MAIN:
    path = str(folder / "dcp")
    no_file = "__file__" not in globals()
    method = "fork" if no_file and "fork" in get_all_start_methods() else None
    trained = launch(dcp_rank, args=(path,), world_size=2, timeout_s=120, start_method=method)
    print(sorted((f.name, f.stat().st_size) for f in Path(path).iterdir()))
    stored = dcp.FileSystemReader(path).read_metadata().storage_data  # where each tensor went
    print({index.fqn: info.relative_path for index, info in stored.items()})
    single = nn.Linear(8, 4)  # fresh weights, about to be overwritten
    state = {"model": single.state_dict()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dcp.load(state, checkpoint_id=path)
    for warning in caught:
        print(f"dcp.load warned ({warning.category.__name__}): {warning.message}")
    single.load_state_dict(state["model"])
    loaded = torch.cat([p.detach().reshape(-1) for p in single.parameters()])
    print(f"loaded weights equal rank 0's: {torch.equal(loaded, trained[0])}")

# sphinx_gallery_start_ignore
if MAIN:
    assert torch.equal(trained[0], trained[1])
    assert torch.equal(loaded, trained[0])
    assert {".metadata", "__0_0.distcp", "__1_0.distcp"} <= {f.name for f in Path(path).iterdir()}
    assert sorted(i.fqn for i in stored) == ["model.bias", "model.weight"], stored
# sphinx_gallery_end_ignore

# %%
# The folder holds one ``.distcp`` file per rank and the ``.metadata``, which maps each
# tensor to one file only (the second line above): DCP writes a tensor that several
# ranks hold once, not once per rank. Writing the files, loading them safely and loading
# large ones cheaply is :doc:`plot_checkpoint_files`. The page is done with its files;
# it deletes their folder:
if MAIN:
    workdir.cleanup()

# sphinx_gallery_start_ignore
if MAIN:
    assert not folder.exists()
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - A checkpoint that resumes exactly holds the model, optimizer, LR scheduler and
#   GradScaler state dicts, the state of every generator (torch CPU, each GPU, Python,
#   NumPy) and the next epoch, from which the sampler's shuffle follows.
# - Restore everything before the first step; reseeding instead starts another run.
# - Check it: a stopped and resumed run must equal the uninterrupted one bit for bit on
#   the same machine.
# - Load with ``weights_only=True`` and ``map_location="cpu"``; keep non-tensor state as
#   numbers, strings and lists.
# - ``torch.distributed.checkpoint`` saves from every rank at once and loads into any
#   number of processes, one included.
