"""
Attention with scaled_dot_product_attention
===========================================

.. effpt-before-you-start::
   :learn: - Check SDPA against attention written by hand, with boolean, additive and
             causal masks, and see what each returns for a row with every position
             masked.
           - Time both as the sequence grows, and count the bytes of the score matrix
             the hand-written version stores.
           - Find which SDPA kernel ran with the profiler, and restrict the choice with
             ``sdpa_kernel``.
           - Pass ``dropout_p`` only while training, and write a variant of attention as
             a FlexAttention ``mask_mod`` or ``score_mod``.
   :read-first: :doc:`plot_profile_a_training_step` for the profiler's tables;
                :doc:`/explanations/timing` for how the timings are measured.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU). Only on CUDA does it time in
           float16 up to ``L = 8192``, measure peak memory and compile FlexAttention
           with :func:`torch.compile`; elsewhere it runs FlexAttention uncompiled, or
           prints why it could not.

Attention written by hand builds a matrix of scores with one row and one column per
position of the sequence, keeps it in memory and runs several kernels over it.
:func:`torch.nn.functional.scaled_dot_product_attention` (SDPA) computes the same
function in one call, and lets PyTorch pick a fused kernel that need not store that
matrix. This page checks that the two agree, with masks, causal attention and dropout;
times both and counts their memory as the sequence grows; shows which kernel ran; and
ends with FlexAttention, which takes variants of attention written as Python functions.
"""

# %%
# Attention, written by hand
# --------------------------
# Each of ``L`` query vectors is compared with each of ``L`` key vectors; the scores,
# divided by the square root of the head dimension and turned into weights by a
# softmax, average the value vectors. PyTorch's documentation of the function gives
# this same reference in Python. The sizes below are the page's, per device; on CUDA
# the timings use float16, a dtype every fused kernel there accepts.
import math

import torch
import torch.nn.functional as F

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))
batch, heads, head_dim = 1, 8, 64
max_len = {"cuda": 8192, "mps": 2048}.get(device.type, 512)  # longest sequence timed
dtype = torch.float16 if device.type == "cuda" else torch.float32  # the timings' dtype


def attention(q, k, v, mask=None):
    """softmax(q kᵀ / sqrt(d)) v; a bool mask keeps True, a float mask is added."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (batch, heads, L, L)
    if mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, float("-inf"))
    elif mask is not None:
        scores = scores + mask
    return scores.softmax(dim=-1) @ v  # (batch, heads, L, head_dim)


def qkv(length, dtype=torch.float32):
    shape = (batch, heads, length, head_dim)  # (batch, heads, L, head_dim)
    return [torch.randn(shape, device=device, dtype=dtype) for _ in range(3)]


# %%
# The same numbers, up to rounding
# --------------------------------
# The two compute the same sums in different orders, so they agree up to rounding. A
# score is a dot product of ``head_dim`` terms and an output a weighted sum of ``L``
# values; the usual bound for the rounding of a sum of ``n`` terms is about ``n``
# times the dtype's machine epsilon, so ``(head_dim + L) * eps`` is the tolerance
# below, in float64 where the device has it (Apple's MPS does not) and in float32.
# The printed gap is also given in units of epsilon.
length = 256
dtypes = [torch.float32] if device.type == "mps" else [torch.float64, torch.float32]
for dt in dtypes:
    q, k, v = qkv(length, dt)
    gap = (F.scaled_dot_product_attention(q, k, v) - attention(q, k, v)).abs().max().item()
    eps = torch.finfo(dt).eps
    tol = (head_dim + length) * eps
    print(f"{dt}: largest gap {gap:.1e} = {gap / eps:.1f} eps; tolerance {tol:.1e}")
    # sphinx_gallery_start_ignore
    torch.testing.assert_close(
        F.scaled_dot_product_attention(q, k, v), attention(q, k, v), rtol=tol, atol=tol
    )
    # sphinx_gallery_end_ignore

# %%
# Masks: boolean, additive, causal
# --------------------------------
# ``attn_mask`` takes two kinds of masks. In a boolean mask ``True`` means "may attend",
# the opposite of the boolean ``attn_mask`` of :class:`torch.nn.MultiheadAttention`,
# where ``True`` forbids. A float mask is added to the scores: ``0`` keeps a
# position, ``-inf`` removes it, and any other number biases it. ``is_causal=True``
# lets each position attend to itself and the ones before it, without a mask tensor.
# All three below give the same output as the hand-written function with a causal mask
# built from :func:`torch.tril`.
q, k, v = qkv(length)
causal = torch.ones(length, length, dtype=torch.bool, device=device).tril()  # (L, L)
additive = torch.zeros(length, length, device=device).masked_fill(~causal, float("-inf"))
reference = attention(q, k, v, causal)
outputs = {
    "is_causal=True": F.scaled_dot_product_attention(q, k, v, is_causal=True),
    "boolean mask": F.scaled_dot_product_attention(q, k, v, attn_mask=causal),
    "additive mask": F.scaled_dot_product_attention(q, k, v, attn_mask=additive),
}
tol = (head_dim + length) * torch.finfo(torch.float32).eps
for name, out in outputs.items():
    print(
        f"{name:>15}: largest gap to the hand-built causal mask {(out - reference).abs().max():.1e}"
    )

# sphinx_gallery_start_ignore
for out in outputs.values():
    torch.testing.assert_close(out, reference, rtol=tol, atol=tol)
# sphinx_gallery_end_ignore

# %%
# A row in which every position is masked has nothing to average. The hand-written
# softmax sees only ``-inf`` in that row and returns NaN. Since PyTorch 2.5, SDPA's
# math kernel returns zeros for such a row instead (the pull request "Add a private
# _safe_softmax" in PyTorch's repository gives the reasons). Each fused kernel handles
# such a row in its own code, so the cell prints what the math kernel and the kernel
# picked here return.
from torch.nn.attention import SDPBackend, sdpa_kernel

row_masked = causal.clone()
row_masked[3] = False  # position 3 may attend to nothing
by_hand = attention(q, k, v, row_masked)[0, 0, 3]
default = F.scaled_dot_product_attention(q, k, v, attn_mask=row_masked)[0, 0, 3]
with sdpa_kernel(SDPBackend.MATH):
    math_kernel = F.scaled_dot_product_attention(q, k, v, attn_mask=row_masked)[0, 0, 3]
print(f"by hand: {by_hand[:3].tolist()} ...")
print(
    f"SDPA, math kernel: {math_kernel[:3].tolist()} ...; kernel picked here: {default[:3].tolist()} ..."
)

# sphinx_gallery_start_ignore
assert torch.isnan(by_hand).all()
if device.type in ("cpu", "cuda"):  # the generic math kernel; MPS has its own
    assert torch.equal(math_kernel, torch.zeros_like(math_kernel)), math_kernel
# sphinx_gallery_end_ignore

# %%
# Time as the sequence grows
# --------------------------
# The hand-written version writes ``L × L`` scores per head to memory, reads them back
# for the softmax, writes the weights and reads them again for the product with the
# values. A fused kernel (flash attention, introduced by Tri Dao and colleagues in
# 2022) works through the keys block by block with a running softmax, so the scores
# stay in cache or registers. On a GPU, memory traffic usually dominates; on a CPU,
# the hand-written version's two large matrix products run on a tuned BLAS, which the
# fused kernel has to beat block by block.
#
# Each length is timed with :func:`effpt.bench.compare` (how it measures:
# :doc:`/explanations/timing`) on all of PyTorch's threads, the longest also on one
# thread, since the thread pool splits the two versions differently. Predict first: at
# the longest length, is SDPA faster on your machine? On one thread?
from effpt.bench import compare, format_seconds
from effpt.records import speedup


def both(q, k, v):
    """The two versions as functions of no arguments, for timing."""
    return {
        "by hand": lambda: attention(q, k, v),
        "SDPA": lambda: F.scaled_dot_product_attention(q, k, v),
    }


lengths = [2**n for n in range(6, max_len.bit_length())]  # 64, 128, ..., max_len
threads = torch.get_num_threads()
times, ratios = {}, {}
for n in lengths:
    q, k, v = qkv(n, dtype)
    records = compare(
        f"attention, L={n}",
        both(q, k, v),
        device=device,
        budget_s=0.3,
        show=False,
    )
    times[n] = [r.median_s for r in records]
    ratios[n] = speedup(records[0], records[1])

where = f"{threads} thread{'s' if threads > 1 else ''}" if device.type == "cpu" else device.type
print(f"{dtype}, {where}")
print(f"{'L':>6} {'by hand':>10} {'SDPA':>10}  SDPA's speed-up")
for n in lengths:
    hand, fused = (format_seconds(t) for t in times[n])
    print(f"{n:>6} {hand:>10} {fused:>10}  {ratios[n]} {ratios[n].verdict}")

# %%
# Each ratio comes with the interval its spread allows; "inconclusive" means the two
# cannot be told apart here. At short lengths the scores fit in cache anyway and a
# fused kernel has little to save, so either version may win there; the traffic it
# saves grows as ``L²``. The cell prints the shortest length from which every longer
# one was decisively faster with SDPA, and states two expectations: SDPA wins at the
# longest length, and by more there than at the shortest.
from effpt.expect import expect

faster = [
    n for i, n in enumerate(lengths) if all(ratios[m].verdict == "faster" for m in lengths[i:])
]
print(
    f"SDPA decisively faster from L={faster[0]} on"
    if faster
    else "SDPA not decisively faster at the longest length here"
)
_ = expect(
    f"SDPA beats attention written by hand at L={max_len} ({dtype}, {where})",
    ratios[max_len],
    above=1.0,
    device=device,
)
_ = expect(
    f"SDPA's speed-up over the hand-written attention is larger at L={max_len} than at L={lengths[0]}",
    ratios[max_len] / ratios[lengths[0]],
    above=1.0,
    device=device,
)

# %%
# On one thread there is no pool to split the work, so the comparison is between the
# two kernels alone. Where the device is a GPU, or the CPU runs one thread already,
# the cell says so instead.
from effpt.bench import on_one_thread

one = on_one_thread(
    lambda: compare(
        f"attention, L={max_len}, 1 thread", both(q, k, v), device=device, budget_s=0.3
    ),
    device,
)
if one is not None:  # None: a GPU, or one thread already; it printed which
    timed, one_thread = one
    _ = expect(
        f"SDPA beats attention written by hand at L={max_len} ({dtype}, 1 thread)",
        speedup(timed[0], timed[1]),
        above=1.0,
        device=one_thread,  # the machine as it ran: one thread
    )

# %%
# Memory: the score matrix
# ------------------------
# The hand-written version holds ``batch × heads × L × L`` scores, and at its peak
# about two such tensors at once (the scaled scores and the softmax weights); the
# inputs and the output grow only as ``L``, so one score matrix outweighs q, k, v and
# the output together once ``L`` passes ``4 × head_dim``. That is arithmetic, true on
# every device.
# On CUDA the cell also measures the peak memory each version adds; on a CPU or MPS
# PyTorch keeps no peak statistic, so the arithmetic is what this page shows there.
itemsize = torch.finfo(dtype).bits // 8
score_bytes = {n: batch * heads * n * n * itemsize for n in lengths}
io_bytes = {n: 4 * batch * heads * n * head_dim * itemsize for n in lengths}  # q, k, v, output
for n in (lengths[0], max_len):
    print(
        f"L={n}: one score matrix {score_bytes[n] / 2**20:.1f} MiB; q, k, v and output {io_bytes[n] / 2**20:.2f} MiB"
    )

# sphinx_gallery_start_ignore
q0, k0, _ = qkv(lengths[0], dtype)
assert (q0 @ k0.transpose(-2, -1)).nbytes == score_bytes[lengths[0]]
assert all((score_bytes[n] > io_bytes[n]) == (n > 4 * head_dim) for n in lengths)
# sphinx_gallery_end_ignore

peak = {}
if device.type == "cuda":
    q, k, v = qkv(max_len, dtype)
    for name, fn in (("by hand", attention), ("SDPA", F.scaled_dot_product_attention)):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = fn(q, k, v)
        torch.cuda.synchronize()
        peak[name] = torch.cuda.max_memory_allocated() - before
        print(f"{name}: peak {peak[name] / 2**20:.1f} MiB above the inputs, output included")
        del out
    expect(
        f"SDPA's peak memory at L={max_len} is below the hand-written version's",
        peak["SDPA"] / peak["by hand"],
        below=1.0,
        device=device,
    )
else:
    print(f"{device.type}: no peak-memory statistic; the arithmetic above stands for it")

# %%
# The figure puts both on a log-log scale: on the left, time against length for both
# versions (a slope of 2 means time grows as ``L²``); on the right, the bytes of one
# score matrix against those of the inputs and output, with the measured peaks on CUDA.
import matplotlib.pyplot as plt

fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(8, 3.4), layout="constrained")
for i, name in enumerate(("by hand", "SDPA")):
    ax_t.plot(lengths, [times[n][i] for n in lengths], "o-", label=name)
ax_t.set(yscale="log", xlabel="sequence length L", ylabel="seconds per call")
ax_t.set_title(f"time, {dtype}, {where}")
ax_m.plot(lengths, [score_bytes[n] for n in lengths], "o-", label="one score matrix (L²)")
ax_m.plot(lengths, [io_bytes[n] for n in lengths], "s-", label="q, k, v and output (L)")
for name, marker in (("by hand", "x"), ("SDPA", "+")):
    if name in peak:
        ax_m.plot([max_len], [peak[name]], marker, ms=10, label=f"measured peak, {name}")
ax_m.set(yscale="log", xlabel="sequence length L", ylabel="bytes", title="memory")
for ax in (ax_t, ax_m):
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) for n in lengths], minor=False)
    ax.minorticks_off()
ax_t.legend()
ax_m.legend(fontsize="small")
plt.show()

# %%
# Which kernel ran
# ----------------
# SDPA has several kernels: ``MATH`` (the reference, built from ordinary operations),
# ``FLASH_ATTENTION``, ``EFFICIENT_ATTENTION`` (memory-efficient attention),
# ``CUDNN_ATTENTION``, and ``OVERRIDEABLE`` for kernels other devices bring. In its
# own order of preference, it picks the first one whose conditions the inputs meet
# (dtype, device, head dimension, mask, dropout);
# :func:`torch.nn.attention.sdpa_kernel` restricts the choice, and SDPA raises when no
# allowed kernel fits. A CPU has two: ``MATH`` and a flash kernel of its own.
#
# The profiler (:mod:`torch.profiler`) names the operator that ran. Each kernel below
# is allowed alone, as PyTorch's tutorial "Implementing High-Performance Transformers
# with Scaled Dot Product Attention" does to time them; where SDPA warns why a kernel
# could not run, the first line of each warning is printed.
import warnings

from torch.profiler import profile

q, k, v = qkv(length, dtype)


def kernel_that_ran(**kwargs):
    with profile() as prof:
        F.scaled_dot_product_attention(q, k, v, **kwargs)
    names = {e.key for e in prof.key_averages() if "_scaled_dot_product" in e.key}
    return ", ".join(sorted(names))


print(f"no restriction, {device.type}, {dtype}: {kernel_that_ran()}")
ran = {}
for backend in ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION"):
    with warnings.catch_warnings(record=True) as caught, sdpa_kernel(getattr(SDPBackend, backend)):
        warnings.simplefilter("always")
        try:
            ran[backend] = kernel_that_ran()
            print(f"{backend:>19}: ran {ran[backend]}")
        except RuntimeError as exc:
            print(f"{backend:>19}: RuntimeError: {str(exc).splitlines()[0]}")
    for w in caught:
        print(f"{'':>21}warning: {str(w.message).splitlines()[0]}")

# sphinx_gallery_start_ignore
if device.type == "cpu":
    assert set(ran) == {"MATH", "FLASH_ATTENTION"}, ran
    assert ran["MATH"] == "aten::_scaled_dot_product_attention_math", ran
# sphinx_gallery_end_ignore

# %%
# Dropout, only while training
# ----------------------------
# ``dropout_p`` is an argument of a function, not a module, so SDPA does not know
# whether the model is training: it drops weights whenever ``dropout_p > 0``. A module
# passes ``dropout_p=self.p if self.training else 0.0`` itself, as below. To see the
# dropped weights, the values are set to the identity matrix: the output is then the
# weight matrix itself, after dropout (kept weights scaled by ``1 / (1 - p)``). The
# math kernel calls the same dropout as :func:`torch.nn.functional.dropout`, so with
# the same seed it zeroes the same weights as that function applied to the
# hand-written weights; fused kernels draw their random numbers their own way.
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0)


q, k, _ = qkv(16)
eye = torch.eye(16, device=device).expand(batch, heads, 16, 16)  # (batch, heads, L, L)
layer = SelfAttention(p=0.5)
first, second = layer(q, k, eye), layer(q, k, eye)
print(
    f"training: two calls equal? {torch.equal(first, second)}; zeroed {(first == 0).float().mean():.2f} of the weights"
)
layer.eval()
print(
    f"eval: equal to SDPA without dropout? {torch.equal(layer(q, k, eye), F.scaled_dot_product_attention(q, k, eye))}"
)
torch.manual_seed(1)
with sdpa_kernel(SDPBackend.MATH):
    dropped = F.scaled_dot_product_attention(q, k, eye, dropout_p=0.5)
torch.manual_seed(1)
by_hand = F.dropout(attention(q, k, eye), p=0.5)
print(f"math kernel and F.dropout zero the same weights: {torch.equal(dropped == 0, by_hand == 0)}")

# sphinx_gallery_start_ignore
assert not torch.equal(first, second)
assert torch.equal(layer(q, k, eye), F.scaled_dot_product_attention(q, k, eye))
if device.type == "cpu":
    assert torch.equal(dropped == 0, by_hand == 0)
    torch.testing.assert_close(dropped, by_hand)
# sphinx_gallery_end_ignore

# %%
# FlexAttention: variants written as Python
# -----------------------------------------
# A new variant of attention (a relative-position bias, a sliding window) needs a mask
# tensor with SDPA (a float one for a bias), again ``L × L`` numbers. FlexAttention
# (:func:`torch.nn.attention.flex_attention.flex_attention`, described in PyTorch's
# blog post "FlexAttention: The Flexibility of PyTorch with the Performance of
# FlashAttention") takes the variant as a function instead: a ``score_mod`` that
# changes one score, or a ``mask_mod`` that says whether one query may see one key,
# which :func:`~torch.nn.attention.flex_attention.create_block_mask` turns into a list
# of blocks to skip.
#
# :func:`torch.compile` fuses them into a kernel; uncompiled, FlexAttention
# materialises the scores and warns so. Below: a causal ``mask_mod``, and a
# ``score_mod`` that subtracts a penalty growing with the distance between query and
# key, one slope per head.
try:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
except ImportError:
    flex_attention = None


def causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def distance_bias(score, b, h, q_idx, kv_idx):
    return score - 0.1 * (h + 1) * (q_idx - kv_idx).abs()  # one slope per head


# %%
# On a CPU, compiling FlexAttention builds a C++ kernel (torch 2.6 and later); to keep
# its run time short, this page compiles it on CUDA only. Where it runs uncompiled,
# the cell prints the first line of its warning. Each result is compared with SDPA:
# ``is_causal=True`` for the mask, and for the bias a float mask that holds the same
# penalties, ``heads × L × L`` numbers.
length = 128
q, k, v = qkv(length)
flex_ran = False
if flex_attention is None:
    print(f"torch {torch.__version__} has no FlexAttention: skipped")
else:
    flex = torch.compile(flex_attention) if device.type == "cuda" else flex_attention
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            block_mask = create_block_mask(causal_mask, None, None, length, length, device=device)
            flex_causal = flex(q, k, v, block_mask=block_mask)
            flex_bias = flex(q, k, v, score_mod=distance_bias)
            flex_ran = True
        except (RuntimeError, NotImplementedError) as exc:
            print(
                f"FlexAttention did not run on {device.type} with torch {torch.__version__}: {exc}"
            )
    uncompiled = [str(w.message) for w in caught if "without torch.compile" in str(w.message)]
    for message in uncompiled[:1]:
        print(f"warning: {message.splitlines()[0]}")
if flex_ran:
    pos = torch.arange(length, device=device)
    slopes = 0.1 * torch.arange(1, heads + 1, device=device).view(heads, 1, 1)  # (heads, 1, 1)
    bias = -slopes * (pos.view(-1, 1) - pos.view(1, -1)).abs()  # (heads, L, L)
    sdpa_causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    sdpa_bias = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    print(
        f"{'compiled' if flex is not flex_attention else 'uncompiled'} FlexAttention on {device.type}:"
    )
    print(
        f"  causal mask_mod vs SDPA is_causal=True: largest gap {(flex_causal - sdpa_causal).abs().max():.1e}"
    )
    print(
        f"  distance score_mod vs SDPA with a float mask: largest gap {(flex_bias - sdpa_bias).abs().max():.1e}"
    )

# sphinx_gallery_start_ignore
assert flex_ran or device.type == "mps"
if flex_ran:
    torch.testing.assert_close(flex_causal, sdpa_causal, rtol=tol, atol=tol)
    torch.testing.assert_close(flex_bias, sdpa_bias, rtol=tol, atol=tol)
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - :func:`~torch.nn.functional.scaled_dot_product_attention` computes
#   ``softmax(q kᵀ / sqrt(d)) v`` and agrees with the hand-written version up to the
#   rounding of the dtype.
#
# - A boolean ``attn_mask`` keeps ``True``; a float mask is added to the scores;
#   ``is_causal=True`` needs no mask tensor. A fully masked row is NaN by hand.
#
# - The hand-written version stores ``L × L`` scores per head; whether SDPA is faster
#   depends on the kernel and the device: read the verdicts above, and measure on your
#   own.
#
# - :func:`~torch.nn.attention.sdpa_kernel` restricts the kernels, and SDPA raises when
#   none fits; the profiler shows which one ran.
#
# - Pass ``dropout_p`` only while training.
#
# - FlexAttention takes a variant as a Python function; compiled, it runs as a fused
#   kernel; uncompiled, it materialises the scores and warns.
