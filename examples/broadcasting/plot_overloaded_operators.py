"""
Write tensor code with Python's operators, and know what each one does
======================================================================

PyTorch overloads Python's operators, so tensor code can read like the formula it
implements. Each operator is a call to a named function, and knowing which one tells
you when the result is a view, when it is in place, when it is bitwise rather than
logical, and what a loop of them costs. This page checks every operator against its
function, shows three traps, and times a loop of indexing against one reduction.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_overloaded_operators.py``.
"""

# %%
# Every operator is a function call
# ---------------------------------
# The table below evaluates each expression and the function call it stands for, and
# checks that they return the same tensor, bit for bit. ``x`` and ``y`` are floats
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
# ran. Read the rows for ``&``, ``|``, ``^`` and ``~`` twice: on booleans they are the
# logical functions, on integers the bitwise ones.
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
# Three rows deserve a second look. ``~`` on an integer flips its bits (``~5`` is
# ``-6``), which is not :func:`torch.logical_not`, and on a float it is a
# ``TypeError``. ``%`` follows Python's sign rule (:func:`torch.remainder`, the sign of
# the divisor), unlike C's :func:`torch.fmod`.
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
# Autograd cares. A leaf that requires grad refuses an in-place update, because the
# update would not be recorded; optimizers update parameters under
# :func:`torch.no_grad`. And an in-place change to a tensor saved for the backward
# pass (here the output of :func:`torch.exp`, which its gradient reuses) is caught
# when ``backward()`` runs.
w = torch.ones(3, device=device, requires_grad=True)
try:
    w += 1
except RuntimeError as err:
    print("w += 1 on a leaf -> RuntimeError:", err)

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
# several elements that raises the error above; with a single element it runs and
# returns the wrong answer. Parentheses fix it.
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
# length): no data is copied, but each call is still one operator with its own
# overhead of a few microseconds.
t = torch.arange(10.0, device=device)
view, narrowed = t[2:5], t.narrow(0, 2, 3)
print(view.tolist(), narrowed.tolist(), "same memory:", view.data_ptr() == narrowed.data_ptr())

# sphinx_gallery_start_ignore
assert torch.equal(view, narrowed) and view.data_ptr() == narrowed.data_ptr()
# sphinx_gallery_end_ignore

# %%
# To feel that overhead, add up the rows of a ``(rows, 10)`` matrix three ways: index
# one row at a time, split the matrix into rows once with :func:`torch.unbind`, or call
# :func:`torch.sum` once. The two loops run one small operator per row; the sum runs one
# for the whole matrix.


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
# :func:`effpt.bench.compare` times the three at a few matrix heights. The loops are
# bound by per-operator overhead on every device, so the same sizes serve CPU and GPU.
from effpt.bench import compare

row_counts = [100, 500, 2000]


def time_row_sums(rows):
    m = torch.rand(rows, 10, device=device)  # (rows, 10)
    variants = {
        "m[i] loop": lambda: indexing_loop(m),
        "unbind loop": lambda: unbind_loop(m),
        "torch.sum": lambda: one_sum(m),
    }
    records = compare(f"row sum {rows}×10", variants, device=device, repeats=5)
    print()
    return {r.variant: r.median_s for r in records}


timings = {rows: time_row_sums(rows) for rows in row_counts}

# %%
# The guide this page draws on reported, for a ``(500, 10)`` matrix on its author's
# machine, that the ``unbind`` loop ran about 30 % faster than the indexing loop (a
# ratio of about 1.3) and that ``torch.sum`` ran about 100 times faster. Here are the
# same ratios on the machine that built this page.
print(f"{'rows':>6}{'m[i] loop / unbind loop':>26}{'m[i] loop / torch.sum':>24}")
for rows, seconds in timings.items():
    unbind_ratio = seconds["m[i] loop"] / seconds["unbind loop"]
    sum_ratio = seconds["m[i] loop"] / seconds["torch.sum"]
    print(f"{rows:>6}{unbind_ratio:>25.2f}×{sum_ratio:>23.0f}×")
print(f"{'guide':>6}{'≈ 1.3':>25}×{'≈ 100':>23}×")
guide_size = timings[500]
print(
    f"On {describe(device)}, for the guide's (500, 10) matrix: the unbind loop ran "
    f"{guide_size['m[i] loop'] / guide_size['unbind loop']:.2f}× and torch.sum "
    f"{guide_size['m[i] loop'] / guide_size['torch.sum']:.0f}× as fast as the indexing loop."
)

# %%
# The bar chart puts the three side by side; note the logarithmic time axis.
import matplotlib.pyplot as plt
import numpy as np

variants = ["m[i] loop", "unbind loop", "torch.sum"]
positions = np.arange(len(row_counts))
fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
for offset, variant in enumerate(variants):
    seconds = [timings[rows][variant] for rows in row_counts]
    ax.bar(positions + (offset - 1) * 0.27, [s * 1e6 for s in seconds], 0.27, label=variant)
ax.set_xticks(positions, [f"({rows}, 10)" for rows in row_counts])
ax.set_yscale("log")
ax.set(xlabel="matrix shape", ylabel="median time per call (µs)")
ax.set_title(f"Adding up the rows of a matrix\n{describe(device)}", fontsize=10)
ax.legend()
plt.show()

# %%
# Summary
# -------
# - Every overloaded operator is a named function; on booleans ``& | ^ ~`` are logical,
#   on integers they are bitwise.
# - ``x += y`` writes into ``x``'s memory, visible through every alias and refused by
#   autograd where the old value is still needed; ``x = x + y`` makes a new tensor.
# - ``and``, ``or`` and ``not`` do not work element-wise; use ``&``, ``|``, ``~``, and
#   parenthesise comparisons: ``(a > 0) & (b > 0)``.
# - Every indexing expression is an operator call: replace Python loops over rows by
#   one batched operation such as :func:`torch.sum`, as the timings above show.
