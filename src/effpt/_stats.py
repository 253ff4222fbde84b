"""Distribution-free confidence intervals behind every verdict (private: not part of the API).

Timings are skewed and carry outliers, and a page has few of them, so the intervals
here assume nothing about their distribution. :func:`ratio_interval` gives the
interval of a speed-up from the ranks of every pairwise ratio (the Mann-Whitney
interval of a shift, on the logarithm of the times): when the two variants' times
come from one distribution it excludes 1 with probability at most ``1 - LEVEL``,
whatever that distribution is and however few repeats there are. :func:`median_interval`
does the same for the median of one timing, from its order statistics. With too few
repeats no interval reaches the level, and both return None: "inconclusive".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from statistics import NormalDist

#: The confidence level of every interval a verdict is drawn from.
LEVEL = 0.95
#: Above this many pairs the rank statistic's law is taken from its normal approximation.
_EXACT_PAIRS = 4096


@lru_cache(maxsize=512)
def _rank_counts(n: int, m: int) -> tuple[int, ...]:
    """How many orderings of n + m values give each count U of pairs won (0 … n·m).

    The counts are the coefficients of the Gaussian binomial [n + m choose n] in q,
    the product over i of (1 - q^(m + i)) / (1 - q^i).
    """
    counts = [1] + [0] * (n * m)
    top = 0
    for i in range(1, n + 1):
        top += m
        for k in range(top, m + i - 1, -1):  # times (1 - q^(m + i))
            counts[k] -= counts[k - m - i]
        for k in range(i, top + 1):  # divided by (1 - q^i)
            counts[k] += counts[k - i]
    return tuple(counts)


@lru_cache(maxsize=512)
def rank_depth(n: int, m: int, level: float = LEVEL) -> int:
    """The largest k with P(U <= k - 1) <= (1 - level) / 2 under no difference; 0 if none.

    The interval of a speed-up runs from the k-th smallest pairwise ratio to the k-th
    largest; 0 means no interval of n and m repeats reaches ``level``.

    Examples
    --------
    >>> rank_depth(2, 2), rank_depth(3, 3), rank_depth(4, 4), rank_depth(5, 5), rank_depth(30, 30)
    (0, 0, 1, 3, 318)
    """
    tail = (1 - level) / 2
    if n * m > _EXACT_PAIRS:
        mean, sd = n * m / 2, math.sqrt(n * m * (n + m + 1) / 12)
        return max(0, math.floor(mean - NormalDist().inv_cdf(1 - tail) * sd + 0.5))
    counts = _rank_counts(n, m)
    total = math.comb(n + m, n)
    below, k = 0, 0
    while k < len(counts) and (below + counts[k]) <= tail * total:
        below += counts[k]
        k += 1
    return k


def ratio_interval(
    slow: Sequence[float], fast: Sequence[float], level: float = LEVEL
) -> tuple[float, float] | None:
    """The ``level`` confidence interval of how many times faster ``fast`` ran, or None.

    Examples
    --------
    >>> ratio_interval([10, 11, 9, 10, 12], [5, 5.5, 4.5, 5, 6])
    (1.6666666666666667, 2.4)
    >>> ratio_interval([10, 11, 9], [5, 5.5, 4.5]) is None  # three repeats reach only 90 %
    True
    """
    k = rank_depth(len(slow), len(fast), level)
    if k == 0:
        return None
    pairs = sorted(s / f for s in slow for f in fast)
    return pairs[k - 1], pairs[-k]


def median_interval(samples: Sequence[float], level: float = LEVEL) -> tuple[float, float] | None:
    """The ``level`` confidence interval of the median of ``samples``, or None (n < 6).

    Examples
    --------
    >>> median_interval([3, 1, 2, 5, 4, 6])
    (1, 6)
    >>> median_interval([3, 1, 2, 5, 4]) is None
    True
    """
    n = len(samples)
    tail = (1 - level) / 2
    below, k = 0.0, 0
    while k < n and below + math.comb(n, k) / 2**n <= tail:
        below += math.comb(n, k) / 2**n
        k += 1
    if k == 0:
        return None
    ordered = sorted(samples)
    return ordered[k - 1], ordered[n - k]
