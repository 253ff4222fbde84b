"""
Predict the dtype autocast gives each operation
===============================================

.. effpt-before-you-start::
   :learn: - Tell which operations autocast runs in the 16-bit type, which it keeps in
             float32 and which follow their inputs, from a table measured on your device.
           - Tell why a product of float32 and 16-bit tensors fails outside autocast and
             runs inside it.
           - Call ``backward()`` after the autocast region closes: the backward pass runs
             in the dtypes of the forward pass.
   :read-first: :doc:`/auto_examples/numerics/plot_floating_point_formats` for the range
                and precision of float16 and bfloat16.
   :needs: A CPU is enough; there autocast uses bfloat16. The page runs on a CUDA or
           Apple MPS GPU when there is one (``EFFPT_DEVICE=cpu`` keeps it on the CPU),
           with float16, and its table then shows that device's lists.

Inside a :func:`torch.autocast` region the same float32 tensors produce 16-bit results
from some operations and float32 results from others, and it pays to know which before
debugging a dtype error or a loss that went to ``nan``. This page runs thirteen common
operations under autocast, builds from them the table of what autocast lowers and what it
keeps in float32 on this device, and shows why the backward pass needs no autocast of
its own.
"""

# %%
# Which device, which 16-bit type
# -------------------------------
# On a CUDA GPU autocast uses float16, whose products run on tensor cores where the GPU
# has them; this page uses float16 on Apple's MPS too. On a CPU it uses bfloat16, CPU
# autocast's default type: it has float32's exponent range, so it trades precision,
# not range. :func:`effpt.device.autocast_dtype` makes that choice; the line below says
# which one this build took.
import torch

from effpt.device import autocast_dtype, describe, pick_device

torch.manual_seed(0)
device = pick_device()
low = autocast_dtype(device)  # float16 on CUDA and MPS, bfloat16 on CPU
print(describe(device))
print(f"autocast on {device.type} uses {low}")

# %%
# A product goes low, an addition stays float32
# ---------------------------------------------
# ``x`` and ``y`` are ordinary float32 tensors. Under autocast the matrix product comes
# out in the 16-bit type, because its inputs were cast down before the kernel ran. The
# addition is left alone: autocast only touches operations on its lists.
x = torch.rand(32, 32, device=device)
y = torch.rand(32, 32, device=device)
with torch.autocast(device.type, dtype=low):
    total = x + y
    product = x @ y
print(f"x + y -> {total.dtype}")
print(f"x @ y -> {product.dtype}")

# sphinx_gallery_start_ignore
assert total.dtype == torch.float32
assert product.dtype == low
# sphinx_gallery_end_ignore

# %%
# Mixed inputs
# ------------
# Now give ``y`` the 16-bit type. Outside autocast, a matrix product of float32 and a
# 16-bit tensor is an error. Inside, autocast casts both operands to the 16-bit type and
# the product succeeds. The addition still returns float32, but not thanks to autocast:
# ordinary type promotion picks the wider of the two types.
y_low = y.to(low)
try:
    x @ y_low
except RuntimeError as err:
    print(f"without autocast: RuntimeError: {err}")
with torch.autocast(device.type, dtype=low):
    print(f"with autocast: x @ y_low -> {(x @ y_low).dtype}, x + y_low -> {(x + y_low).dtype}")

# sphinx_gallery_start_ignore
with torch.autocast(device.type, dtype=low):
    assert (x @ y_low).dtype == low
    assert (x + y_low).dtype == torch.float32
# sphinx_gallery_end_ignore

# %%
# The lists, measured
# -------------------
# Each operation below runs twice under autocast: once on a float32 input and once on
# a 16-bit input. An op that turns float32 into the 16-bit type is *lowered*; one that
# turns a 16-bit input into float32 is *kept in float32*; the rest simply *follow
# their inputs*.
#
# Each device has lists of its own. PyTorch's AMP reference keeps numerically touchy
# ops (``softmax``, ``log``, ``sum``, ``exp``, ``layer_norm``...) in float32 on CUDA,
# because float16 reaches infinity at 65520 (65504 is its largest finite value) and
# has few digits for long sums. CPU autocast uses bfloat16, whose range matches
# float32's; its float32 list is not shorter but different: losses, and linear
# algebra, FFT, pooling and padding ops, which the thirteen ops probed here do not
# include. A probe this small shows how these ops behave, not how long either list is.
import torch.nn.functional as F

labels = torch.zeros(8, dtype=torch.long, device=device)
ops = {
    "matmul": lambda t: t @ t,
    "linear": lambda t: F.linear(t, t),
    "conv2d": lambda t: F.conv2d(t[None, None], t[None, None, :3, :3]),
    "add": lambda t: t + t,
    "relu": F.relu,
    "exp": torch.exp,
    "log": torch.log,
    "sum": torch.sum,
    "softmax": lambda t: F.softmax(t, dim=-1),
    "layer_norm": lambda t: F.layer_norm(t, t.shape[-1:]),
    "mse_loss": lambda t: F.mse_loss(t, torch.zeros_like(t)),
    "cross_entropy": lambda t: F.cross_entropy(t, labels),
    "prod": torch.prod,
}

# sphinx_gallery_start_ignore
assert torch.finfo(torch.float16).max == 65504
edges = torch.tensor([65519.0, 65520.0]).to(torch.float16).tolist()
assert edges == [65504.0, float("inf")], edges
# sphinx_gallery_end_ignore

# %%
# The table is built by running each of these ops on this build's device, not copied
# from the documentation.
t32 = torch.rand(8, 8, device=device) + 0.5  # (8, 8), positive so that log is finite
verdicts, outputs = {}, {}
print(f"{'op':<15}{'float32 in':>12}{'16-bit in':>12}   verdict")
for name, op in ops.items():
    with torch.autocast(device.type, dtype=low):
        from32, from16 = op(t32).dtype, op(t32.to(low)).dtype
    outputs[name] = (from32, from16)
    if from32 == low:
        verdicts[name] = "lowered"
    elif from16 == torch.float32:
        verdicts[name] = "kept in float32"
    else:
        verdicts[name] = "follows inputs"
    short = {torch.float32: "float32", low: str(low).removeprefix("torch.")}
    print(f"{name:<15}{short[from32]:>12}{short[from16]:>12}   {verdicts[name]}")

# sphinx_gallery_start_ignore
for name in ("matmul", "linear", "conv2d"):
    assert verdicts[name] == "lowered", (name, verdicts[name])
for name in ("add", "relu"):
    assert verdicts[name] == "follows inputs", (name, verdicts[name])
if device.type == "cuda":
    for name in ("softmax", "log", "sum", "exp", "layer_norm", "mse_loss"):
        assert verdicts[name] == "kept in float32", (name, verdicts[name])
if device.type == "cpu":
    for name in ("mse_loss", "cross_entropy", "prod"):
        assert verdicts[name] == "kept in float32", (name, verdicts[name])
    for name in ("softmax", "log", "sum"):
        assert verdicts[name] == "follows inputs", (name, verdicts[name])
# sphinx_gallery_end_ignore

# %%
# On a CPU, ``softmax``, ``log`` and ``sum`` follow their inputs, while the losses
# (``mse_loss``, ``cross_entropy``) and ``prod`` are computed in float32. On a CUDA GPU,
# PyTorch's reference puts ``softmax``, ``log``, ``sum``, ``exp`` and ``layer_norm`` in
# float32 too; the table shows that only when the page runs on one (the two lines below
# name the device this run used). Either way, the ops that do most of the arithmetic
# (matrix products, linear layers, convolutions) are the ones lowered.
lowered = [name for name, verdict in verdicts.items() if verdict == "lowered"]
kept = [name for name, verdict in verdicts.items() if verdict == "kept in float32"]
print(f"lowered on {device.type}: {', '.join(lowered)}")
print(f"kept in float32 on {device.type}: {', '.join(kept)}")

# %%
# The figure is the same table: one row per operation, the output's dtype for each
# input, coloured by width. Lowered ops are 16-bit in both columns, ops kept in
# float32 are float32 in both, and ops that follow their inputs change colour across.
import matplotlib.pyplot as plt
from matplotlib.colors import ListedColormap

low_name = str(low).removeprefix("torch.")
names = list(outputs)
is_low = [[float(dtype == low) for dtype in outputs[name]] for name in names]  # (ops, 2)
fig, ax = plt.subplots(figsize=(6, 0.33 * len(names) + 1.3), layout="constrained")
ax.imshow(is_low, cmap=ListedColormap(["#c6dbef", "#fdae6b"]), vmin=0, vmax=1, aspect="auto")
for row, name in enumerate(names):
    for col, dtype in enumerate(outputs[name]):
        ax.text(col, row, str(dtype).removeprefix("torch."), ha="center", va="center")
ax.set_xticks([0, 1], ["float32 input", f"{low_name} input"])
ax.set_yticks(range(len(names)), [f"{name} ({verdicts[name]})" for name in names])
ax.xaxis.tick_top()
ax.set_title(f"Output dtype under autocast on {device.type}", pad=10)
plt.show()

# %%
# Autocast the forward pass, not the backward
# -------------------------------------------
# Autograd remembers the dtype each forward op ran in, and the matching backward op runs
# in that same dtype. So the gradient flowing into the product ``h`` is 16-bit, while
# the gradient of the float32 weight ``w`` is float32, like ``w`` itself. Running
# ``backward()`` inside the autocast region as well changes nothing here: the gradients
# are bit for bit the same. PyTorch's AMP documentation advises against it all the
# same, so close the region after the loss.
w = torch.randn(32, 32, device=device, requires_grad=True)


def gradients(backward_under_autocast: bool) -> tuple[torch.Tensor, torch.Tensor]:
    w.grad = None
    with torch.autocast(device.type, dtype=low):
        h = x @ w  # (32, 32), 16-bit
        h.retain_grad()
        loss = h.float().pow(2).mean()
        if backward_under_autocast:
            loss.backward()
    if not backward_under_autocast:
        loss.backward()
    return h.grad, w.grad.clone()


h_grad, w_grad = gradients(backward_under_autocast=False)
_, w_grad_inside = gradients(backward_under_autocast=True)
print(f"h.grad: {h_grad.dtype}, w.grad: {w_grad.dtype}")
print(f"backward inside autocast gives identical gradients: {torch.equal(w_grad, w_grad_inside)}")

# sphinx_gallery_start_ignore
assert h_grad.dtype == low
assert w_grad.dtype == torch.float32
assert torch.equal(w_grad, w_grad_inside)
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Under :func:`torch.autocast`, matrix products, linear layers and convolutions run
#   in the 16-bit type even on float32 inputs; additions and ``relu`` follow their
#   inputs.
# - Which ops autocast keeps in float32 depends on the device: on CUDA with float16
#   they include ``softmax``, ``log`` and ``sum``; on CPU with bfloat16 those follow
#   their inputs, while losses (and ops this page does not probe: linear algebra, FFT,
#   pooling, padding) are kept. Run the table above on your own machine rather than
#   guessing.
# - Mixed float32/16-bit inputs that would be an error outside autocast are cast for
#   you inside it.
# - Wrap the forward pass and the loss; call ``backward()`` after the region closes.
