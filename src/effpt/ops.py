"""Reference implementations that the compilation pages build up to.

Each function here is the vectorised, device-agnostic form of an operation that a
gallery page first writes the slow or fragile way:

* :func:`batch_gather`: ``output[i] = input[i, index[i]]`` for every ``i`` at once.
* :func:`box_iou`: intersection over union of boxes, elementwise and broadcasting.
* :func:`uniformity_loss`: the uniformity loss of Wang & Isola (2020) through one
  matrix product instead of :func:`torch.pdist`.

All three run on whatever device their inputs live on and support autograd.
"""

from __future__ import annotations

import math

import torch

from effpt._validate import finite_float

__all__ = ["batch_gather", "box_iou", "uniformity_loss"]


def _check_tensor(name: str, value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        msg = f"{name} must be a torch.Tensor, got {type(value).__name__}"
        raise TypeError(msg)
    return value


def batch_gather(input: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Pick ``input[i, index[i]]`` for every batch row ``i``, without a Python loop.

    The rows of all batch elements are flattened into one axis and each index is
    shifted by its row's offset, so that a single :func:`torch.index_select` does the
    work; it runs on ``input``'s device and never synchronises with it.

    Parameters
    ----------
    input : torch.Tensor
        Shape ``(batch, n, *rest)``.
    index : torch.Tensor
        Integer tensor of any integer dtype (signed or unsigned, 8 to 64 bits), shape
        ``(batch, *k)``, with values in ``[-n, n)``; negative values count from the
        end of their own row, as in Python.

    Returns
    -------
    torch.Tensor
        Shape ``(batch, *k, *rest)``, on ``input``'s device, equal to
        ``torch.stack([input[i][index[i]] for i in range(batch)])``.

    Raises
    ------
    TypeError
        If ``index`` is not an integer tensor.
    ValueError
        If ``input`` has fewer than two dimensions, or the batch sizes or devices differ.
    IndexError
        If an index is outside ``[-n, n)`` (raised by :func:`torch.index_select` on
        CPU; a device-side assertion on CUDA). No index is ever read from another row.

    Examples
    --------
    >>> x = torch.arange(12).reshape(3, 4)      # (batch, n)
    >>> batch_gather(x, torch.tensor([[0, 3], [1, 1], [-1, 2]]))
    tensor([[ 0,  3],
            [ 5,  5],
            [11, 10]])
    >>> batch_gather(x, torch.tensor([[-1], [0], [3]], dtype=torch.int8))  # any integer dtype
    tensor([[ 3],
            [ 4],
            [11]])
    >>> batch_gather(x, torch.zeros(2, 1, dtype=torch.long))
    Traceback (most recent call last):
    ...
    ValueError: index must have the batch size of input: input has shape (3, 4) and index has shape (2, 1)
    """
    _check_tensor("input", input)
    _check_tensor("index", index)
    if input.dim() < 2:
        msg = f"input must have shape (batch, n, ...), got shape {tuple(input.shape)}"
        raise ValueError(msg)
    if index.dtype.is_floating_point or index.dtype.is_complex or index.dtype == torch.bool:
        msg = f"index must be an integer tensor, got dtype {index.dtype}"
        raise TypeError(msg)
    if index.dim() < 1 or index.shape[0] != input.shape[0]:
        msg = (
            "index must have the batch size of input: input has shape "
            f"{tuple(input.shape)} and index has shape {tuple(index.shape)}"
        )
        raise ValueError(msg)
    if index.device != input.device:
        msg = f"index is on {index.device} but input is on {input.device}; move one of them"
        raise ValueError(msg)
    batch, n = input.shape[:2]
    if n == 0 and index.numel() > 0:
        msg = (
            "index must be empty when input has no rows to pick from, "
            f"got shape {tuple(index.shape)}"
        )
        raise IndexError(msg)
    # The bounds and the negative-index arithmetic run in int64: in the index's own
    # dtype (int8, int16, uint8, int32) ``n``, ``-n`` or ``index + n`` can overflow.
    unsigned = not index.dtype.is_signed
    index = index.long()  # uint64 values of 2**63 or more turn negative here
    flat = input.reshape(batch * n, *input.shape[2:])  # (batch * n, *rest)
    offset = torch.arange(batch, device=input.device) * n  # (batch,)
    offset = offset.reshape(batch, *(1,) * (index.dim() - 1))  # (batch, 1, ..., 1)
    # Negative indices count from the end of their own row. An index outside [-n, n)
    # is sent past the end of ``flat``, so that index_select raises instead of quietly
    # reading a neighbouring row.
    in_range = (index >= (0 if unsigned else -n)) & (index < n)
    flat_index = torch.where(in_range, index.remainder(max(n, 1)) + offset, batch * n)
    picked = flat.index_select(0, flat_index.flatten())  # (batch * k..., *rest)
    return picked.reshape(*index.shape, *input.shape[2:])  # (batch, *k, *rest)


def box_iou(boxes1: torch.Tensor, boxes2: torch.Tensor, *, eps: float = 0.0) -> torch.Tensor:
    """Intersection over union of boxes given as ``(x, y, width, height)``.

    The two box tensors broadcast against each other, so matched pairs (shapes
    ``(n, 4)`` and ``(n, 4)``) and all pairs (``boxes1[:, None]`` against
    ``boxes2[None]``) use the same function. ``(x, y)`` is the corner with the smallest
    coordinates; widths and heights must be non-negative.

    Parameters
    ----------
    boxes1, boxes2 : torch.Tensor
        Floating-point tensors of shape ``(..., 4)`` that broadcast together.
    eps : float
        A union of area at most ``eps`` counts as empty and gives 0 (two empty boxes
        give 0, not NaN). The default 0 treats only an empty union so: IoU does not
        depend on scale, and a fixed floor would turn two identical boxes of side
        1e-3 into 0.1. Give a positive value only in your coordinates' units.

    Returns
    -------
    torch.Tensor
        The IoU in ``[0, 1]``, of the broadcast shape without the last dimension, in
        the boxes' dtype. float16 and bfloat16 boxes are computed in float32 (the area
        of a 300 × 300 box overflows float16).

    Examples
    --------
    >>> a = torch.tensor([[0.0, 0.0, 2.0, 2.0], [0.0, 0.0, 1.0, 1.0]])
    >>> b = torch.tensor([[1.0, 1.0, 2.0, 2.0], [5.0, 5.0, 1.0, 1.0]])
    >>> box_iou(a, b)            # 1 / (4 + 4 - 1), then disjoint boxes
    tensor([0.1429, 0.0000])
    >>> box_iou(a[:, None], b[None]).shape   # every box of a against every box of b
    torch.Size([2, 2])
    >>> box_iou(a * 1e-3, b * 1e-3)   # the same at any scale
    tensor([0.1429, 0.0000])
    >>> box_iou(a, b, eps="1e-5")
    Traceback (most recent call last):
    ...
    TypeError: eps must be a real number, got str
    >>> box_iou(a, b[:, :2])
    Traceback (most recent call last):
    ...
    ValueError: boxes2 must have shape (..., 4) as (x, y, width, height), got shape (2, 2)
    """
    for name, boxes in (("boxes1", boxes1), ("boxes2", boxes2)):
        _check_tensor(name, boxes)
        if boxes.dim() < 1 or boxes.shape[-1] != 4:
            msg = (
                f"{name} must have shape (..., 4) as (x, y, width, height), "
                f"got shape {tuple(boxes.shape)}"
            )
            raise ValueError(msg)
        if not boxes.dtype.is_floating_point:
            msg = f"{name} must be a floating-point tensor, got dtype {boxes.dtype}"
            raise TypeError(msg)
    try:
        torch.broadcast_shapes(boxes1.shape, boxes2.shape)
    except RuntimeError:
        msg = (
            f"boxes1 and boxes2 must broadcast together, got shapes {tuple(boxes1.shape)} "
            f"and {tuple(boxes2.shape)}"
        )
        raise ValueError(msg) from None
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        msg = f"eps must be a real number, got {type(eps).__name__}"
        raise TypeError(msg)
    eps = finite_float("eps", eps)  # an int too large for a float is named, not an OverflowError
    if not (math.isfinite(eps) and eps >= 0):
        msg = f"eps must be a finite number >= 0, got {eps!r}"
        raise ValueError(msg)
    dtype = torch.promote_types(boxes1.dtype, boxes2.dtype)
    work = torch.float32 if torch.finfo(dtype).bits < 32 else dtype  # areas overflow float16
    x1, y1, w1, h1 = boxes1.to(work).unbind(-1)
    x2, y2, w2, h2 = boxes2.to(work).unbind(-1)
    inter_w = (torch.minimum(x1 + w1, x2 + w2) - torch.maximum(x1, x2)).clamp(min=0)
    inter_h = (torch.minimum(y1 + h1, y2 + h2) - torch.maximum(y1, y2)).clamp(min=0)
    inter = inter_w * inter_h
    union = w1 * h1 + w2 * h2 - inter
    empty = union <= eps
    iou = inter / torch.where(empty, 1, union)  # no 0 / 0 where the union is empty
    return torch.where(empty, 0, iou.clamp(max=1)).to(dtype)  # (x + w) - x may pass w


def uniformity_loss(x: torch.Tensor, t: float = 2.0) -> torch.Tensor:
    """Uniformity loss of Wang & Isola (2020): ``log mean_{i<j} exp(-t |x_i - x_j|²)``.

    Computes the squared distances as ``|x_i|² + |x_j|² - 2 <x_i, x_j>`` with one matrix
    product and reduces with a log-sum-exp, which stays finite for large ``t``. Equal
    to ``torch.pdist(x).pow(2).mul(-t).exp().mean().log()``. On a GPU it is much faster
    to differentiate than :func:`torch.pdist` (8.6× in Thomas Viehmann's measurement);
    on a CPU the gain is small and varies, as the timing page shows.

    The points are centred first, so the result does not depend on where the cloud
    sits: the same unit vectors shifted by 1000 give the same loss in float32. The
    matrix-product form still loses digits on pairs much closer together than the
    cloud is wide (their squared distance is a small difference of large numbers);
    use float64 or :func:`torch.pdist` if those pairs dominate the loss.

    Parameters
    ----------
    x : torch.Tensor
        Floating-point tensor of shape ``(n, features)`` with ``n >= 2``; usually the
        rows are unit vectors (embeddings on the hypersphere).
    t : float
        Positive temperature; the paper uses 2.

    Returns
    -------
    torch.Tensor
        A scalar; lower means the points are spread more uniformly.

    Examples
    --------
    >>> corners = torch.eye(3)         # every pair is sqrt(2) apart
    >>> round(uniformity_loss(corners, t=2.0).item(), 4)    # log exp(-2 * 2)
    -4.0
    >>> far = corners + 1000                 # only distances matter
    >>> round(uniformity_loss(far, t=2.0).item(), 4)
    -4.0
    >>> uniformity_loss(torch.ones(1, 3))
    Traceback (most recent call last):
    ...
    ValueError: x must have shape (n, features) with n >= 2, got shape (1, 3)
    """
    _check_tensor("x", x)
    if x.dim() != 2 or x.shape[0] < 2:
        msg = f"x must have shape (n, features) with n >= 2, got shape {tuple(x.shape)}"
        raise ValueError(msg)
    if not x.dtype.is_floating_point:
        msg = f"x must be a floating-point tensor, got dtype {x.dtype}"
        raise TypeError(msg)
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        msg = f"t must be a real number, got {type(t).__name__}"
        raise TypeError(msg)
    t = finite_float("t", t)
    if not 0 < t < math.inf:
        msg = f"t must be positive and finite, got {t!r}"
        raise ValueError(msg)
    n = x.shape[0]
    # Only distances matter, so move the points' centre to the origin first: far from
    # it, |x_i|² and |x_j|² are large and their difference with 2<x_i, x_j> cancels
    # most of float32's digits. Far from the origin, subtracting the centre is exact.
    x = x - x.mean(dim=0).detach()  # (n, features)
    sq_norms = x.pow(2).sum(dim=1)  # (n,)
    # |x_i|² + |x_j|² - 2 <x_i, x_j> in one fused matrix product; rounding can leave
    # tiny negative distances, hence the clamp.
    sq_dist = torch.addmm(sq_norms[:, None] + sq_norms[None, :], x, x.T, alpha=-2)  # (n, n)
    logits = sq_dist.clamp(min=0).mul(-t)
    # Every pair appears twice off the diagonal (i, j and j, i) and never on it:
    # log sum_{i != j} = log 2 + log sum_{i < j}, and there are n (n - 1) ordered pairs.
    logits = logits.fill_diagonal_(-math.inf)
    return torch.logsumexp(logits.flatten(), dim=0) - math.log(n * (n - 1))
