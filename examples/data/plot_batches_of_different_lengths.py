"""
Batch sequences of different lengths without wasting the compute on padding
===========================================================================

.. effpt-before-you-start::
   :learn: - Measure how much of a padded batch is padding, on lengths drawn like real
             sentence lengths.
           - Write a batch sampler that groups sequences of similar length, and measure
             the padding it saves.
           - Run an RNN on a padded batch with ``pack_padded_sequence``, and check that
             its outputs equal those of each sequence run alone.
           - Pass a nested (jagged) tensor through ``scaled_dot_product_attention``, and
             count the recompilations that varying lengths cause under ``torch.compile``.
   :read-first: :doc:`plot_datasets_and_dataloader` for datasets, samplers and
                ``collate_fn``.
   :needs: A CPU is enough; the page runs on the CPU on every machine and starts no
           processes. Its compiled functions use a backend that only counts graphs, so
           no compiler runs.

Text, audio and event logs come in sequences of different lengths, and a batch is a
rectangle: every sequence is padded to the longest one in its batch, and the model
computes on the padding too. This page measures that waste on a realistic spread of
lengths, removes most of it by batching sequences of similar length together, and shows
three ways to keep the padding out of the results and out of the compiler's way.
"""

# %%
# Lengths like real ones
# ----------------------
# Sentence lengths are skewed: most are short and a few are very long. A log-normal
# distribution is a common model of them; the page draws 4,000 lengths from one, between
# 4 and 256 tokens. The waste of a batching is the share of the padded slots that hold
# padding: one minus the real tokens over the batch size times the longest sequence,
# summed over the batches.
import torch

torch.manual_seed(0)
gen = torch.Generator().manual_seed(0)
lengths = torch.distributions.LogNormal(3.2, 0.7).sample((4000,)).round().clamp(4, 256).long()
BATCH = 32
print(f"lengths: median {lengths.median()}, mean {lengths.float().mean():.1f}, max {lengths.max()}")


def waste(batches: list[list[int]]) -> float:
    """The share of padded slots that hold padding, over all batches."""
    real = sum(int(lengths[b].sum()) for b in batches)
    slots = sum(len(b) * int(lengths[b].max()) for b in batches)
    return 1 - real / slots


# %%
# Random batches, as a shuffled DataLoader makes them
# ---------------------------------------------------
# A shuffled loader puts a few long sequences into nearly every batch, and the batch is
# as long as its longest member.
order = torch.randperm(len(lengths), generator=gen).tolist()
random_batches = [order[i : i + BATCH] for i in range(0, len(order), BATCH)]
print(f"random batches: {len(random_batches)}, padding {waste(random_batches):.1%} of the slots")

# sphinx_gallery_start_ignore
first = random_batches[0]
by_hand = 1 - sum(lengths[i].item() for i in first) / (len(first) * max(lengths[first]).item())
assert abs(waste([first]) - by_hand) < 1e-12
# sphinx_gallery_end_ignore

# %%
# A batch sampler that groups similar lengths
# -------------------------------------------
# Sorting the whole dataset by length wastes least, but every epoch then sees the same
# batches in a fixed order from short to long. Bucketing keeps most of the gain and the
# randomness: shuffle, cut the order into pools of a few dozen batches, sort each pool
# by length, cut it into batches, and shuffle the batches. Such a sampler yields lists
# of indices, and a :class:`~torch.utils.data.DataLoader` takes it as ``batch_sampler``.
import math
from collections.abc import Iterator

from torch.utils.data import Sampler


class BucketBatchSampler(Sampler[list[int]]):
    def __init__(self, lengths, batch_size: int, pool_batches: int, generator) -> None:
        self.lengths, self.batch_size = lengths, batch_size
        self.pool = batch_size * pool_batches
        self.generator = generator

    def __iter__(self) -> Iterator[list[int]]:
        order = torch.randperm(len(self.lengths), generator=self.generator)
        batches = []
        for start in range(0, len(order), self.pool):
            pool = order[start : start + self.pool]
            pool = pool[self.lengths[pool].argsort(stable=True)]  # short to long
            batches += [
                pool[i : i + self.batch_size].tolist() for i in range(0, len(pool), self.batch_size)
            ]
        for i in torch.randperm(len(batches), generator=self.generator).tolist():
            yield batches[i]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)  # the last batch may be short


# %%
# The waste of each strategy, from a pool of one batch (the random batches again) to a
# pool of the whole dataset (sorted):
strategies = {"random": random_batches}
for pool_batches in (4, 16, 64):
    sampler = BucketBatchSampler(lengths, BATCH, pool_batches, gen)
    strategies[f"buckets of {pool_batches} batches"] = list(sampler)
sorted_order = lengths.argsort(stable=True).tolist()
strategies["sorted"] = [sorted_order[i : i + BATCH] for i in range(0, len(lengths), BATCH)]
wastes = {name: waste(batches) for name, batches in strategies.items()}
for name, w in wastes.items():
    print(f"{name:>22}: padding {w:.1%} of the slots")

# sphinx_gallery_start_ignore
for batches in strategies.values():  # every sequence exactly once
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
assert wastes["sorted"] <= wastes["buckets of 64 batches"] < wastes["random"]
# sphinx_gallery_end_ignore

# %%
# The sampler drives a loader as any batch sampler does; ``collate_fn`` pads each batch
# to its own longest sequence with :func:`torch.nn.utils.rnn.pad_sequence` and keeps the
# lengths, which the next sections need.
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

FEATURES = 8
sequences = [torch.randn(int(n), FEATURES, generator=gen) for n in lengths]  # (length, features)


def collate(items: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    padded = pad_sequence(items, batch_first=True)  # (batch, longest, features)
    return padded, torch.tensor([len(x) for x in items])


loader = DataLoader(
    sequences, batch_sampler=BucketBatchSampler(lengths, BATCH, 16, gen), collate_fn=collate
)
padded, batch_lengths = next(iter(loader))
print(f"one batch: {tuple(padded.shape)}, lengths {batch_lengths.min()}..{batch_lengths.max()}")

# %%
# What the padding costs in time
# ------------------------------
# A model computes on every slot, padding included, so an epoch of bucketed batches
# should take less time than one of random batches. Will the saving in time match the
# saving in slots, on this machine? Below, a small two-layer network runs over six
# batches of each batching, in alternating rounds.
from torch import nn

from effpt.bench import compare
from effpt.expect import expect
from effpt.records import speedup

net = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, FEATURES))
share = 6  # batches per timed call


def epoch(batches: list[list[int]]) -> None:
    with torch.no_grad():
        for b in batches[:share]:
            net(pad_sequence([sequences[i] for i in b], batch_first=True))  # (batch, longest, 8)


slots = {
    name: sum(len(b) * int(lengths[b].max()) for b in batches[:share])
    for name, batches in (
        ("random", random_batches),
        ("buckets", strategies["buckets of 16 batches"]),
    )
}
print(f"padded slots in the six batches: {slots}, ratio {slots['random'] / slots['buckets']:.1f}")
records = compare(
    "six batches",
    {
        "random": lambda: epoch(random_batches),
        "buckets": lambda: epoch(strategies["buckets of 16 batches"]),
    },
    device="cpu",
    repeats=6,
    number=1,
)
_ = expect(
    "six bucketed batches run faster than six random batches",
    speedup(records[0], records[1]),
    above=1.0,
    device="cpu",
)

# %%
# An RNN that skips the padding
# -----------------------------
# An RNN run over a padded batch reads the padding as input: the hidden state of a short
# sequence goes on changing after its last real step, and the last hidden state it
# returns is not that sequence's. :func:`torch.nn.utils.rnn.pack_padded_sequence` tells
# the RNN each sequence's length, so each one stops at its own end. Below, the same GRU
# runs on eight sequences of the padded batch with and without packing, and on each
# sequence alone.
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

gru = nn.GRU(FEATURES, 16, batch_first=True)
padded, batch_lengths = padded[:8], batch_lengths[:8]  # (8, longest, features), (8,)
with torch.no_grad():
    _, h_padded = gru(padded)  # h: (layers, batch, hidden)
    packed = pack_padded_sequence(padded, batch_lengths, batch_first=True, enforce_sorted=False)
    out_packed, h_packed = gru(packed)
    out_packed, _ = pad_packed_sequence(out_packed, batch_first=True)  # (batch, longest, hidden)
    alone = [gru(padded[i : i + 1, :n])[0][0] for i, n in enumerate(batch_lengths.tolist())]
    last_alone = torch.stack([a[-1] for a in alone])  # (batch, hidden)
print(
    f"largest difference from each sequence run alone, last hidden state: "
    f"padded {(h_padded[0] - last_alone).abs().max():.2e}, "
    f"packed {(h_packed[0] - last_alone).abs().max():.2e}"
)

# sphinx_gallery_start_ignore
for i, n in enumerate(batch_lengths.tolist()):
    torch.testing.assert_close(out_packed[i, :n], alone[i])
    assert (out_packed[i, n:] == 0).all()
torch.testing.assert_close(h_packed[0], last_alone)
assert (h_padded[0] - last_alone).abs().max() > 1e-3
# sphinx_gallery_end_ignore

# %%
# Attention over a jagged batch
# -----------------------------
# A nested tensor with ``layout=torch.jagged`` holds sequences of different lengths
# without padding: one buffer of all the real tokens and the offsets where each sequence
# starts. :func:`torch.nn.functional.scaled_dot_product_attention` accepts it with the
# heads in dimension 1, so each sequence attends only to its own tokens and there is no
# mask to build. Which kernels support it depends on the device and the release; the
# cell prints the reason if this one does not, and the warnings torch gives on the way
# (on the CPU it may fall back to its older, strided nested layout, which warns that it
# is a prototype).
import warnings

import torch.nn.functional as F

HEADS, DIM = 2, 4  # FEATURES = HEADS * DIM
items = [sequences[i] for i in range(6)]  # six sequences, each (length, 8)
try:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nt = torch.nested.nested_tensor(items, layout=torch.jagged)  # (6, j, 8)
        q = nt.unflatten(-1, (HEADS, DIM)).transpose(1, 2)  # (6, heads, j, dim)
        out = F.scaled_dot_product_attention(q, q, q).transpose(1, 2).flatten(-2)  # (6, j, 8)
    jagged = list(out.unbind())
    print(f"jagged attention: {len(jagged)} sequences, lengths {[len(o) for o in jagged]}")
except (RuntimeError, NotImplementedError, TypeError) as exc:
    jagged = None
    print(f"torch {torch.__version__} on the CPU: {type(exc).__name__}: {exc}")
for w in caught:
    print(f"warning: {str(w.message).splitlines()[0][:160]}")

# sphinx_gallery_start_ignore
if jagged is not None:
    for x, o in zip(items, jagged, strict=True):
        qx = x.unflatten(-1, (HEADS, DIM)).transpose(0, 1)  # (heads, length, dim)
        ref = F.scaled_dot_product_attention(qx, qx, qx).transpose(0, 1).flatten(-2)
        torch.testing.assert_close(o, ref)
# sphinx_gallery_end_ignore

# %%
# Varying lengths and ``torch.compile``
# -------------------------------------
# :func:`torch.compile` specialises a graph to the shapes it first sees. A new length
# makes it compile again; by default, that second compile marks the length dimension as
# dynamic, and its one graph serves every later length. ``dynamic=False`` keeps
# every length static, one graph each (up to a limit, after which it runs uncompiled);
# :func:`torch._dynamo.mark_dynamic` on the first input compiles a dynamic graph at
# once. The backend below only counts the graphs it is given, so the counts cost no
# compiler time; Inductor would receive the same graphs.
import torch._dynamo


def count_graphs(**options) -> tuple[list, object]:
    graphs = []  # the input shapes of each graph the backend receives

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        graphs.append([tuple(t.shape) for t in example_inputs if isinstance(t, torch.Tensor)])
        return gm.forward

    torch._dynamo.reset()

    def scores(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ x.transpose(-1, -2)).sum(-1)  # (batch, length)

    return graphs, torch.compile(scores, backend=backend, **options)


seen_lengths = [12, 20, 37, 45, 61]
counts = {}
for label, options, mark in (
    ("dynamic=False", {"dynamic": False}, False),
    ("default", {}, False),
    ("mark_dynamic", {}, True),
):
    graphs, fn = count_graphs(**options)
    for n in seen_lengths:
        x = torch.randn(4, n, FEATURES)  # (batch, length, features)
        if mark:
            torch._dynamo.mark_dynamic(x, 1)  # the length dimension may vary
        fn(x)
    counts[label] = len(graphs)
    print(f"{label:>13}: {len(graphs)} graphs for {len(seen_lengths)} lengths")

# sphinx_gallery_start_ignore
assert counts["dynamic=False"] == len(seen_lengths)
assert counts["default"] == 2
assert counts["mark_dynamic"] == 1
# sphinx_gallery_end_ignore

# %%
# The lengths and the waste
# -------------------------
# On the left, the skewed spread of lengths that makes random batches wasteful; on the
# right, the share of padding each batching leaves, from random batches to a full sort.
import matplotlib.pyplot as plt

fig, (ax_len, ax_waste) = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
ax_len.hist(lengths.numpy(), bins=torch.logspace(0.6, 2.41, 40).numpy(), color="C0")
ax_len.set_xscale("log")
ax_len.set(xlabel="length (tokens)", ylabel="sequences", title="4,000 lengths, log-normal")
names = list(wastes)
ax_waste.plot([100 * wastes[n] for n in names], range(len(names)), "o", color="C3")
ax_waste.set_yticks(range(len(names)), names)
ax_waste.invert_yaxis()
ax_waste.set(xlabel="padding, % of the slots", title="Waste per batching", xlim=(0, 100))
plt.show()

# %%
# Summary
# -------
# - Padding to the longest sequence of a random batch wastes a large share of the slots
#   when lengths are skewed; measure it on your own lengths with the sum above.
#
# - A batch sampler that sorts pools of a few dozen batches by length removes most of
#   the waste and keeps the batches shuffled; a full sort removes nearly all of it, but
#   the batches then repeat every epoch.
#
# - ``pack_padded_sequence`` keeps an RNN's outputs and last hidden states free of the
#   padding; without it, the last hidden state of a short sequence is wrong.
#
# - A jagged nested tensor holds a batch without padding, and
#   ``scaled_dot_product_attention`` accepts it (what each device supports varies by
#   release).
#
# - Under ``torch.compile``, varying lengths cost one graph per length with
#   ``dynamic=False``; the default compiles a dynamic graph at the second length, and
#   ``mark_dynamic`` at the first. Bucketing lengths to a few sizes is another way to
#   bound the number of graphs.
#
# Related pages: :doc:`plot_datasets_and_dataloader` for samplers and ``collate_fn``.
