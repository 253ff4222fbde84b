"""
Combine autocast with DistributedDataParallel
=============================================

Data-parallel training runs the same model in several processes, and mixed precision
must take effect in every one of them, and in every thread that runs a forward pass.
This page starts two real processes on this machine, trains a model whose ``forward``
enters :func:`torch.autocast` itself, and checks that
:class:`torch.nn.parallel.DistributedDataParallel` averaged the gradients across them.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_autocast_ddp.py``.
"""

# %%
# Why the page is guarded
# -----------------------
# :func:`torch.multiprocessing.spawn` starts fresh Python interpreters. Each one
# imports the function it must run, so the worker lives in a module,
# :func:`effpt.ddp.worker`, not on this page; and each one imports this script too,
# as ``__mp_main__``. Everything that should happen once, in the parent, therefore
# sits under ``if __name__ == "__main__":``, which is also what a copy of this script
# needs to run with plain ``python``.
import torch

from effpt.device import autocast_dtype, describe, pick_device

if __name__ == "__main__":
    torch.manual_seed(0)
    device = pick_device()
    low = autocast_dtype(device)
    print(describe(device))

# %%
# Autocast state belongs to a thread
# ----------------------------------
# An autocast region covers the thread that entered it, and nothing else. Below, the
# main thread is inside the region and a second thread it starts is not: the same
# product comes out in two dtypes. ``DataParallel``, and ``DistributedDataParallel``
# with several devices per process, run ``forward`` in such side threads.
import threading


def product_dtype() -> torch.dtype:
    a = torch.ones(4, 4, device=device)
    return (a @ a).dtype


if __name__ == "__main__":
    seen = {}
    with torch.autocast(device.type, dtype=low):
        seen["main thread"] = product_dtype()
        side = threading.Thread(target=lambda: seen.update({"side thread": product_dtype()}))
        side.start()
        side.join()
    print(seen)

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert seen == {"main thread": low, "side thread": torch.float32}, seen
# sphinx_gallery_end_ignore

# %%
# Put autocast inside ``forward``
# -------------------------------
# The fix is to enter autocast in the model's own ``forward``: then whichever thread
# or process runs the forward pass autocasts, and the loss outside stays float32.
# Here is :class:`effpt.ddp.AutocastMLP`'s ``forward``, and the proof that it now
# autocasts in the side thread too.
import inspect

from effpt.ddp import AutocastMLP

if __name__ == "__main__":
    print(inspect.getsource(AutocastMLP.forward))
    model = AutocastMLP(16, 64, device.type, low).to(device)
    outputs = {}
    side = threading.Thread(
        target=lambda: outputs.update(side=model(torch.ones(2, 16, device=device)))
    )
    side.start()
    side.join()
    print(f"output dtype of a forward pass in a side thread: {outputs['side'].dtype}")

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert outputs["side"].dtype == low
# sphinx_gallery_end_ignore

# %%
# Two processes, one gradient
# ---------------------------
# :func:`effpt.ddp.run_ddp` spawns two ranks. They rendezvous on a TCP port that the
# operating system picks (:func:`effpt.ddp.free_port`), with NCCL when there is a GPU
# for each rank and gloo on the CPU otherwise. Each rank builds the same model, sees
# its own batch, and trains five steps. If a rank raises, the others are stopped and
# its traceback is raised here; if the ranks are still running after ``timeout_s``,
# all are terminated and :class:`effpt.ddp.DDPTimeoutError` fails the page. Every
# rank destroys its process group however it ends.
import time

from effpt.ddp import DDPConfig, run_ddp

if __name__ == "__main__":
    config = DDPConfig(world_size=2, steps=5, timeout_s=120).resolved()
    if torch.cuda.is_available() and config.backend != "nccl":
        print(
            f"this machine has {torch.cuda.device_count()} GPU(s); NCCL needs one per rank, "
            "so the ranks run on the CPU with gloo"
        )
    print(f"{config.world_size} ranks, backend {config.backend}, device {config.device_type}")
    start = time.perf_counter()
    results = run_ddp(config)
    print(f"both ranks done in {time.perf_counter() - start:.1f} s (start-up included)")

# %%
# Every rank reports back: autocast was on inside ``forward``, the model's output has
# the 16-bit type, and the losses differ because each rank sees different data.
if __name__ == "__main__":
    for r in results:
        losses = ", ".join(f"{v:.4f}" for v in r["losses"])
        print(
            f"rank {r['rank']} ({r['backend']}, {r['device']}): autocast in forward "
            f"{r['autocast_in_forward']}, output {r['output_dtype']}, losses {losses}"
        )

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    assert len(results) == 2
    for r in results:
        assert r["autocast_in_forward"], r
        assert r["output_dtype"] == r["autocast_dtype"], r
        assert r["losses"][-1] < r["losses"][0], r
    assert results[0]["losses"][0] != results[1]["losses"][0]
# sphinx_gallery_end_ignore

# %%
# The gradients were averaged
# ---------------------------
# Before training, each rank also computed its own gradient with a plain copy of the
# model and gathered everyone's. The gradient DDP left in ``.grad`` equals the mean
# of the ranks' own gradients, and differs from each rank's own; after five steps the
# weights of both ranks are still identical.
if __name__ == "__main__":
    for r in results:
        print(
            f"rank {r['rank']}: |DDP grad - mean of ranks' grads| max {r['grad_vs_mean']:.1e}, "
            f"|DDP grad - own grad| max {r['grad_vs_own']:.1e}, "
            f"weight spread across ranks {r['param_spread']:.1e}"
        )

# sphinx_gallery_start_ignore
if __name__ == "__main__":
    for r in results:
        assert r["grad_vs_mean"] < 1e-6, r
        assert r["grad_vs_own"] > 1e-3, r
        assert r["param_spread"] == 0, r
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Autocast state is per thread and per process: enter :func:`torch.autocast` inside
#   the model's ``forward`` so that every rank and every side thread autocasts.
# - With one device per process, DDP starts no threads, and a GradScaler is used
#   exactly as in a single process.
# - Spawned workers must be importable: keep them in a module, and guard the
#   launching script with ``if __name__ == "__main__":``.
# - Bound every distributed run: a timeout on the process group, a deadline in the
#   parent, and ``destroy_process_group`` in a ``finally``.
