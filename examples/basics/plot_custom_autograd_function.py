"""
Write a custom autograd function: differentiate through a solver
================================================================

.. effpt-before-you-start::
   :learn: - Write a :class:`torch.autograd.Function` with your own ``forward`` and
             ``backward``.
           - Differentiate the result of a solver with the implicit function theorem.
           - Check a hand-written backward with ``gradcheck`` in float64.
   :read-first: :doc:`plot_autograd` for ``grad_fn`` and ``torch.autograd.grad``.
   :needs: A CPU is enough. The page runs on a CUDA GPU when there is one; on Apple MPS
           it stays on the CPU, because it computes in float64.

Some values come out of a numerical procedure (a root finder, an optimiser, a call
into another library) that autograd cannot or should not trace. A
:class:`torch.autograd.Function` lets you run any forward computation and supply the
backward formula yourself. This page solves an implicit equation with L-BFGS and
differentiates the solution with the implicit function theorem, then checks the
gradient with :func:`torch.autograd.gradcheck`.
"""

# %%
# The implicit function theorem
# -----------------------------
# Suppose ``y`` is defined by an equation ``F(x, y) = 0`` rather than a formula. Near a
# solution where ``∂F/∂y ≠ 0``, the theorem says ``y`` is a smooth function of ``x`` with
#
#     dy/dx = −(∂F/∂x) / (∂F/∂y).
#
# So the backward pass needs only the two partial derivatives of ``F`` at the solution,
# however the solution was found. For the unit circle, ``F(x, y) = x² + y² − 1``.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
if device.type not in ("cpu", "cuda"):  # this page computes in float64, which MPS lacks
    device = torch.device("cpu")
print(describe(device))


def circle(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x**2 + y**2 - 1


# %%
# The ``Function``
# ----------------
# ``forward`` and ``backward`` are static methods; ``ctx`` carries what backward needs.
# Tensors go through :meth:`ctx.save_for_backward <torch.autograd.function.FunctionCtx.save_for_backward>`,
# which checks they were not modified in between; anything else (here the Python
# function ``F``) is stored as an attribute. Forward solves ``F(x, y)² → 0`` elementwise
# with :class:`torch.optim.LBFGS` from the starting guess ``y0`` and returns a plain
# tensor: none of the solver's steps are recorded. Backward returns one gradient per
# forward input, ``None`` for the starting guess and the two non-tensor arguments.
# ``@once_differentiable`` states that this backward is not itself differentiable, so
# no one builds a second derivative on it by mistake.
from torch.autograd.function import once_differentiable


class ImplicitFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y0, F, max_iter=50):
        y = y0.detach().clone().requires_grad_()
        solver = torch.optim.LBFGS(
            [y],
            max_iter=max_iter,
            tolerance_grad=1e-12,
            tolerance_change=0.0,
            line_search_fn="strong_wolfe",
        )

        def closure():
            solver.zero_grad()
            residual = (F(x.detach(), y) ** 2).sum()
            residual.backward()
            return residual

        with torch.enable_grad():  # forward runs with grad mode off; the solver needs it
            solver.step(closure)
        y = y.detach()
        ctx.F = F
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y):
        x, y = ctx.saved_tensors
        with torch.enable_grad():
            xv, yv = x.detach().requires_grad_(), y.detach().requires_grad_()
            dF_dx, dF_dy = torch.autograd.grad(ctx.F(xv, yv).sum(), (xv, yv))
        return -grad_y * dF_dx / dF_dy, None, None, None


# %%
# One point on the circle
# -----------------------
# At ``x = 0.5`` the solver finds ``y ≈ 0.8660 = √0.75``, and the gradient is
# ``dy/dx ≈ −0.5774``. Differentiating the closed form ``y = √(1 − x²)`` with autograd
# gives the same number.
x = torch.tensor([0.5], dtype=torch.float64, device=device, requires_grad=True)
y0 = torch.full_like(x, 0.5)  # starting guess
y = ImplicitFunction.apply(x, y0, circle)
(dy_dx,) = torch.autograd.grad(y.sum(), x)
(exact,) = torch.autograd.grad(torch.sqrt(1 - x**2).sum(), x)
print(f"y = {y.item():.4f}, dy/dx = {dy_dx.item():.4f}, closed form: {exact.item():.4f}")
print("y carries a grad_fn of our class:", type(y.grad_fn).__name__)

# sphinx_gallery_start_ignore
assert abs(y.item() - 0.75**0.5) < 1e-10 and round(y.item(), 4) == 0.8660
assert abs(dy_dx.item() - exact.item()) < 1e-9 and round(dy_dx.item(), 4) == -0.5774
# sphinx_gallery_end_ignore

# %%
# Checking the gradient with ``gradcheck``
# ----------------------------------------
# :func:`torch.autograd.gradcheck` compares the backward pass with finite differences of
# the forward. Use float64: in float32 the finite differences are noisier than its
# tolerance. ``gradcheck`` passes for several points at once here, and it catches a
# backward with the sign forgotten.
xs = torch.tensor([-0.7, 0.1, 0.5, 0.9], dtype=torch.float64, device=device, requires_grad=True)
guess = torch.full_like(xs, 0.5)
print(
    "gradcheck:",
    torch.autograd.gradcheck(lambda x: ImplicitFunction.apply(x, guess, circle), (xs,)),
)


class WrongSign(ImplicitFunction):
    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y):
        grad_x, *rest = ImplicitFunction.backward(ctx, grad_y)
        return -grad_x, *rest


wrong = torch.autograd.gradcheck(
    lambda x: WrongSign.apply(x, guess, circle), (xs,), raise_exception=False
)
print("gradcheck with the sign flipped:", wrong)

# sphinx_gallery_start_ignore
assert not wrong
# sphinx_gallery_end_ignore

# %%
# The whole curve, and its slope
# ------------------------------
# Because ``F`` acts elementwise, one call solves a hundred points, and one backward
# pass gives all their slopes. Both match ``√(1 − x²)`` and ``−x / √(1 − x²)``. (The
# division in ``backward`` relies on that: for equations that couple the elements,
# ``∂F/∂y`` is a matrix and backward must solve a linear system with it.)
import matplotlib.pyplot as plt

grid = torch.linspace(
    -0.95, 0.95, steps=100, dtype=torch.float64, device=device, requires_grad=True
)
curve = ImplicitFunction.apply(grid, torch.full_like(grid, 0.5), circle)
(slope,) = torch.autograd.grad(curve.sum(), grid)
g = grid.detach()
errors = (
    (curve - torch.sqrt(1 - g**2)).abs().max().item(),
    (slope + g / torch.sqrt(1 - g**2)).abs().max().item(),
)
print(f"largest error: y {errors[0]:.1e}, dy/dx {errors[1]:.1e}")

g, curve_np, slope_np = g.cpu().numpy(), curve.detach().cpu().numpy(), slope.cpu().numpy()
fig, (ax_y, ax_slope) = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
ax_y.plot(g, curve_np, "o", markersize=3, label="solved with L-BFGS")
ax_y.plot(g, (1 - g**2) ** 0.5, color="black", linewidth=1, label="√(1 − x²)")
ax_y.set(xlabel="x", ylabel="y", title="Solution of x² + y² = 1, y > 0")
ax_slope.plot(g, slope_np, "o", markersize=3, label="backward (implicit function theorem)")
ax_slope.plot(g, -g / (1 - g**2) ** 0.5, color="black", linewidth=1, label="−x / √(1 − x²)")
ax_slope.set(xlabel="x", ylabel="dy/dx", title="Its derivative")
for ax in (ax_y, ax_slope):
    ax.legend()
plt.show()

# sphinx_gallery_start_ignore
assert errors[0] < 1e-8 and errors[1] < 1e-6, errors
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Subclass :class:`torch.autograd.Function` when the forward is not made of
#   differentiable PyTorch operations, or when you know a better backward formula.
# - Save tensors with ``ctx.save_for_backward`` and other objects as ``ctx`` attributes;
#   return one gradient per forward input, ``None`` for those that need none.
# - Verify every hand-written backward with ``gradcheck`` in float64; it catches sign
#   and scale mistakes that training would only hint at.
