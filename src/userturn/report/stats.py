"""Small pure statistics the reports need on top of the summary: intervals for accuracy and pooled rates."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from userturn import stats


def wilson_interval(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """:func:`userturn.stats.wilson_interval` at a confidence level, for counts rebuilt from rates.

    Args:
        successes: number of successes; rounded to an integer and clipped to ``[0, n]`` (``accuracy * n``
            is a float that should be a count).
        n: number of trials; ``n <= 0`` gives the uninformative interval ``(0.0, 1.0)``.
        confidence: two-sided level in (0, 1).
    """
    trials = int(round(n))
    if trials <= 0:
        return 0.0, 1.0
    count = min(max(int(round(successes)), 0), trials)
    return stats.wilson_interval(count, trials, z=NormalDist().inv_cdf(0.5 + confidence / 2))


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson correlation; None with fewer than two points or when either side has no variance."""
    if len(xs) != len(ys) or len(xs) < 2:
        return None
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    syy = sum((y - mean_y) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    return sxy / math.sqrt(sxx * syy)
