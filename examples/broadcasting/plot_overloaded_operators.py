"""
Write tensor code with Python's operators, and know what each one does
======================================================================

.. effpt-before-you-start::
   :learn: - Name the function behind each Python operator, and tell where ``&``, ``|``,
             ``^`` and ``~`` are logical and where they are bitwise.
           - Tell ``x += y``, which writes in place, from ``x = x + y``, and know when
             autograd refuses or catches the in-place one.
           - Replace ``and``, ``or`` and ``not`` by ``&``, ``|`` and ``~``, with parentheses.
           - Time a loop of indexing against ``unbind`` and one ``torch.sum``, and read the
             verdicts.
   :read-first: :doc:`/auto_examples/basics/plot_autograd` for leaves, ``grad_fn`` and
                ``backward()``; :doc:`/explanations/timing` for how the loops are timed.
   :needs: A CPU is enough. The page runs on a CUDA or Apple MPS GPU when there is one
           (``EFFPT_DEVICE=cpu`` keeps it on the CPU), and then also times the row sums of
           a ``(500, 10)`` matrix on the CPU.

PyTorch overloads Python's operators, so tensor code can read like the formula it
implements. Each operator is a call to a named function, and knowing which one tells
you when the result is a view, when it is in place, when it is bitwise rather than
logical, and what a loop of them costs. This page checks every operator against its
function, shows three traps, and times a loop of indexing against one reduction.
"""

# %%
# Every operator is a function call
# ---------------------------------
# The table below evaluates each expression and the function call it stands for, and
# checks that they return equal tensors, element for element. ``x`` and ``y`` are floats
# (``y`` positive, so ``/``, ``//``, ``%`` and ``**`` are defined everywhere), ``p``
# and ``q`` booleans, ``i`` and ``j`` integers.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

x = torch.randn(4, 4, device=device)
y = torch.rand(4, 4, device=device) + 0.5
p, q = torch.rand(2, 4, 4, device=device) > 0.5  # two (4, 4) boolean tensors
i = torch.randint(-8, 8, (4, 4), device=device)
j = torch.randint(1, 8, (4, 4), device=device)
names = {"torch": torch, "x": x, "y": y, "p": p, "q": q, "i": i, "j": j}

# %%
# :func:`eval` runs each string as written, so the table shows exactly the code that
# ran. Read the rows for ``&``, ``|``, ``^`` and ``~`` twice: they always call the
# bitwise functions, which on booleans give the logical results shown, and on integers
# work bit by bit.
table = [
    ("-x", "torch.neg(x)"), ("x + y", "torch.add(x, y)"), ("x - y", "torch.sub(x, y)"),
    ("x * y", "torch.mul(x, y)"), ("x / y", "torch.div(x, y)"),
    ("x // y", "torch.floor_divide(x, y)"), ("x % y", "torch.remainder(x, y)"),
    ("y ** x", "torch.pow(y, x)"), ("x @ y", "torch.matmul(x, y)"),
    ("x > y", "torch.gt(x, y)"), ("x >= y", "torch.ge(x, y)"), ("x < y", "torch.lt(x, y)"),
    ("x <= y", "torch.le(x, y)"), ("x == y", "torch.eq(x, y)"), ("x != y", "torch.ne(x, y)"),
    ("abs(x)", "torch.abs(x)"),
    ("p & q", "torch.logical_and(p, q)"), ("p | q", "torch.logical_or(p, q)"),
    ("p ^ q", "torch.logical_xor(p, q)"), ("~p", "torch.logical_not(p)"),
    ("i & j", "torch.bitwise_and(i, j)"), ("i | j", "torch.bitwise_or(i, j)"),
    ("i ^ j", "torch.bitwise_xor(i, j)"), ("~i", "torch.bitwise_not(i)"),
]  # fmt: skip
print(f"{'operator':<10}{'function':<26}{'result dtype':<15}same result")
same = []
for expression, function in table:
    by_operator, by_function = eval(expression, names), eval(function, names)
    same.append(torch.equal(by_operator, by_function))
    print(f"{expression:<10}{function:<26}{by_operator.dtype!s:<15}{same[-1]}")

# sphinx_gallery_start_ignore
assert all(same), [row for row, ok in zip(table, same, strict=True) if not ok]
# sphinx_gallery_end_ignore

# %%
# Two operators deserve a second look. ``~`` on an integer flips its bits (``~5`` is
# ``-6``), which is not :func:`torch.logical_not`, and on a float it is a
# ``TypeError``. ``%`` follows Python's sign rule (:func:`torch.remainder`, the sign of
# the divisor), unlike :func:`torch.fmod`, which follows C's (the sign of the dividend).
k = torch.tensor([5, 0], device=device)
print("~k =", k.tolist(), "->", (~k).tolist(), " logical_not(k) =", torch.logical_not(k).tolist())
try:
    ~x
except TypeError as err:
    print("~x on floats -> TypeError:", err)
minus_seven = torch.tensor([-7.0], device=device)
print("-7 % 2 =", (minus_seven % 2).item(), " fmod(-7, 2) =", torch.fmod(minus_seven, 2).item())

# sphinx_gallery_start_ignore
assert (~k).tolist() == [-6, -1] and torch.logical_not(k).tolist() == [False, True]
assert (minus_seven % 2).item() == 1.0 and torch.fmod(minus_seven, 2).item() == -1.0
# sphinx_gallery_end_ignore

# %%
# Augmented assignment works in place
# -----------------------------------
# ``x += y`` calls ``x.add_(y)``: the result goes into the memory ``x`` already owns,
# so every other name for that tensor sees the change. ``x = x + y`` makes a new tensor
# and rebinds the name; the old tensor, and its other names, are untouched. The data
# pointer (:meth:`torch.Tensor.data_ptr`) tells the two apart.
z = torch.zeros(3, device=device)
alias = z
address = z.data_ptr()
z += 1
print(f"z += 1    -> same memory: {z.data_ptr() == address}, alias = {alias.tolist()}")
z = z + 1
print(f"z = z + 1 -> same memory: {z.data_ptr() == address}, alias = {alias.tolist()}")

# sphinx_gallery_start_ignore
assert alias.tolist() == [1.0, 1.0, 1.0] and z.tolist() == [2.0, 2.0, 2.0]
assert z.data_ptr() != address
# sphinx_gallery_end_ignore

# %%
# Autograd cares, in two ways. First, a leaf that requires grad (a tensor you created
# yourself, such as a parameter) refuses an in-place update. Autograd does record
# in-place operations: it makes the operation the tensor's new ``grad_fn``. Done to a
# leaf, that would turn it into the output of an operation: the tensor would no longer
# hold the value its gradient is for, and its ``.grad``, where
# :meth:`~torch.Tensor.backward` accumulates a leaf's gradient, would stop being filled.
# So PyTorch raises instead. On ``v``, which is not a leaf, the same ``+=`` is recorded:
# watch its ``grad_fn``. Optimizers update parameters under :func:`torch.no_grad`,
# where nothing is recorded and the leaf stays a leaf.
weight = torch.ones(3, device=device, requires_grad=True)
try:
    weight += 1
except RuntimeError as err:
    print("weight += 1 on a leaf -> RuntimeError:", err)

v = weight * 2  # the output of an operation: not a leaf
print(f"v = weight * 2:   grad_fn {type(v.grad_fn).__name__}, is_leaf {v.is_leaf}")
v += 1
print(f"after v += 1:     grad_fn {type(v.grad_fn).__name__}, is_leaf {v.is_leaf}")
with torch.no_grad():
    weight -= 0.5  # what an optimizer's step does
print(
    f"weight, stepped under no_grad: {weight.tolist()}, grad_fn {weight.grad_fn}, leaf {weight.is_leaf}"
)

# sphinx_gallery_start_ignore
assert type(v.grad_fn).__name__ == "AddBackward0" and not v.is_leaf
assert weight.is_leaf and weight.grad_fn is None and weight.tolist() == [0.5, 0.5, 0.5]
# sphinx_gallery_end_ignore

# %%
# Second, an in-place change to a tensor saved for the backward pass (here the output
# of :func:`torch.exp`, which its gradient reuses) is caught when ``backward()`` runs.
w = torch.ones(3, device=device, requires_grad=True)
h = torch.exp(w)  # exp keeps its output for the backward pass
h += 1
try:
    h.sum().backward()
except RuntimeError as err:
    print("backward after h += 1 -> RuntimeError:", str(err).split(":")[0])

# %%
# The out-of-place version leaves the saved output alone, and the gradient is right:
# the derivative of ``exp(w) + 1`` is ``exp(w)``, which is e ≈ 2.718 at ``w = 1``.
h = torch.exp(w)
h = h + 1
h.sum().backward()
print("gradient after h = h + 1:", w.grad)

# sphinx_gallery_start_ignore
assert torch.allclose(w.grad, torch.full_like(w, torch.e))
# sphinx_gallery_end_ignore

# %%
# ``and``, ``or`` and ``not`` are not operators you can overload
# ----------------------------------------------------------------
# Python evaluates ``and``, ``or`` and ``not`` by asking each operand for a single
# ``True`` or ``False``, and a tensor of several elements has no single truth value.
# Use ``&``, ``|`` and ``~`` (or :func:`torch.logical_and` and friends) instead.
a = torch.tensor([2, -1, 3], device=device)
b = torch.tensor([1, 1, -2], device=device)
try:
    (a > 0) and (b > 0)
except RuntimeError as err:
    print("(a > 0) and (b > 0) -> RuntimeError:", err)
print("(a > 0) & (b > 0)   ->", ((a > 0) & (b > 0)).tolist())

# sphinx_gallery_start_ignore
assert ((a > 0) & (b > 0)).tolist() == [True, False, False]
# sphinx_gallery_end_ignore

# %%
# The precedence trap: ``&`` binds tighter than ``>``, so ``a > 0 & b > 0`` means
# ``a > (0 & b) > 0``, a chained comparison that Python evaluates with ``and``. With
# several elements that raises the error above; with a single integer element it runs,
# and since ``0 & b`` is 0 it returns False whatever the values: wrong whenever both are
# positive. Parentheses fix it.
a1 = torch.tensor([2], device=device)
b1 = torch.tensor([1], device=device)
unparenthesised = a1 > 0 & b1 > 0  # the trap, written on purpose
parenthesised = (a1 > 0) & (b1 > 0)
print("a1 > 0 & b1 > 0     ->", unparenthesised.tolist(), " (wrong)")
print("(a1 > 0) & (b1 > 0) ->", parenthesised.tolist())

# sphinx_gallery_start_ignore
assert unparenthesised.tolist() == [False] and parenthesised.tolist() == [True]
# sphinx_gallery_end_ignore

# %%
# Indexing has a cost
# -------------------
# Indexing and slicing are overloaded too. ``t[2:5]`` is the view
# :meth:`torch.Tensor.narrow` returns, ``t.narrow(0, 2, 3)`` (dimension, start,
# length): no data is copied, but each call is still one operator with a fixed cost of
# its own, whatever the size of the view.
t = torch.arange(10.0, device=device)
view, narrowed = t[2:5], t.narrow(0, 2, 3)
print(view.tolist(), narrowed.tolist(), "same memory:", view.data_ptr() == narrowed.data_ptr())

# sphinx_gallery_start_ignore
assert torch.equal(view, narrowed) and view.data_ptr() == narrowed.data_ptr()
# sphinx_gallery_end_ignore

# %%
# To feel that cost, add up the rows of a ``(rows, 10)`` matrix three ways: index one
# row at a time, split the matrix into rows once with :func:`torch.unbind`, or call
# :func:`torch.sum` once. The two loops run one small ``+=`` per row; the sum runs one
# operator for the whole matrix.


def indexing_loop(m):
    total = torch.zeros(m.shape[1], device=m.device)
    for r in range(m.shape[0]):
        total += m[r]
    return total


def unbind_loop(m):
    total = torch.zeros(m.shape[1], device=m.device)
    for row in torch.unbind(m):
        total += row
    return total


def one_sum(m):
    return torch.sum(m, dim=0)


m = torch.rand(500, 10, device=device)
loops_agree = [torch.allclose(f(m), one_sum(m), atol=1e-4) for f in (indexing_loop, unbind_loop)]
print("both loops agree with torch.sum:", loops_agree)

# sphinx_gallery_start_ignore
assert all(loops_agree)
# sphinx_gallery_end_ignore

# %%
# :func:`effpt.bench.compare` times the three at a few matrix heights and prints each
# speed-up with its interval and verdict (:doc:`/explanations/timing` says how it
# measures). Each operator in the loops handles ten numbers, so on every device its
# fixed cost outweighs its arithmetic, and the same sizes serve CPU and GPU.
from effpt.bench import compare, format_seconds, speedup
from effpt.expect import expect

row_counts = [100, 500, 2000]


def time_row_sums(rows, on=device):
    m = torch.rand(rows, 10, device=on)  # (rows, 10)
    variants = {
        "m[i] loop": lambda: indexing_loop(m),
        "unbind loop": lambda: unbind_loop(m),
        "torch.sum": lambda: one_sum(m),
    }
    records = compare(f"row sum {rows}×10", variants, device=on)
    print()
    return {r.variant: r for r in records}


timings = {rows: time_row_sums(rows) for rows in row_counts}
guide_size = timings[500]  # the Effective PyTorch guide timed a (500, 10) matrix on a CPU
if device.type != "cpu":  # so its size is timed on the CPU too
    print("The guide's size on the CPU, where the guide measured it:")
    guide_size = time_row_sums(500, on=torch.device("cpu"))

# %%
# Below are both speed-ups at each height, and the cost of one row in the indexing
# loop: mostly the fixed cost of two small operators ("What the unbind loop saves",
# below, splits it).
print(
    f"{'rows':>6}  {'per row, m[i] loop':<20}{'unbind loop vs m[i] loop':<38}torch.sum vs m[i] loop"
)
for rows, records in timings.items():
    per_row = format_seconds(records["m[i] loop"].median_s / rows)
    by_unbind = speedup(records["m[i] loop"], records["unbind loop"])
    by_sum = speedup(records["m[i] loop"], records["torch.sum"])
    unbind_text = f"{by_unbind} {by_unbind.verdict}"
    print(f"{rows:>6}  {per_row:<20}{unbind_text:<38}{by_sum} {by_sum.verdict}")

# %%
# The Effective PyTorch guide reported both speed-ups for a ``(500, 10)`` matrix on
# its author's CPU. Its claims are written once, in :mod:`effpt.claims`, which this
# page and the site's :doc:`/measurements` page both read;
# :meth:`~effpt.claims.Claim.check` prints each one beside this run's ratio at that
# size on a CPU, with a verdict: "yes" when the whole interval reaches the claim,
# "nearly" when it lies within 15 % below it, "no" when it lies lower, "inconclusive"
# when the interval straddles either line or rests on one sample.
from effpt.claims import claim

claim("guide: unbind over indexing").check(guide_size["m[i] loop"], guide_size["unbind loop"])
_ = claim("guide: torch.sum over a row loop").check(
    guide_size["m[i] loop"], guide_size["torch.sum"]
)

# %%
# The guide's figures come from one machine; what this site expects of any machine is
# looser: that one operator beats a loop of them by a wide margin, and that ``unbind``
# beats indexing at all, at the guide's size. Predict first: does ``unbind`` beat
# indexing on your machine?
at_500 = timings[500]
expect(
    "torch.sum adds up the rows of a (500, 10) matrix more than 10× as fast as the m[i] loop",
    speedup(at_500["m[i] loop"], at_500["torch.sum"]),
    above=10.0,
    device=device,
)
_ = expect(
    "the unbind loop adds up the rows of a (500, 10) matrix faster than the m[i] loop",
    speedup(at_500["m[i] loop"], at_500["unbind loop"]),
    above=1.0,
    device=device,
)

# %%
# What the unbind loop saves
# --------------------------
# Both loops run the same ``+=`` on every row; they differ in how each row view is
# made. ``m[r]`` goes through Python's indexing protocol once per row: Python calls
# ``m.__getitem__(r)``, PyTorch parses the index and dispatches one ``select``
# operator, which makes one view. ``torch.unbind(m)`` is one operator call that makes
# every view in C++.
#
# The cell below times the parts of both loops apart at the largest height: making the
# views each way, and the ``+=`` alone over views made in advance. If a loop cost no
# more than its parts, the loops would differ by exactly what making the views differs
# by. The table prints, per row, each loop, its parts, and the rest: what the loop
# costs beyond its two parts timed apart.
rows = row_counts[-1]
m = torch.rand(rows, 10, device=device)  # (rows, 10)
ready_views = torch.unbind(m)  # made in advance, to time the += alone


def add_only(views):
    total = torch.zeros(m.shape[1], device=m.device)
    for row in views:
        total += row
    return total


parts = compare(
    f"parts of a row sum, {rows} rows",
    {
        "[m[r] for r in range(rows)]": lambda: [m[r] for r in range(rows)],
        "torch.unbind(m)": lambda: torch.unbind(m),
        "+= over ready views": lambda: add_only(ready_views),
    },
    device=device,
)
per_row = {r.variant: r.median_s / rows for r in parts}
loop = {name: timings[rows][name].median_s / rows for name in ("m[i] loop", "unbind loop")}
views = {
    "m[i] loop": per_row["[m[r] for r in range(rows)]"],
    "unbind loop": per_row["torch.unbind(m)"],
}
add = per_row["+= over ready views"]
rest = {name: loop[name] - views[name] - add for name in loop}


def us(seconds):  # a difference of two medians can come out negative
    return f"{seconds * 1e6:.3f} µs"


print(f"\nper row, medians       {'m[i] loop':>13}{'unbind loop':>13}{'difference':>13}")
for label, pair in (("whole loop", loop), ("making the view", views), ("rest", rest)):
    a, b = pair["m[i] loop"], pair["unbind loop"]
    print(f"{label:<23}{us(a):>13}{us(b):>13}{us(a - b):>13}")
print(f"{'the += alone':<23}{us(add):>13}{us(add):>13}")
saved, by_views = loop["m[i] loop"] - loop["unbind loop"], views["m[i] loop"] - views["unbind loop"]
print(
    f"the unbind loop saved {us(saved)} per row; making the views differed by "
    f"{us(by_views)}, the rest by {us(saved - by_views)}\n"
)
_ = expect(
    f"the unbind loop runs less than twice as fast as the m[i] loop at {rows} rows "
    "(the += per row remains)",
    speedup(timings[rows]["m[i] loop"], timings[rows]["unbind loop"]),
    below=2.0,
    device=device,
)

# %%
# Each figure in the table is a median of its own measurement, so a difference of two
# of them carries both spreads (printed in the tables above), and the loops were timed
# in an earlier cell than their parts. Where the rest differs between the loops by
# more than the spreads, the saving is not just the cheaper making of the views:
# running a view and its ``+=`` in one loop costs more (or less) than running each
# apart. The page times nothing finer; a profiler of the Python interpreter would be
# the next tool.

# %%
# The chart puts the three row sums side by side on a logarithmic time axis. Each point
# is a median and its whisker spans the first to the third quartile; points, not bars,
# because a bar's length on a log axis depends on where the axis starts.
import matplotlib.pyplot as plt
import numpy as np

variants = ["m[i] loop", "unbind loop", "torch.sum"]
positions = np.arange(len(row_counts))
fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
for offset, variant in enumerate(variants):
    records = [timings[rows][variant] for rows in row_counts]
    medians = np.array([r.median_s for r in records]) * 1e6
    quartiles = np.array([[r.q1_s, r.q3_s] for r in records]).T * 1e6  # (2, sizes)
    whiskers = np.abs(quartiles - medians)
    x = positions + (offset - 1) * 0.2
    ax.errorbar(x, medians, yerr=whiskers, fmt="o", capsize=3, label=variant)
ax.set_xticks(positions, [f"({rows}, 10)" for rows in row_counts])
ax.set_yscale("log")
ax.set(xlabel="matrix shape", ylabel="time per call (µs)")
ax.set_title("Adding up the rows of a matrix: two Python loops and one torch.sum")
fig.legend(loc="outside right upper")
plt.show()

# %%
# Summary
# -------
# - Every overloaded operator is a named function; on booleans ``& | ^ ~`` are logical,
#   on integers they are bitwise.
#
# - ``x += y`` writes into ``x``'s memory, visible through every alias; autograd
#   refuses it on a leaf that requires grad and catches it at ``backward()`` where it
#   saved the old value. ``x = x + y`` makes a new tensor.
#
# - ``and``, ``or`` and ``not`` do not work element-wise; use ``&``, ``|``, ``~``, and
#   parenthesise comparisons: ``(a > 0) & (b > 0)``.
#
# - Every indexing expression is an operator call with a fixed cost: replace Python
#   loops over rows by one batched operation such as :func:`torch.sum`, and read its
#   gain on your machine in the timings above.
#
# - ``torch.unbind`` makes every row view in one call; the ``+=`` per row remains. The
#   table above splits what it saved here between making the views and the rest.
