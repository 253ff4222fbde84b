"""effpt.ops against the naive versions the gallery pages start from."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from effpt.ops import batch_gather, box_iou, uniformity_loss

SETTINGS = settings(deadline=None, max_examples=60)


# -- batch_gather --------------------------------------------------------------------


def naive_batch_gather(tensor: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    return torch.stack([tensor[i][indices[i]] for i in range(tensor.shape[0])])


@st.composite
def gather_case(draw):
    batch = draw(st.integers(1, 5))
    n = draw(st.integers(1, 6))
    rest = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    k = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    tensor = torch.randn((batch, n, *rest), dtype=torch.float64, generator=gen)
    index = torch.randint(-n, n, (batch, *k), generator=gen)
    return tensor, index


@SETTINGS
@given(gather_case())
def test_batch_gather_matches_the_loop(case):
    tensor, index = case
    out = batch_gather(tensor, index)
    expected = naive_batch_gather(tensor, index)
    assert out.shape == expected.shape
    assert torch.equal(out, expected)


@SETTINGS
@given(gather_case())
def test_batch_gather_gradient_matches_the_loop(case):
    tensor, index = case
    weights = torch.randn(naive_batch_gather(tensor, index).shape, dtype=torch.float64)
    a = tensor.clone().requires_grad_()
    b = tensor.clone().requires_grad_()
    (batch_gather(a, index) * weights).sum().backward()
    (naive_batch_gather(b, index) * weights).sum().backward()
    torch.testing.assert_close(a.grad, b.grad)


def test_batch_gather_keeps_integer_dtype():
    x = torch.arange(6).reshape(2, 3)
    out = batch_gather(x, torch.tensor([[2], [0]]))
    assert out.dtype == torch.int64
    assert out.tolist() == [[2], [3]]


def test_batch_gather_names_both_shapes_on_batch_mismatch():
    with pytest.raises(ValueError, match=r"input has shape \(3, 4\) and index has shape \(2,\)"):
        batch_gather(torch.zeros(3, 4), torch.zeros(2, dtype=torch.long))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
def test_batch_gather_rejects_non_integer_index(dtype):
    with pytest.raises(TypeError, match=f"index must be an integer tensor, got dtype {dtype}"):
        batch_gather(torch.zeros(2, 3), torch.zeros(2, 1, dtype=dtype))


def test_batch_gather_rejects_one_dimensional_input():
    with pytest.raises(
        ValueError, match=r"input must have shape \(batch, n, \.\.\.\), got shape \(4,\)"
    ):
        batch_gather(torch.zeros(4), torch.zeros(4, dtype=torch.long))


def test_batch_gather_rejects_non_tensors():
    with pytest.raises(TypeError, match=r"index must be a torch\.Tensor, got list"):
        batch_gather(torch.zeros(2, 3), [[0], [1]])


def test_batch_gather_rejects_indices_on_another_device():
    with pytest.raises(ValueError, match="index is on meta but input is on cpu"):
        batch_gather(torch.zeros(2, 3), torch.zeros(2, 1, dtype=torch.long, device="meta"))


def test_batch_gather_out_of_range_raises():
    with pytest.raises(IndexError):
        batch_gather(torch.zeros(2, 3), torch.tensor([[0], [3]]))


# -- box_iou ---------------------------------------------------------------------------


def scalar_iou(a, b, eps=0.0):
    """IoU of two (x, y, w, h) boxes in plain Python floats (double precision).

    As box_iou defines it: a union of area at most ``eps`` counts as empty and gives 0.
    """
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    iw = max(0.0, min(ax + aw, bx + bw) - max(ax, bx))
    ih = max(0.0, min(ay + ah, by + bh) - max(ay, by))
    inter = iw * ih
    union = aw * ah + bw * bh - inter
    return inter / union if union > eps else 0.0


coordinate = st.floats(-100, 100, allow_nan=False, width=32)
extent = st.floats(0, 50, allow_nan=False, width=32)
box = st.tuples(coordinate, coordinate, extent, extent)
box_pairs = st.lists(st.tuples(box, box), min_size=1, max_size=20)


@SETTINGS
@given(box_pairs)
# Two identical boxes of area 6e-8: IoU 1 at any scale. The reference once floored the
# union at 1e-5 (box_iou's old default) and said 0.006; hypothesis found it in CI.
@example([((0.0, 0.0, 1.0, 5.960464477539063e-08), (0.0, 0.0, 1.0, 5.960464477539063e-08))])
def test_box_iou_matches_scalar_reference(pairs):
    boxes1 = torch.tensor([p[0] for p in pairs], dtype=torch.float64)
    boxes2 = torch.tensor([p[1] for p in pairs], dtype=torch.float64)
    expected = torch.tensor([scalar_iou(a, b) for a, b in pairs], dtype=torch.float64)
    got = box_iou(boxes1, boxes2)
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-12)
    assert ((got >= 0) & (got <= 1 + 1e-12)).all()
    torch.testing.assert_close(box_iou(boxes2, boxes1), got)


# Boxes at least 1 wide: float32 rounds coordinates near 100 by ~1e-5, which would
# dominate the IoU of much thinner boxes.
wide_box = st.tuples(coordinate, coordinate, st.floats(1, 50, width=32), st.floats(1, 50, width=32))


@SETTINGS
@given(st.lists(st.tuples(wide_box, wide_box), min_size=1, max_size=20))
def test_box_iou_float32_is_close_to_float64(pairs):
    boxes1 = torch.tensor([p[0] for p in pairs], dtype=torch.float64)
    boxes2 = torch.tensor([p[1] for p in pairs], dtype=torch.float64)
    reference = box_iou(boxes1, boxes2)
    got = box_iou(boxes1.float(), boxes2.float())
    torch.testing.assert_close(got.double(), reference, rtol=0, atol=2e-4)


def test_box_iou_all_pairs_by_broadcasting():
    a = torch.tensor([[0.0, 0.0, 2.0, 2.0], [10.0, 10.0, 1.0, 1.0]])
    b = torch.tensor([[0.0, 0.0, 2.0, 2.0], [1.0, 0.0, 2.0, 2.0], [10.5, 10.0, 1.0, 1.0]])
    got = box_iou(a[:, None], b[None])  # (2, 3)
    expected = torch.tensor([[1.0, 2 / 6, 0.0], [0.0, 0.0, 0.5 / 1.5]])
    torch.testing.assert_close(got, expected)


def test_box_iou_empty_boxes_give_zero_not_nan():
    empty = torch.zeros(3, 4)
    assert torch.equal(box_iou(empty, empty), torch.zeros(3))


@pytest.mark.parametrize(
    ("boxes1", "boxes2", "error", "match"),
    [
        (torch.zeros(2, 3), torch.zeros(2, 4), ValueError, r"boxes1 must have shape \(\.\.\., 4\)"),
        (
            torch.zeros(2, 4),
            torch.zeros(4, dtype=torch.int64),
            TypeError,
            "boxes2 must be a floating",
        ),
        (torch.zeros(2, 4), torch.zeros(3, 4), ValueError, r"got shapes \(2, 4\) and \(3, 4\)"),
    ],
)
def test_box_iou_rejects_bad_boxes(boxes1, boxes2, error, match):
    with pytest.raises(error, match=match):
        box_iou(boxes1, boxes2)


@pytest.mark.parametrize(
    ("eps", "error", "match"),
    [
        (-1e-5, ValueError, r"eps must be a finite number >= 0, got -1e-05"),
        (float("inf"), ValueError, r"eps must be a finite number >= 0, got inf"),
        (float("nan"), ValueError, r"eps must be a finite number >= 0, got nan"),
        ("1e-5", TypeError, r"eps must be a real number, got str"),
        (True, TypeError, r"eps must be a real number, got bool"),
    ],
)
def test_box_iou_rejects_a_bad_eps_naming_it(eps, error, match):
    with pytest.raises(error, match=match):
        box_iou(torch.zeros(4), torch.zeros(4), eps=eps)


@pytest.mark.parametrize("side", [1e-3, 1e-6, 1.0, 300.0, 1e6])
def test_box_iou_of_identical_boxes_is_one_at_every_scale(side):
    boxes = torch.tensor([[0.5 * side, 0.25 * side, side, side]])
    iou = box_iou(boxes, boxes).item()
    assert iou == pytest.approx(1.0, rel=1e-6)
    assert iou <= 1.0
    shifted = boxes + torch.tensor([side / 2, 0.0, 0.0, 0.0])
    assert box_iou(boxes, shifted).item() == pytest.approx(1 / 3, rel=1e-5)  # scale-free


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_box_iou_in_half_precision_does_not_overflow(dtype):
    boxes = torch.tensor([[10.0, 20.0, 300.0, 300.0], [0.0, 0.0, 1000.0, 500.0]], dtype=dtype)
    got = box_iou(boxes, boxes)
    assert got.dtype == dtype
    assert torch.equal(got, torch.ones(2, dtype=dtype))
    half = box_iou(boxes[:1], boxes[:1] + torch.tensor([150.0, 0, 0, 0], dtype=dtype))
    assert half.item() == pytest.approx(1 / 3, abs=2e-3)


def test_box_iou_eps_treats_small_unions_as_empty():
    tiny = torch.tensor([0.0, 0.0, 1e-3, 1e-3])
    assert box_iou(tiny, tiny, eps=1e-5).item() == 0.0  # a union of 1e-6 counts as empty
    assert box_iou(tiny, tiny, eps=1e-7).item() == 1.0


# -- uniformity_loss ---------------------------------------------------------------------


def naive_uniformity(x: torch.Tensor, t: float) -> torch.Tensor:
    return torch.pdist(x, p=2).pow(2).mul(-t).exp().mean().log()


@st.composite
def points(draw):
    n = draw(st.integers(2, 24))
    d = draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, dtype=torch.float64, generator=gen)
    if draw(st.booleans()):
        x = torch.nn.functional.normalize(x, dim=1)
    return x


temperature = st.floats(0.1, 5.0)


@SETTINGS
@given(points(), temperature)
def test_uniformity_matches_pdist_form(x, t):
    torch.testing.assert_close(uniformity_loss(x, t), naive_uniformity(x, t), rtol=1e-9, atol=1e-9)


@SETTINGS
@given(points(), temperature)
def test_uniformity_gradient_matches_pdist_form(x, t):
    a = x.clone().requires_grad_()
    b = x.clone().requires_grad_()
    (ga,) = torch.autograd.grad(uniformity_loss(a, t), a)
    (gb,) = torch.autograd.grad(naive_uniformity(b, t), b)
    torch.testing.assert_close(ga, gb, rtol=1e-7, atol=1e-9)


def test_uniformity_stays_finite_where_the_naive_form_underflows():
    x = torch.tensor([[0.0], [10.0], [30.0]], dtype=torch.float64)
    t = 100.0  # exp(-t * 100) underflows to 0 in float64, so the naive form gives -inf
    assert naive_uniformity(x, t).item() == -math.inf
    expected = -t * 100 + math.log(1 + math.exp(-t * 300) + math.exp(-t * 800)) - math.log(3)
    assert uniformity_loss(x, t).item() == pytest.approx(expected)


def test_uniformity_float32_close_to_float64():
    gen = torch.Generator().manual_seed(1)
    x = torch.nn.functional.normalize(
        torch.randn(256, 32, generator=gen, dtype=torch.float64), dim=1
    )
    reference = naive_uniformity(x, 2.0).item()
    assert uniformity_loss(x.float(), 2.0).item() == pytest.approx(reference, abs=1e-5)


@pytest.mark.parametrize(
    ("x", "t", "error", "match"),
    [
        (torch.zeros(1, 3), 2.0, ValueError, r"got shape \(1, 3\)"),
        (torch.zeros(4), 2.0, ValueError, r"got shape \(4,\)"),
        (torch.zeros(3, 2, dtype=torch.int64), 2.0, TypeError, "floating-point"),
        (torch.zeros(3, 2), 0.0, ValueError, "t must be positive and finite, got 0.0"),
        (torch.zeros(3, 2), math.inf, ValueError, "t must be positive and finite, got inf"),
        (torch.zeros(3, 2), "2", TypeError, "t must be a real number, got str"),
    ],
)
def test_uniformity_rejects_bad_arguments(x, t, error, match):
    with pytest.raises(error, match=match):
        uniformity_loss(x, t)


@pytest.mark.parametrize("bad", [3, -4])
def test_batch_gather_never_reads_a_neighbouring_row(bad):
    x = torch.arange(6.0).reshape(2, 3)  # a flat index of 3 would be row 1's first entry
    with pytest.raises(IndexError):
        batch_gather(x, torch.tensor([[0], [bad]]))
    with pytest.raises(IndexError):
        batch_gather(x, torch.tensor([[bad], [0]]))


def test_batch_gather_from_empty_rows():
    x = torch.zeros(2, 0, 3)
    assert batch_gather(x, torch.zeros(2, 0, dtype=torch.long)).shape == (2, 0, 3)
    with pytest.raises(IndexError, match="no rows to pick from"):
        batch_gather(x, torch.zeros(2, 1, dtype=torch.long))


# -- narrow index dtypes and far-away points (issue 16) ----------------------------------


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.uint8])
def test_batch_gather_narrow_index_dtypes_match_the_loop(dtype):
    # Rows longer than the index dtype can count: the bounds and the negative-index
    # arithmetic must not run in the index's own dtype, where they overflow.
    n = 70_000
    x = torch.arange(3 * n, dtype=torch.float64).reshape(3, n)  # (batch, n)
    info = torch.iinfo(dtype)
    values = [0, 1, min(info.max, n - 1), *([-1, max(info.min, -n)] if info.min < 0 else [])]
    index = torch.tensor([values] * 3, dtype=dtype)  # (batch, k)
    expected = naive_batch_gather(x, index.long())
    assert torch.equal(batch_gather(x, index), expected)


def test_batch_gather_int16_minus_one_on_long_rows():
    n = 70_000
    x = torch.arange(2 * n).reshape(2, n)
    index = torch.full((2, 1), -1, dtype=torch.int16)
    assert batch_gather(x, index).flatten().tolist() == [n - 1, 2 * n - 1]


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16])
def test_batch_gather_narrow_index_within_short_rows(dtype):
    # 100 < n = 200, but 200 does not fit in int8: the bound must not wrap around.
    x = torch.arange(2 * 200).reshape(2, 200)
    index = torch.tensor([[100], [127]], dtype=dtype)
    assert batch_gather(x, index).flatten().tolist() == [100, 327]


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16])
def test_batch_gather_narrow_index_out_of_range_still_raises(dtype):
    x = torch.zeros(2, 3)
    with pytest.raises(IndexError):
        batch_gather(x, torch.tensor([[0], [-4]], dtype=dtype))
    with pytest.raises(IndexError):
        batch_gather(x, torch.tensor([[3], [0]], dtype=dtype))


def test_uniformity_float32_far_from_the_origin():
    # The loss depends only on distances, so shifting every point by the same vector
    # must not change it, even in float32.
    gen = torch.Generator().manual_seed(0)
    unit = torch.nn.functional.normalize(
        torch.randn(256, 3, generator=gen, dtype=torch.float64), dim=1
    )
    for shift in (0.0, 1000.0, -3e4):
        x = (unit + shift).float()  # what a float32 user holds
        reference = naive_uniformity(x.double(), 2.0).item()  # exact for that input
        assert uniformity_loss(x, 2.0).item() == pytest.approx(reference, abs=1e-4), shift


def test_uniformity_shift_invariant_in_float64():
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(64, 5, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(uniformity_loss(x + 1e6), uniformity_loss(x), rtol=0, atol=1e-6)


def test_batch_gather_uint64_beyond_int64_is_out_of_range():
    # 2**64 - 1 wraps to -1 when converted to int64; as an unsigned index it is far out
    # of range and must raise, not read the last row.
    x = torch.arange(6.0).reshape(2, 3)
    index = torch.tensor([[2**64 - 1], [0]], dtype=torch.uint64)
    with pytest.raises(IndexError):
        batch_gather(x, index)


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_batch_gather_wide_unsigned_index_dtypes(dtype):
    x = torch.arange(6.0).reshape(2, 3)
    assert batch_gather(x, torch.tensor([[1], [2]], dtype=dtype)).flatten().tolist() == [1.0, 5.0]
