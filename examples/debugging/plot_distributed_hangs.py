"""
Distributed training that hangs, and how to see why
===================================================

.. effpt-before-you-start::
   :learn: - Bound every collective with a timeout, so that a rank whose peer never
             comes fails with an error instead of waiting for ever.
           - Name the missing rank with ``monitored_barrier``, and read the report of
             ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` when ranks call different collectives.
           - Read DDP's error for parameters that get no gradient, and measure what
             ``find_unused_parameters=True`` costs when none is unused.
           - Evaluate on one rank without a collective, and compute a metric that
             ``DistributedSampler``'s padding does not skew.
   :read-first: :doc:`/auto_examples/amp/plot_autocast_ddp` for the process group and the
                DDP loop; :doc:`/explanations/workers` for start methods.
   :needs: A CPU is enough: the page starts two processes that talk through gloo on the
           CPU, on every machine. Run as a file, the ranks start by the platform's start
           method; without a file (a notebook), by fork where the OS has it.

A distributed job that hangs prints nothing: every rank waits in a collective for a peer
that will never join it. The cause is nearly always that the ranks stopped calling the
same collectives in the same order. This page breaks two gloo ranks on purpose in the
usual ways, shows the error each tool reports, exactly as PyTorch prints it, and fixes each
case. Every collective that a peer never joins runs under a timeout of 2 s, and the
launcher ends every rank after 120 s, so the page ends even when a rank is left waiting.
"""

# %%
# One file, two roles
# -------------------
# As on :doc:`/auto_examples/amp/plot_autocast_ddp`, this file is both the program that
# starts the ranks and the script each rank runs. A rank finds ``RANK`` in its
# environment; the launcher does not.
import os

import torch

SEED = 0
LAUNCHER = __name__ == "__main__" and "RANK" not in os.environ
_ = torch.manual_seed(SEED)

# %%
# A timeout turns a hang into an error
# ------------------------------------
# :func:`torch.distributed.init_process_group` takes ``timeout=``, and so does
# :func:`torch.distributed.new_group`: a collective of that group that waits longer
# raises on the rank that waits. The default group below gets 60 s, which the healthy
# work of this page never comes near; the broken case below gets a group of its own
# with a timeout of 2 s, so the page waits only that long. It is the classic:
# a collective inside a branch that only one rank takes (here rank 0 logs a statistic
# averaged across ranks, rank 1 never enters the branch).
import time
from datetime import timedelta

import torch.distributed as dist

SHORT, LONG = timedelta(seconds=2), timedelta(seconds=60)


def error_text(exc: BaseException) -> str:
    """The exception's type and the first line of its message, as the rank saw it."""
    lines = str(exc).strip().splitlines() or [""]
    return f"{type(exc).__name__}: {lines[0]}"


def short_group() -> dist.ProcessGroup:
    """A new group whose collectives give up after SHORT; every rank must create it."""
    dist.barrier()  # meet first, on the default group: the group connects within SHORT
    return dist.new_group(timeout=SHORT)


def branch_only_rank_0_takes(rank: int) -> dict:
    group = short_group()
    began = time.perf_counter()
    try:
        if rank == 0:  # a branch that depends on the rank (or on its data)
            stat = torch.tensor([float(rank)])
            dist.all_reduce(stat, group=group)  # rank 1 never calls this
        return {"error": None, "waited_s": time.perf_counter() - began}
    except RuntimeError as exc:
        return {"error": error_text(exc), "waited_s": time.perf_counter() - began}


# %%
# ``monitored_barrier`` names the rank that is missing
# ----------------------------------------------------
# A timeout says that a collective waited, not who it waited for. Placed before the
# collective, :func:`torch.distributed.monitored_barrier` (gloo only) has rank 0 wait
# for every other rank in turn; when one does not arrive, rank 0's error names it.
# With ``wait_all_ranks=True`` it lists every rank that is missing, not only the first.


def barrier_names_the_missing_rank(rank: int) -> dict:
    dist.barrier()
    group = dist.new_group(timeout=LONG)  # the barrier takes a timeout of its own
    try:
        if rank == 0:  # the same bug: rank 1 skips the step
            dist.monitored_barrier(group=group, timeout=SHORT, wait_all_ranks=True)
        return {"error": None}
    except RuntimeError as exc:
        return {"error": error_text(exc)}


# %%
# ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` compares the collectives
# -----------------------------------------------------------
# A subtler bug: both ranks call a collective, but not the same one. Rank 0 reduces a
# tensor of 3 numbers, rank 1 one of 4 (a batch statistic whose size depends on the
# rank's data). With ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` in the environment, each new
# gloo group is wrapped in a checker that, before every collective, compares what each
# rank is about to run and raises on every rank with both descriptions. The check
# communicates too, before every collective, so it is a setting for debugging, not for
# training. A
# rank reads the variable when ``torch.distributed`` is imported;
# :func:`torch.distributed.set_debug_level_from_env` reads it again, so this page can
# switch it on for one group and off again afterwards.


def set_debug_level(level: str) -> None:
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = level
    dist.set_debug_level_from_env()


def detail_report(rank: int) -> str | None:
    set_debug_level("DETAIL")
    dist.barrier()
    group = dist.new_group(timeout=LONG)  # created under DETAIL: checked
    try:
        dist.all_reduce(torch.ones(3 + rank), group=group)  # 3 numbers, or 4
        return None
    except RuntimeError as exc:
        return str(exc).strip()
    finally:
        set_debug_level("OFF")  # the groups created from here on are not checked


# %%
# Evaluation on rank 0, through the DDP wrapper
# ---------------------------------------------
# ``if rank == 0: evaluate(model)`` looks harmless. But when ``model`` is the
# :class:`~torch.nn.parallel.DistributedDataParallel` wrapper, its ``forward`` is not
# local: before running the module it broadcasts the module's buffers (here the running
# statistics of a batch norm) from rank 0, a collective that rank 1 does not join, so
# rank 0 waits. Had rank 1 gone on training, its next all-reduce would have received
# rank 0's broadcast instead, and a rank would abort on data of the wrong size or both
# would hang.
#
# Below, rank 0 evaluates in a thread and looks after 2 s whether it is
# still waiting; then rank 1 runs the same evaluation, which is one fix (evaluate on
# every rank), and rank 0's wait ends. The other fix is to evaluate ``model.module``,
# the plain module inside the wrapper: nothing is sent, and nothing waits.
import threading

from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def small_model() -> nn.Module:
    torch.manual_seed(SEED)
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 1))


def train_step(model: nn.Module, x: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    model(x).pow(2).mean().backward()  # DDP averages the gradients here


def evaluate(model: nn.Module, x: torch.Tensor) -> None:
    model.eval()
    with torch.no_grad():
        model(x)  # (batch, 1): the scores an evaluation would use
    model.train()


def evaluate_on_rank_0(rank: int, through_wrapper: bool) -> dict:
    dist.barrier()
    model = DDP(small_model(), process_group=dist.new_group(timeout=LONG))
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(rank))  # (batch, features)
    train_step(model, x)
    waiting = torch.zeros(1)
    if rank == 0:
        target = model if through_wrapper else model.module
        worker = threading.Thread(target=evaluate, args=(target, x))
        worker.start()
        worker.join(SHORT.total_seconds())
        waiting[0] = worker.is_alive()  # still inside forward after SHORT?
    dist.broadcast(waiting, src=0)  # on the default group, which is still in step
    if through_wrapper and rank == 1:
        evaluate(model, x)  # rank 1 joins the broadcast: evaluate on every rank
    if rank == 0:
        worker.join()
    train_step(model, x)  # training goes on, on both ranks
    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])  # (n_params,)
    return {"waiting": bool(waiting), "weights": weights}


# %%
# Parameters that get no gradient
# -------------------------------
# DDP averages gradients bucket by bucket, as each bucket's gradients become ready in
# ``backward()``. A parameter that the forward pass did not use never gets a gradient,
# so its bucket never becomes ready; the next forward pass notices and raises. Below,
# a model with two heads uses one of them. The error lists the parameters by index; with
# ``TORCH_DISTRIBUTED_DEBUG`` at ``INFO`` or ``DETAIL`` it names them. Passing
# ``find_unused_parameters=True`` makes DDP search the autograd graph after every forward
# pass and mark what it did not reach as ready.


class TwoHeads(nn.Module):
    def __init__(self, width: int = 32, depth: int = 8) -> None:
        super().__init__()
        self.body = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])
        self.head_a, self.head_b = nn.Linear(width, 1), nn.Linear(width, 1)

    def forward(self, x: torch.Tensor, both: bool = False) -> torch.Tensor:
        h = self.body(x)  # (batch, width)
        return self.head_a(h) + self.head_b(h) if both else self.head_a(h)


def unused_parameter_error() -> str:
    dist.barrier()
    model = DDP(TwoHeads(), process_group=dist.new_group(timeout=LONG))
    x = torch.randn(8, 32)  # (batch, width)
    try:
        for _ in range(2):  # the second forward pass raises
            model(x).sum().backward()  # head_b is never used
    except RuntimeError as exc:
        return str(exc).strip()
    return ""


# %%
# What the search costs when nothing is unused
# --------------------------------------------
# Many scripts pass ``find_unused_parameters=True`` to silence the error once and keep it
# for ever. When every parameter is used, the search finds nothing and is pure cost: a
# walk of the whole autograd graph on every step. Both ranks time the same number of
# steps of the same model, which uses both heads, with the search off and on, in
# alternating blocks so that the machine's load falls on both alike. Before you read the
# verdict: will the search cost more on a deep model of small layers, or on a shallow
# model of large ones?
from effpt.bench import Timing


def step_times(rounds: int = 6, steps: int = 4) -> dict:
    dist.barrier()
    x = torch.randn(8, 32)  # (batch, width)
    models = {
        search: DDP(TwoHeads(depth=16), find_unused_parameters=search) for search in (False, True)
    }
    seconds = {False: [], True: []}
    for _ in range(rounds + 1):  # the first round warms up
        for search, model in models.items():
            began = time.perf_counter()
            for _ in range(steps):
                model(x, both=True).sum().backward()
            seconds[search].append((time.perf_counter() - began) / steps)
    return {search: Timing(tuple(s[1:]), steps) for search, s in seconds.items()}


# %%
# ``DistributedSampler`` pads, and the padding counts twice
# ---------------------------------------------------------
# :class:`~torch.utils.data.distributed.DistributedSampler` gives every rank the same
# number of samples. When the dataset does not divide evenly, it pads by repeating
# samples from the start, so an evaluation over 9 samples on 2 ranks scores 10, one of
# them twice; and an average of the ranks' averages weighs the ranks alike even when
# their shares differ. The fix: give each rank its share without padding (every
# ``world_size``-th index, from its rank on), sum the correct answers and count the
# samples on each rank, then add both across ranks with one
# :func:`~torch.distributed.all_reduce` and divide once.
from torch.utils.data import DistributedSampler

CORRECT = torch.tensor([0, 1, 1, 1, 1, 0, 1, 0, 0])  # 1 where the model was right


def metric_over_ranks(rank: int, world: int) -> dict:
    sampler = DistributedSampler(range(len(CORRECT)), num_replicas=world, rank=rank, shuffle=False)
    padded = list(sampler)
    mean_of_means = CORRECT[padded].float().mean().reshape(1)
    dist.all_reduce(mean_of_means)
    mine = list(range(rank, len(CORRECT), world))  # this rank's share, no padding
    sums = torch.stack([CORRECT[mine].sum(), torch.tensor(len(mine))]).float()  # (2,)
    dist.all_reduce(sums)  # correct answers and samples, added over the ranks
    return {
        "indices": padded,
        "padded_mean": (mean_of_means / world).item(),
        "reduced": (sums[0] / sums[1]).item(),
        "samples": int(sums[1]),
    }


# %%
# What every rank runs
# --------------------
# ``main`` joins the default group and runs the cases in turn. Each broken case leaves
# its own group behind and is never used again; before the next case the ranks meet on
# the default group, which the broken ones never touched. ``destroy_process_group``
# runs however the cases end.
import gc


def main() -> dict:
    torch.set_num_threads(1)  # two ranks share this machine's cores
    dist.init_process_group("gloo", timeout=LONG)
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        out = {"rank": rank, "branch": branch_only_rank_0_takes(rank)}
        out["monitored"] = barrier_names_the_missing_rank(rank)
        out["detail"] = detail_report(rank)
        out["eval_wrapper"] = evaluate_on_rank_0(rank, through_wrapper=True)
        out["eval_module"] = evaluate_on_rank_0(rank, through_wrapper=False)
        out["unused"] = unused_parameter_error()
        out["times"] = step_times()
        out["metric"] = metric_over_ranks(rank, world)
        dist.barrier()
        return out
    finally:
        gc.collect()  # free the DDP models while their groups still exist
        dist.destroy_process_group()


# %%
# Start the two ranks
# -------------------
# :func:`effpt.ddp.launch` plays ``torchrun``'s part (``torchrun --nproc-per-node=2
# plot_distributed_hangs.py`` runs ``main`` the same way). It also has a deadline of its
# own: if anything on this page hangs despite the timeouts, every rank is terminated
# after 120 s and the launcher raises.
from multiprocessing import get_all_start_methods, get_start_method

from effpt.ddp import launch

if __name__ == "__main__" and not LAUNCHER:  # started by torchrun
    result = main()
    print(f"rank {result['rank']}: done\n", end="", flush=True)

if LAUNCHER:
    has_file, has_fork = "__file__" in globals(), "fork" in get_all_start_methods()
    method = get_start_method() if has_file or not has_fork else "fork"
    began = time.perf_counter()
    ranks = launch(main, world_size=2, timeout_s=120, start_method=method)
    print(f"two ranks, started by {method}, finished in {time.perf_counter() - began:.1f} s")

# %%
# What each rank saw
# ------------------
# In the first case rank 0 waited in its all-reduce until the group's timeout and then
# raised; rank 1, which skipped the branch, went on without an error. In the second,
# ``monitored_barrier`` names the rank that did not arrive.
if LAUNCHER:
    for r in ranks:
        case = r["branch"]
        print(f"rank {r['rank']}, branch: {case['error']} (after {case['waited_s']:.1f} s)")
    for r in ranks:
        print(f"rank {r['rank']}, monitored_barrier: {r['monitored']['error']}")

# sphinx_gallery_start_ignore
if LAUNCHER:
    assert ranks[0]["branch"]["error"] is not None and ranks[1]["branch"]["error"] is None
    assert "1" in ranks[0]["monitored"]["error"] and ranks[1]["monitored"]["error"] is None
# sphinx_gallery_end_ignore

# %%
# Under ``DETAIL`` both ranks raise at once, before the all-reduce itself runs, and each
# message gives the collective, the tensor's shape and dtype on each side, and the aspect
# in which they differ.
if LAUNCHER:
    for r in ranks:
        print(f"rank {r['rank']}:\n{r['detail']}\n")

# sphinx_gallery_start_ignore
if LAUNCHER:
    assert all("mismatch" in r["detail"] for r in ranks), [r["detail"] for r in ranks]
# sphinx_gallery_end_ignore

# %%
# Through the wrapper, rank 0 was still inside ``forward`` after 2 s, waiting for rank 1;
# through ``model.module`` it was not. Either way the ranks end in step, with the same
# weights after one more training step.
if LAUNCHER:
    for case in ("eval_wrapper", "eval_module"):
        r0, r1 = (r[case] for r in ranks)
        same = torch.equal(r0["weights"], r1["weights"])
        print(f"{case}: rank 0 still waiting after 2 s: {r0['waiting']}; same weights: {same}")

# sphinx_gallery_start_ignore
if LAUNCHER:
    assert ranks[0]["eval_wrapper"]["waiting"] and not ranks[0]["eval_module"]["waiting"]
    for case in ("eval_wrapper", "eval_module"):
        assert torch.equal(ranks[0][case]["weights"], ranks[1][case]["weights"])
# sphinx_gallery_end_ignore

# %%
# The unused head's error, as rank 0 raised it:
if LAUNCHER:
    print(ranks[0]["unused"])

# sphinx_gallery_start_ignore
if LAUNCHER:
    assert all("unused" in r["unused"].lower() or "reduction" in r["unused"] for r in ranks)
# sphinx_gallery_end_ignore

# %%
# And what the search cost on rank 0, where every parameter was used:
from effpt.expect import expect
from effpt.records import format_seconds, speedup

if LAUNCHER:
    times = ranks[0]["times"]
    print(
        f"one DDP step: {format_seconds(times[False].median)} without the search, "
        f"{format_seconds(times[True].median)} with it (one thread per rank)"
    )
    _ = expect(
        "with find_unused_parameters=True, a DDP step of a model that uses every parameter "
        "is slower",
        speedup(times[True], times[False]),
        above=1.0,
        device="cpu",  # gloo ranks on the CPU
    )

# %%
# The padded sampler handed out 10 indices for 9 samples, index 0 twice, one of them to
# each rank; the mean of the ranks' means then differs from the accuracy over the 9
# samples, which the reduced sums and counts give exactly.
if LAUNCHER:
    for r in ranks:
        print(f"rank {r['rank']}: indices {r['metric']['indices']}")
    handed = sum(len(r["metric"]["indices"]) for r in ranks)
    truth = CORRECT.float().mean().item()
    metric = ranks[0]["metric"]
    print(f"indices handed out: {handed} for {len(CORRECT)} samples")
    print(f"accuracy, mean of the ranks' means: {metric['padded_mean']:.4f}")
    print(f"accuracy, reduced sums and counts:  {metric['reduced']:.4f} over {metric['samples']}")
    print(f"accuracy over the 9 samples:       {truth:.4f}")

# sphinx_gallery_start_ignore
if LAUNCHER:
    assert handed == 10 == -(-len(CORRECT) // 2) * 2
    assert metric["samples"] == len(CORRECT) and abs(metric["reduced"] - truth) < 1e-6
    assert abs(metric["padded_mean"] - truth) > 0.01
# sphinx_gallery_end_ignore

# %%
# The step times, round by round, show how the two settings compare on this machine
# while its load changed.
if LAUNCHER:
    import matplotlib.pyplot as plt  # under the guard: a spawned rank need not import it
    from matplotlib.ticker import ScalarFormatter

    fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    for search, marker in ((False, "o"), (True, "s")):
        per_step = [s * 1e3 for s in times[search].per_call]
        label = f"find_unused_parameters={search}"
        ax.plot(range(1, len(per_step) + 1), per_step, marker, label=label)
    ax.set_yscale("log")
    for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
        axis(ScalarFormatter())  # plain milliseconds on the log axis
    ax.set(xlabel="round (alternating blocks)", ylabel="ms per DDP step, rank 0")
    ax.set_title("The graph search on every step")
    ax.legend(fontsize="small")
    plt.show()

# %%
# Summary
# -------
# - Give every process group a timeout (``init_process_group(timeout=...)``,
#   ``new_group(timeout=...)``): a rank left waiting then fails with an error instead
#   of hanging for ever.
#
# - Every rank must call the same collectives in the same order. A collective inside a
#   branch that depends on the rank or on its data is the usual cause of a hang.
#
# - ``monitored_barrier`` names the rank that is missing; ``TORCH_DISTRIBUTED_DEBUG=DETAIL``
#   compares every collective across ranks and reports the first difference.
#
# - The DDP wrapper's ``forward`` communicates: evaluate ``model.module`` on one rank,
#   or evaluate on every rank.
#
# - Keep ``find_unused_parameters=True`` for models that really leave parameters unused:
#   it searches the graph on every step.
#
# - ``DistributedSampler`` pads with repeated samples: for an exact metric, shard without
#   padding and reduce sums and counts, not means.
#
# Related pages: :doc:`/auto_examples/amp/plot_autocast_ddp` trains two ranks with DDP;
# :doc:`/explanations/workers` explains start methods.
