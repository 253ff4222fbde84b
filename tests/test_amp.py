"""Tests of effpt.amp: checkerboard data and float16 flush counts against references."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from effpt.amp import checkerboard, checkerboard_task, coordinate_grid, float16_flush_fraction


@given(height=st.integers(1, 40), width=st.integers(1, 40))
def test_coordinate_grid_matches_numpy_meshgrid(height, width):
    ys, xs = np.meshgrid(
        np.arange(height, dtype=np.float64) / height,
        np.arange(width, dtype=np.float64) / width,
        indexing="ij",
    )
    grid = coordinate_grid(height, width)
    assert grid.shape == (2, height, width)
    np.testing.assert_allclose(grid[0].numpy(), xs, rtol=0, atol=1e-7)
    np.testing.assert_allclose(grid[1].numpy(), ys, rtol=0, atol=1e-7)
    assert grid.min() >= 0
    assert grid.max() < 1


@given(squares=st.integers(1, 8), rows=st.integers(1, 6), cols=st.integers(1, 6))
def test_checkerboard_equals_kronecker_of_a_parity_board(squares, rows, cols):
    parity = np.add.outer(np.arange(squares), np.arange(squares)) % 2  # (squares, squares)
    expected = np.kron(parity, np.ones((rows, cols)))  # (squares*rows, squares*cols)
    board = checkerboard(squares * rows, squares * cols, squares=squares)
    np.testing.assert_array_equal(board.numpy(), expected)


@given(size=st.integers(2, 64), squares=st.integers(1, 64))
def test_checkerboard_properties_for_any_size(size, squares):
    if squares > size:
        with pytest.raises(ValueError, match="squares must be <="):
            checkerboard(size, size, squares=squares)
        return
    board = checkerboard(size, size, squares=squares)
    assert set(board.unique().tolist()) <= {0.0, 1.0}
    assert board[0, 0] == 0
    assert torch.equal(board, board.T)  # a square board is symmetric
    # every row holds exactly `squares` runs of constant colour
    runs = 1 + (board[0, 1:] != board[0, :-1]).sum().item()
    assert runs == squares


def test_checkerboard_task_shapes_and_consistency():
    inputs, targets = checkerboard_task(24, squares=3)
    assert inputs.shape == (1, 2, 24, 24)
    assert targets.shape == (1, 1, 24, 24)
    assert torch.equal(inputs[0], coordinate_grid(24, 24))
    assert torch.equal(targets[0, 0], checkerboard(24, 24, squares=3))
    assert targets.mean().item() == pytest.approx(4 / 9)  # 4 of the 9 squares are ones


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: coordinate_grid(3, 0), ValueError, "width must be >= 1, got 0"),
        (lambda: coordinate_grid(3.0, 2), TypeError, "height must be an int, got float"),
        (lambda: checkerboard(8, 8, squares=True), TypeError, "squares must be an int, got bool"),
        (lambda: checkerboard_task(-1), ValueError, "height must be >= 1, got -1"),
        (lambda: coordinate_grid(2**70, 2), ValueError, r"height must be <= 2\*\*31, got 2\*\*70"),
        (lambda: checkerboard(4, 10**30), ValueError, r"width must be <= 2\*\*31, got an int"),
        (lambda: checkerboard_task(2**64), ValueError, r"height must be <= 2\*\*31"),
    ],
)
def test_sizes_are_validated(call, error, match):
    with pytest.raises(error, match=match):
        call()


magnitudes = st.lists(st.floats(-14, 4), min_size=1, max_size=200)


@settings(deadline=None)
@given(logs=magnitudes, log_scale=st.integers(0, 20), negative=st.booleans())
def test_flush_fraction_matches_numpy_float16(logs, log_scale, negative):
    values = np.power(10.0, np.array(logs))  # float64 reference values
    if negative:
        values = -values
    scale = 2.0**log_scale
    with np.errstate(over="ignore"):  # values past 65504 become inf, not zero
        expected = np.mean(np.float16(values * scale) == 0)
    got = float16_flush_fraction(torch.from_numpy(values), scale=scale)
    assert got == pytest.approx(expected, abs=1e-12)


def test_flush_fraction_threshold_is_half_the_smallest_subnormal():
    tiny = 2.0**-24
    values = torch.tensor([tiny, tiny * 0.51, tiny * 0.49, 1.0], dtype=torch.float64)
    assert float16_flush_fraction(values) == 0.25
    assert float16_flush_fraction(values, scale=2.0) == 0.0


@pytest.mark.parametrize(
    ("values", "scale", "error", "match"),
    [
        ([1e-9], 1.0, TypeError, "values must be a torch.Tensor, got list"),
        (torch.tensor([1, 2]), 1.0, TypeError, "floating-point dtype, got torch.int64"),
        (torch.tensor([1e-9]), -1.0, ValueError, "scale must be a positive finite number"),
        (torch.tensor([1e-9]), float("inf"), ValueError, "scale must be a positive finite"),
        (torch.tensor([1e-9]), float("nan"), ValueError, "scale must be a positive finite"),
        (torch.zeros(3), 1.0, ValueError, "no non-zero element"),
        (torch.tensor([1e-9]), 10**400, ValueError, r"scale must be .* got an int of 1329 bits"),
        (torch.tensor([1e-9]), 2**1100, ValueError, r"scale must be .* got 2\*\*1100"),
        (torch.tensor([1e-9]), "2", TypeError, r"scale must be a real number, got str"),
    ],
)
def test_flush_fraction_rejects_bad_input(values, scale, error, match):
    with pytest.raises(error, match=match):
        float16_flush_fraction(values, scale=scale)
