"""Statistics for the probe: pure functions, tested against hand-computed values."""

from __future__ import annotations

import math


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% by default).

    Args:
        successes: number of successes, ``0 <= successes <= n``.
        n: number of trials. With ``n == 0`` the interval is the uninformative ``(0.0, 1.0)``.
        z: the normal quantile; 1.96 gives a 95% interval.

    Unlike the normal approximation it stays inside [0, 1] and is not degenerate at 0 or n successes
    (0 of 36 gives roughly (0, 0.096), not (0, 0)).
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Rounding can put the bound a hair past p at 0 or n successes (2.8e-17 for 0 of 6): the interval must hold p.
    return min(p, max(0.0, centre - half)), max(p, min(1.0, centre + half))
