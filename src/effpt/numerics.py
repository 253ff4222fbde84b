"""Numerically stable softmax, log-softmax and soft-label cross-entropy.

The textbook formulas overflow: ``exp(1000.)`` is ``inf`` in float32, so a softmax
written as ``exp(z) / exp(z).sum()`` returns ``nan``. Subtracting the largest logit
first changes nothing mathematically and keeps every exponent at or below zero; taking
the logarithm through ``log-sum-exp`` instead of ``log(softmax(z))`` keeps tiny
probabilities from rounding to ``log(0) = -inf``. These functions are the reference
implementations the numerics pages of the gallery build up to; PyTorch's own
:func:`torch.softmax`, :func:`torch.log_softmax` and
:func:`torch.nn.functional.cross_entropy` do the same and are faster.

Inputs in a format narrower than float32 (float16, bfloat16) are computed in float32
and the result is cast back, as PyTorch's kernels do.
"""

from __future__ import annotations

import operator

import torch

from effpt._validate import check_float_tensor

__all__ = ["REDUCTIONS", "cross_entropy", "log_softmax", "softmax"]

#: Values accepted by the ``reduction`` argument of :func:`cross_entropy`.
REDUCTIONS = ("mean", "sum", "none")


def _check_logits(logits: object, dim: object, name: str = "logits") -> int:
    """Validate ``logits`` and ``dim``; return ``dim`` as a non-negative index."""
    check_float_tensor(name, logits)
    if logits.ndim == 0:
        msg = f"{name} must have at least one dimension, got a 0-d tensor"
        raise ValueError(msg)
    if isinstance(dim, bool) or not hasattr(dim, "__index__"):
        msg = f"dim must be an int, got {type(dim).__name__}"
        raise TypeError(msg)
    dim = operator.index(dim)  # a NumPy integer too, as torch accepts
    if not -logits.ndim <= dim < logits.ndim:
        msg = (
            f"dim {dim} is out of range for {name} with {logits.ndim} dimension(s) "
            f"(shape {tuple(logits.shape)}); expected an int in [{-logits.ndim}, {logits.ndim - 1}]"
        )
        raise ValueError(msg)
    return dim % logits.ndim


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for narrower formats, the input's own dtype otherwise."""
    return torch.promote_types(dtype, torch.float32)


def _shifted(logits: torch.Tensor, dim: int) -> torch.Tensor:
    """``logits - max(logits)`` along ``dim``: every entry is <= 0 and one is exactly 0.

    The maximum is a constant as far as the result is concerned, so it is detached: the
    gradient through it would cancel exactly in exact arithmetic. An empty ``dim`` has no
    maximum (``amax`` raises) and nothing to shift: it is returned as it is, so that the
    callers return empty results as :func:`torch.softmax` does.
    """
    z = logits.to(_compute_dtype(logits.dtype))
    if z.shape[dim] == 0:
        return z
    return z - z.amax(dim=dim, keepdim=True).detach()


def softmax(logits: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of ``logits`` along ``dim``, computed without overflow.

    ``exp(z - max z) / sum(exp(z - max z))``: the largest exponent is ``exp(0) = 1``,
    so the denominator lies between 1 and the length of ``dim``.

    Parameters
    ----------
    logits : torch.Tensor
        Floating-point scores, at least one dimension.
    dim : int
        The dimension the probabilities sum to one over (negative counts from the end).

    Returns
    -------
    torch.Tensor
        Probabilities, same shape and dtype as ``logits``.

    Examples
    --------
    >>> import torch
    >>> softmax(torch.tensor([1000.0, 0.0]))  # the naive formula gives [nan, 0.]
    tensor([1., 0.])
    >>> softmax(torch.tensor([[0.0, 0.0], [1.0, 1.0]]), dim=0)
    tensor([[0.2689, 0.2689],
            [0.7311, 0.7311]])
    >>> softmax(torch.zeros(3, 0)).shape  # an empty dim gives an empty result, as in torch
    torch.Size([3, 0])
    >>> softmax(torch.tensor([1.0, 2.0]), dim=1)
    Traceback (most recent call last):
    ...
    ValueError: dim 1 is out of range for logits with 1 dimension(s) (shape (2,)); expected an int in [-1, 0]
    """
    dim = _check_logits(logits, dim)
    exp = _shifted(logits, dim).exp()
    return (exp / exp.sum(dim=dim, keepdim=True)).to(logits.dtype)


def log_softmax(logits: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Logarithm of :func:`softmax` along ``dim``, finite wherever ``logits`` are.

    ``(z - max z) - log(sum(exp(z - max z)))``, the log-sum-exp form. Taking
    ``log(softmax(z))`` instead turns every probability that underflowed to 0 into
    ``-inf``.

    Parameters
    ----------
    logits : torch.Tensor
        Floating-point scores, at least one dimension.
    dim : int
        The dimension to normalise over (negative counts from the end).

    Returns
    -------
    torch.Tensor
        Log-probabilities, same shape and dtype as ``logits``.

    Examples
    --------
    >>> import torch
    >>> log_softmax(torch.tensor([1000.0, 0.0]))  # log(softmax) gives [0., -inf]
    tensor([    0., -1000.])
    >>> log_softmax(torch.tensor([1.0, 1.0])).exp()
    tensor([0.5000, 0.5000])
    >>> log_softmax(torch.tensor([1, 2]))
    Traceback (most recent call last):
    ...
    TypeError: logits must have a floating-point dtype, got torch.int64
    """
    dim = _check_logits(logits, dim)
    shifted = _shifted(logits, dim)
    return (shifted - shifted.exp().sum(dim=dim, keepdim=True).log()).to(logits.dtype)


def cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    dim: int = -1,
    reduction: str = "mean",
) -> torch.Tensor:
    """Cross-entropy between soft labels ``target`` and ``softmax(logits)`` along ``dim``.

    ``-sum(target * log_softmax(logits))`` along ``dim``. Each slice of ``target``
    along ``dim`` should be a probability distribution (non-negative, summing to one);
    this is not checked, as reading the values back would stall an accelerator. The
    gradient with respect to ``logits`` is ``softmax(logits) * target.sum(dim) - target``,
    so it is finite whenever the logits are.

    Parameters
    ----------
    logits : torch.Tensor
        Floating-point scores, at least one dimension.
    target : torch.Tensor
        Probabilities, floating point, same shape as ``logits``.
    dim : int
        The class dimension (negative counts from the end). Note that
        :func:`torch.nn.functional.cross_entropy` uses dimension 1 of batched input.
    reduction : str
        ``"mean"`` or ``"sum"`` of the per-example losses, or ``"none"`` to return them
        (the shape of ``logits`` with ``dim`` removed). An empty class dimension gives a
        loss of 0 per example (an empty sum), so its mean is 0, where
        :func:`torch.nn.functional.cross_entropy` returns ``nan``; the mean over an empty
        batch is ``nan`` in both.

    Returns
    -------
    torch.Tensor
        The loss, in the dtype of ``logits``.

    Examples
    --------
    >>> import torch
    >>> logits = torch.tensor([1000.0, 0.0], requires_grad=True)
    >>> loss = cross_entropy(logits, torch.tensor([0.5, 0.5]))  # log(softmax) gives inf
    >>> loss
    tensor(500., grad_fn=<MeanBackward0>)
    >>> torch.autograd.grad(loss, logits)[0]
    tensor([ 0.5000, -0.5000])
    >>> cross_entropy(torch.zeros(3, 2), torch.tensor([[1.0, 0.0]] * 3), reduction="none")
    tensor([0.6931, 0.6931, 0.6931])
    >>> cross_entropy(torch.zeros(3, 0), torch.zeros(3, 0), reduction="none").abs()
    tensor([0., 0., 0.])
    >>> cross_entropy(torch.zeros(3, 2), torch.tensor([0, 1, 1]))
    Traceback (most recent call last):
    ...
    TypeError: target must hold probabilities with a floating-point dtype, got torch.int64; \
turn class indices into probabilities with torch.nn.functional.one_hot(target, 2).float()
    """
    dim = _check_logits(logits, dim)
    if not isinstance(target, torch.Tensor):
        msg = f"target must be a torch.Tensor, got {type(target).__name__}"
        raise TypeError(msg)
    if not target.is_floating_point():
        msg = (
            f"target must hold probabilities with a floating-point dtype, got {target.dtype}; "
            "turn class indices into probabilities with "
            f"torch.nn.functional.one_hot(target, {logits.shape[dim]}).float()"
        )
        raise TypeError(msg)
    if target.shape != logits.shape:
        msg = (
            f"target must have the shape of logits {tuple(logits.shape)}, got {tuple(target.shape)}"
        )
        raise ValueError(msg)
    if reduction not in REDUCTIONS:
        msg = f"reduction must be one of {', '.join(map(repr, REDUCTIONS))}, got {reduction!r}"
        raise ValueError(msg)

    compute = _compute_dtype(logits.dtype)
    log_p = log_softmax(logits.to(compute), dim=dim)
    per_example = -(target.to(compute) * log_p).sum(dim=dim)
    if reduction == "mean":
        per_example = per_example.mean()
    elif reduction == "sum":
        per_example = per_example.sum()
    return per_example.to(logits.dtype)
