"""effpt.numerics: stable softmax, log-softmax and cross-entropy against float64 references.

The property tests draw float32 logits of any magnitude up to 1e30 and check that the
results and their gradients are finite and within the tolerances below of PyTorch's
float64 functions applied to the same (exactly widened) float32 values.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from effpt import numerics

#: Largest magnitude of the drawn logits (exactly representable bound in float32).
BOUND = float(np.float32(1e30))
#: Probabilities lie in [0, 1]: an absolute tolerance fits them, plus a relative one.
PROB_TOL = {"rtol": 1e-5, "atol": 1e-6}
#: Log-probabilities and losses can reach -2e30: relative, with an absolute floor.
LOG_TOL = {"rtol": 1e-5, "atol": 1e-5}
#: Gradients of these losses lie in [-1, 1] (times the weights below, also in [-1, 1]).
GRAD_TOL = {"rtol": 1e-5, "atol": 1e-5}

EXAMPLES = settings(max_examples=60, deadline=None)

shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)


@st.composite
def logits_and_dim(draw):
    """float32 logits and a valid dim: raw values anywhere in [-1e30, 1e30], or unit
    values times a scale 10^k, which keeps several probabilities non-negligible."""
    shape = draw(shapes)
    if draw(st.booleans()):
        values = draw(arrays(np.float32, shape, elements=st.floats(-BOUND, BOUND, width=32)))
        logits = torch.from_numpy(values)
    else:
        unit = draw(arrays(np.float32, shape, elements=st.floats(-1, 1, width=32)))
        scale = torch.tensor(10.0 ** draw(st.integers(-3, 30)), dtype=torch.float32)
        logits = torch.from_numpy(unit) * scale
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    return logits, dim


def weights_like(x: torch.Tensor) -> torch.Tensor:
    """Fixed upstream weights in [-1, 1], so that gradients test more than a plain sum."""
    return torch.linspace(-1.0, 1.0, x.numel(), dtype=torch.float64).reshape(x.shape)


def soft_target(raw: np.ndarray, dim: int) -> torch.Tensor:
    """Non-negative float32 weights normalised to sum to one along ``dim``."""
    w = torch.from_numpy(raw).double() + 1e-3
    return (w / w.sum(dim=dim, keepdim=True)).float()


def grad_of(fn, logits: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(value, gradient of sum(value * weights)) with logits widened to ``dtype``."""
    z = logits.to(dtype).requires_grad_(True)
    out = fn(z)
    (grad,) = torch.autograd.grad((out.double() * weights_like(out)).sum(), z)
    return out.detach(), grad


def assert_finite(*tensors: torch.Tensor) -> None:
    for t in tensors:
        assert torch.isfinite(t).all(), t


@pytest.mark.parametrize(
    ("ours", "reference", "tol"),
    [
        (numerics.softmax, torch.softmax, PROB_TOL),
        (numerics.log_softmax, torch.log_softmax, LOG_TOL),
    ],
    ids=["softmax", "log_softmax"],
)
@EXAMPLES
@given(case=logits_and_dim())
def test_matches_float64_and_its_gradient_is_finite(ours, reference, tol, case):
    logits, dim = case
    out, grad = grad_of(lambda z: ours(z, dim=dim), logits, torch.float32)
    ref, ref_grad = grad_of(lambda z: reference(z, dim=dim), logits, torch.float64)
    assert out.dtype == torch.float32
    assert_finite(out, grad)
    torch.testing.assert_close(out.double(), ref, **tol)
    torch.testing.assert_close(grad.double(), ref_grad, **GRAD_TOL)


@EXAMPLES
@given(logits_and_dim(), st.data())
def test_cross_entropy_matches_float64_and_its_gradient_is_finite(case, data):
    logits, dim = case
    raw = data.draw(arrays(np.float32, logits.shape, elements=st.floats(0, 1, width=32)))
    target = soft_target(raw, dim)

    def ours(z):
        return numerics.cross_entropy(z, target, dim=dim, reduction="none")

    def ref(z):
        return -(target.double() * torch.log_softmax(z, dim=dim)).sum(dim=dim)

    loss, grad = grad_of(ours, logits, torch.float32)
    ref_loss, ref_grad = grad_of(ref, logits, torch.float64)
    assert_finite(loss, grad)
    torch.testing.assert_close(loss.double(), ref_loss, **LOG_TOL)
    torch.testing.assert_close(grad.double(), ref_grad, **GRAD_TOL)


@settings(max_examples=30, deadline=None)
@given(shapes, st.data())
def test_dim_out_of_range_raises_a_clear_error(shape, data):
    ndim = len(shape)
    dim = data.draw(st.integers(-ndim - 3, -ndim - 1) | st.integers(ndim, ndim + 3))
    logits = torch.zeros(shape)
    expected = rf"dim {dim} is out of range .* expected an int in \[{-ndim}, {ndim - 1}\]"
    with pytest.raises(ValueError, match=expected):
        numerics.softmax(logits, dim=dim)
    with pytest.raises(ValueError, match=expected):
        numerics.log_softmax(logits, dim=dim)
    with pytest.raises(ValueError, match=expected):
        numerics.cross_entropy(logits, torch.zeros(shape), dim=dim)


def test_the_values_the_pages_show():
    logits = torch.tensor([1000.0, 0.0], requires_grad=True)
    target = torch.tensor([0.5, 0.5])
    assert numerics.softmax(logits).tolist() == [1.0, 0.0]
    loss = numerics.cross_entropy(logits, target)
    assert loss.item() == 500.0
    (grad,) = torch.autograd.grad(loss, logits)
    assert grad.tolist() == [0.5, -0.5]
    # the naive forms fail on the same input: that is what the functions are for
    naive = torch.exp(logits) / torch.exp(logits).sum()
    assert torch.isnan(naive[0])
    assert torch.isinf(-(target * torch.log(numerics.softmax(logits))).sum())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_agrees_with_torch_on_the_class_dimension(reduction):
    gen = torch.Generator().manual_seed(0)
    logits = 50 * torch.randn(4, 7, 3, generator=gen)  # (batch, classes, positions)
    target = torch.softmax(torch.randn(4, 7, 3, generator=gen), dim=1)
    ours = numerics.cross_entropy(logits, target, dim=1, reduction=reduction)
    theirs = F.cross_entropy(logits, target, reduction=reduction)
    torch.testing.assert_close(ours, theirs)
    # the class dimension last, as our default dim=-1 expects
    moved = numerics.cross_entropy(
        logits.movedim(1, -1), target.movedim(1, -1), reduction=reduction
    )  # (batch, positions, classes)
    torch.testing.assert_close(moved, theirs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_narrow_formats_keep_their_dtype_and_are_computed_in_float32(dtype):
    logits = torch.tensor([[20.0, -3.0, 0.5], [30000.0, 0.0, -30000.0]], dtype=dtype)
    target = torch.tensor([[0.5, 0.25, 0.25], [0.0, 0.0, 1.0]], dtype=dtype)
    wide = logits.double()
    assert numerics.softmax(logits).dtype == dtype
    torch.testing.assert_close(numerics.softmax(logits).double(), torch.softmax(wide, -1))
    # exp(30000) overflows every format; the shifted form does not, and the loss (60000) fits
    loss = numerics.cross_entropy(logits, target, reduction="none")
    assert loss.dtype == dtype
    assert torch.isfinite(loss).all()
    ref = -(target.double() * torch.log_softmax(wide, -1)).sum(-1)
    torch.testing.assert_close(loss.double(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: numerics.softmax([1.0, 2.0]),
            TypeError,
            "logits must be a torch.Tensor, got list",
        ),
        (lambda: numerics.softmax(torch.tensor([1, 2])), TypeError, "floating-point dtype"),
        (lambda: numerics.softmax(torch.tensor(1.0)), ValueError, "at least one dimension"),
        (lambda: numerics.softmax(torch.ones(2), dim=0.0), TypeError, "dim must be an int"),
        (lambda: numerics.log_softmax(torch.ones(2), dim=True), TypeError, "got bool"),
        (
            lambda: numerics.cross_entropy(torch.ones(2, 3), [0.0, 1.0, 0.0]),
            TypeError,
            "target must be a torch.Tensor",
        ),
        (
            lambda: numerics.cross_entropy(torch.ones(2, 3), torch.tensor([0, 2])),
            TypeError,
            r"one_hot\(target, 3\)",
        ),
        (
            lambda: numerics.cross_entropy(torch.ones(2, 3), torch.ones(3)),
            ValueError,
            r"shape of logits \(2, 3\), got \(3,\)",
        ),
        (
            lambda: numerics.cross_entropy(torch.ones(3), torch.ones(3), reduction="avg"),
            ValueError,
            "reduction must be one of 'mean', 'sum', 'none', got 'avg'",
        ),
    ],
)
def test_bad_arguments_raise_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


#: Shapes with at least one empty dimension: sizes 0 to 3, up to three dimensions.
shapes_with_an_empty_dim = (
    st.lists(st.integers(0, 3), min_size=1, max_size=3).filter(lambda s: 0 in s).map(tuple)
)


@settings(max_examples=40, deadline=None)
@given(
    shapes_with_an_empty_dim,
    st.sampled_from([torch.float32, torch.float16, torch.bfloat16]),
    st.data(),
)
def test_empty_tensors_give_what_torch_gives(shape, dtype, data):
    # torch.softmax over an empty dimension returns an empty tensor; ours crashed inside amax
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    logits = torch.zeros(shape, dtype=dtype, requires_grad=True)
    target = torch.zeros(shape, dtype=dtype)
    pairs = [
        (numerics.softmax(logits, dim=dim), torch.softmax(logits, dim=dim)),
        (numerics.log_softmax(logits, dim=dim), torch.log_softmax(logits, dim=dim)),
        (
            numerics.cross_entropy(logits, target, dim=dim, reduction="none"),
            -(target * torch.log_softmax(logits, dim=dim)).sum(dim=dim),
        ),
    ]
    for ours, theirs in pairs:
        assert ours.shape == theirs.shape
        assert ours.dtype == theirs.dtype
        torch.testing.assert_close(ours, theirs)
        (grad,) = torch.autograd.grad(ours.sum(), logits)
        assert grad.shape == shape
        assert not grad.any()
    assert numerics.cross_entropy(logits, target, dim=dim, reduction="sum").item() == 0.0


@pytest.mark.parametrize(
    ("shape", "mean_is_nan", "torch_mean_is_nan"),
    [((0, 3), True, True), ((3, 0), False, True)],
    ids=["empty batch", "empty class dimension"],
)
def test_cross_entropy_reductions_of_empty_input(shape, mean_is_nan, torch_mean_is_nan):
    # the mean over no examples is nan, as in torch; over examples with no classes each
    # loss is an empty sum, 0, and so is their mean (torch divides 0 by 0 there)
    logits, target = torch.zeros(shape), torch.zeros(shape)
    mean = numerics.cross_entropy(logits, target, reduction="mean")
    assert mean.isnan().item() is mean_is_nan
    if not mean_is_nan:
        assert mean.item() == 0.0
    assert F.cross_entropy(logits, target).isnan().item() is torch_mean_is_nan
    assert numerics.cross_entropy(logits, target, reduction="sum").item() == 0.0
    losses = numerics.cross_entropy(logits, target, reduction="none")
    assert losses.shape == (shape[0],)
    assert not losses.any()


def test_dim_accepts_numpy_integers_as_torch_does():
    logits = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    for fn in (numerics.softmax, numerics.log_softmax):
        torch.testing.assert_close(fn(logits, dim=np.int64(0)), fn(logits, dim=0))
