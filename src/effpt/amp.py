"""Data and measurements shared by the mixed-precision pages.

The checkerboard task of the mixed-precision pages learns an image from its own pixel
coordinates: :func:`coordinate_grid` gives the inputs, :func:`checkerboard` the target
and :func:`checkerboard_task` both, shaped for a 2-d convolution. Because every pixel is
an independent sample, a stack of 1×1 convolutions on one image is a wide MLP trained on
``height × width`` points at once, which is what makes the task a good matmul benchmark.

:func:`float16_flush_fraction` answers the question behind gradient scaling: which
fraction of some float32 values would become exactly zero when cast to float16, with or
without multiplying them by a scale first.
"""

from __future__ import annotations

import torch

from effpt._validate import check_float_tensor

__all__ = ["checkerboard", "checkerboard_task", "coordinate_grid", "float16_flush_fraction"]


#: Largest side a grid or checkerboard may have (torch's sizes and memory end long before).
MAX_SIZE = 2**31


def _show_int(value: int) -> str:
    """An int as the error message shows it: its digits, or its size when it is huge."""
    if value.bit_length() > 64:
        exact = f"2**{value.bit_length() - 1}" if value & (value - 1) == 0 else None
        return exact or f"an int of {value.bit_length()} bits"
    return str(value)


def _check_size(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        msg = f"{name} must be an int, got {type(value).__name__}"
        raise TypeError(msg)
    if value < 1:
        msg = f"{name} must be >= 1, got {_show_int(value)}"
        raise ValueError(msg)
    if value > MAX_SIZE:
        msg = f"{name} must be <= 2**31, got {_show_int(value)}"
        raise ValueError(msg)


def coordinate_grid(
    height: int, width: int, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """Return the pixel coordinates of a ``height × width`` image, scaled to [0, 1).

    Channel 0 holds the column (x) coordinate, channel 1 the row (y) coordinate.

    Examples
    --------
    >>> g = coordinate_grid(2, 4)
    >>> g.shape, g.dtype
    (torch.Size([2, 2, 4]), torch.float32)
    >>> g[0, 0].tolist(), g[1, :, 0].tolist()
    ([0.0, 0.25, 0.5, 0.75], [0.0, 0.5])
    >>> coordinate_grid(0, 4)
    Traceback (most recent call last):
    ...
    ValueError: height must be >= 1, got 0
    """
    _check_size("height", height)
    _check_size("width", width)
    xs = torch.arange(width, device=device, dtype=torch.float32) / width  # (width,)
    ys = torch.arange(height, device=device, dtype=torch.float32) / height  # (height,)
    cols = xs.expand(height, width)  # (height, width)
    rows = ys[:, None].expand(height, width)  # (height, width)
    return torch.stack([cols, rows])  # (2, height, width)


def checkerboard(
    height: int, width: int, *, squares: int = 8, device: torch.device | str | None = None
) -> torch.Tensor:
    """Return a ``height × width`` checkerboard of 0.0 and 1.0 with ``squares`` squares a side.

    The top-left square is 0. Each side must hold at least one pixel per square.

    Examples
    --------
    >>> checkerboard(4, 4, squares=2).tolist()
    [[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]]
    >>> checkerboard(64, 64).mean().item()
    0.5
    >>> checkerboard(4, 4, squares=8)
    Traceback (most recent call last):
    ...
    ValueError: squares must be <= min(height, width) = 4, got 8
    """
    _check_size("height", height)
    _check_size("width", width)
    _check_size("squares", squares)
    if squares > min(height, width):
        msg = f"squares must be <= min(height, width) = {min(height, width)}, got {squares}"
        raise ValueError(msg)
    col_square = torch.arange(width, device=device) * squares // width  # (width,)
    row_square = torch.arange(height, device=device) * squares // height  # (height,)
    parity = (row_square[:, None] + col_square[None, :]) % 2  # (height, width)
    return parity.to(torch.float32)


def checkerboard_task(
    size: int, *, squares: int = 8, device: torch.device | str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(inputs, targets)`` of the checkerboard task on a ``size × size`` image.

    ``inputs`` has shape ``(1, 2, size, size)`` (one image, x and y channels) and
    ``targets`` has shape ``(1, 1, size, size)``: the batch layout of
    :class:`torch.nn.Conv2d`.

    Examples
    --------
    >>> inputs, targets = checkerboard_task(16, squares=4)
    >>> tuple(inputs.shape), tuple(targets.shape)
    ((1, 2, 16, 16), (1, 1, 16, 16))
    >>> targets[0, 0, 0, :8].tolist()
    [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    """
    inputs = coordinate_grid(size, size, device=device)[None]  # (1, 2, size, size)
    targets = checkerboard(size, size, squares=squares, device=device)  # (size, size)
    return inputs, targets[None, None]  # (1, 1, size, size)


def float16_flush_fraction(values: torch.Tensor, scale: float = 1.0) -> float:
    """Fraction of the non-zero ``values`` that become exactly 0 in float16 after ``× scale``.

    The product is formed in float64 on the CPU (whatever device ``values`` is on), so
    the only rounding is the cast to float16: a magnitude below half of float16's
    smallest subnormal (2⁻²⁴ ≈ 6.0e-8) flushes to zero.
    Values that are already zero are not counted at all.

    Examples
    --------
    >>> v = torch.tensor([1e-3, 1e-6, 1e-9, 1e-13, 0.0])
    >>> float16_flush_fraction(v)
    0.5
    >>> float16_flush_fraction(v, scale=2.0**16)
    0.25
    >>> float16_flush_fraction(v, scale=0)
    Traceback (most recent call last):
    ...
    ValueError: scale must be a positive finite number (a float64), got 0
    """
    check_float_tensor("values", values)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        msg = f"scale must be a real number, got {type(scale).__name__}"
        raise TypeError(msg)
    try:
        factor = float(scale)  # an int past float64's range overflows here
    except OverflowError:
        factor = float("inf")
    if not (0 < factor < float("inf")):
        shown = _show_int(scale) if isinstance(scale, int) else repr(scale)
        msg = f"scale must be a positive finite number (a float64), got {shown}"
        raise ValueError(msg)
    # float64 on the CPU: MPS has no float64, and the count needs no accelerator.
    flat = values.detach().reshape(-1).to("cpu", torch.float64)  # (n,)
    nonzero = flat[flat != 0]  # (k,)
    if nonzero.numel() == 0:
        msg = "values holds no non-zero element, so no fraction can be formed"
        raise ValueError(msg)
    flushed = (nonzero * factor).to(torch.float16) == 0  # (k,)
    return flushed.double().mean().item()
