"""Statistics for the probe: pure functions, tested against hand-computed values.

Samples of one item are not independent (k samples share the item's context), so intervals for
rates pooled over samples resample *items*, not samples (item-clustered bootstrap). Every
bootstrap takes a seed and gives the same interval for the same seed. Intervals are percentile
intervals of ``n_boot`` resamples.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054
DEFAULT_BOOTSTRAP = 2000


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
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


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a (bootstrap) interval; ``low``/``high`` are None when no interval exists."""

    value: float | None
    low: float | None
    high: float | None
    n: int

    def as_dict(self, prefix: str = "") -> dict[str, float | int | None]:
        return {f"{prefix}value" if prefix else "value": self.value, f"{prefix}ci_low": self.low,
                f"{prefix}ci_high": self.high, f"{prefix}n": self.n}


def percentile_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The central ``level`` interval of ``values`` (linear interpolation between order statistics,
    numpy's default): for 0.95 the 2.5th and 97.5th percentiles. NaN values are ignored.

    Raises:
        ValueError: no finite value, or ``level`` outside (0, 1).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    array = np.asarray(values, dtype=float)
    array = array[~np.isnan(array)]
    if array.size == 0:
        raise ValueError("no finite values to take an interval of")
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(array, [tail, 100 - tail])
    return float(low), float(high)


def _counts(items: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    successes = np.array([s for s, _ in items], dtype=float)
    trials = np.array([n for _, n in items], dtype=float)
    if np.any(trials < 0) or np.any(successes < 0) or np.any(successes > trials):
        raise ValueError("every item needs 0 <= successes <= trials")
    return successes, trials


def _resample_indices(n_items: int, n_boot: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n_items, size=(n_boot, n_items))


def pooled_rate(items: Sequence[tuple[int, int]]) -> float | None:
    """Sum of successes over sum of trials; None when there are no trials."""
    successes, trials = _counts(items)
    total = trials.sum()
    return float(successes.sum() / total) if total > 0 else None


def clustered_rate_interval(items: Sequence[tuple[int, int]], *, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0,
                            level: float = 0.95) -> Estimate:
    """A rate pooled over items' samples, with an item-clustered bootstrap interval.

    Args:
        items: one ``(successes, trials)`` pair per item (e.g. follow-ups among its k samples).
            Items with 0 trials count for nothing.
        n_boot: bootstrap resamples of the items (with replacement); each gives the pooled rate of
            the resampled items. Resamples without any trial are skipped.

    With a single item, or when every item has the same rate, the interval collapses to the point:
    the bootstrap only sees between-item variation. Empty input gives ``Estimate(None, None, None, 0)``.
    """
    successes, trials = _counts(items)
    if trials.sum() <= 0:
        return Estimate(None, None, None, len(items))
    value = float(successes.sum() / trials.sum())
    index = _resample_indices(len(items), n_boot, seed)
    total = trials[index].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(total > 0, successes[index].sum(axis=1) / np.where(total > 0, total, 1), np.nan)
    low, high = percentile_interval(rates, level)
    return Estimate(value, low, high, len(items))


def any_in_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of "at least one success in k draws" from ``c`` successes among ``n`` samples
    (the pass@k estimator, Chen et al. 2021): ``1 - C(n-c, k) / C(n, k)``.

    Args:
        n: samples drawn for the item (``n >= k``).
        c: successes among them.
        k: draws; ``k == n`` gives 1 when any sample succeeded and 0 otherwise.

    Raises:
        ValueError: ``k`` outside ``1..n`` or ``c`` outside ``0..n``.
    """
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def any_in_k_rate(items: Sequence[tuple[int, int]], k: int, *, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0,
                  level: float = 0.95) -> Estimate:
    """Mean over items of :func:`any_in_k`, with a bootstrap interval over items.

    Items with fewer than ``k`` samples are left out (their estimate is undefined); ``n`` of the
    result counts the items used.
    """
    scores = np.array([any_in_k(n, c, k) for c, n in items if n >= k], dtype=float)
    if scores.size == 0:
        return Estimate(None, None, None, 0)
    index = _resample_indices(scores.size, n_boot, seed)
    low, high = percentile_interval(scores[index].mean(axis=1), level)
    return Estimate(float(scores.mean()), low, high, int(scores.size))


def paired_difference(control: Sequence[tuple[int, int]], treatment: Sequence[tuple[int, int]], *,
                      n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0, level: float = 0.95) -> Estimate:
    """Pooled treatment rate minus pooled control rate on the same items, with a paired bootstrap.

    Args:
        control, treatment: ``(successes, trials)`` per item, in the same item order; each resample
            draws items and keeps both arms of every drawn item together, so item difficulty
            cancels out of the interval.

    Raises:
        ValueError: the two arms have different lengths.
    """
    if len(control) != len(treatment):
        raise ValueError(f"paired arms need the same items, got {len(control)} and {len(treatment)}")
    cs, cn = _counts(control)
    ts, tn = _counts(treatment)
    if cn.sum() <= 0 or tn.sum() <= 0:
        return Estimate(None, None, None, len(control))
    value = float(ts.sum() / tn.sum() - cs.sum() / cn.sum())
    index = _resample_indices(len(control), n_boot, seed)
    c_total, t_total = cn[index].sum(axis=1), tn[index].sum(axis=1)
    ok = (c_total > 0) & (t_total > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        diffs = np.where(ok, ts[index].sum(axis=1) / np.where(ok, t_total, 1)
                         - cs[index].sum(axis=1) / np.where(ok, c_total, 1), np.nan)
    low, high = percentile_interval(diffs, level)
    return Estimate(value, low, high, len(control))


def effect_verdict(expected: str, low: float | None, high: float | None) -> str:
    """Check an effect's interval against its declared direction.

    Returns ``as_expected`` when the interval excludes 0 on the expected side, ``opposite`` when it
    excludes 0 on the other side, and ``not_significant`` when it contains 0 (or is missing). For
    ``expected == "none"`` an interval containing 0 is ``as_expected`` and one excluding it ``opposite``.
    """
    if low is None or high is None:
        return "not_significant"
    side = "up" if low > 0 else "down" if high < 0 else None
    if expected == "none":
        return "as_expected" if side is None else "opposite"
    if side is None:
        return "not_significant"
    return "as_expected" if side == expected else "opposite"


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks with ties given their average rank (``[10, 20, 20, 30]`` → ``[1, 2.5, 2.5, 4]``)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            result[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return result


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r; None with fewer than two pairs or when either variable is constant."""
    if len(x) != len(y):
        raise ValueError(f"need pairs, got {len(x)} and {len(y)} values")
    if len(x) < 2:
        return None
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx <= 0 or syy <= 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson's r of the (tie-averaged) ranks; None as for :func:`pearson`."""
    if len(x) != len(y):
        raise ValueError(f"need pairs, got {len(x)} and {len(y)} values")
    return pearson(ranks(x), ranks(y))


def correlation_interval(x: Sequence[float], y: Sequence[float], method: Callable[[Sequence[float],
                         Sequence[float]], float | None], *, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0,
                         level: float = 0.95, min_pairs: int = 3) -> Estimate:
    """A correlation with a bootstrap interval over the pairs (e.g. models).

    Args:
        method: :func:`pearson` or :func:`spearman`.
        min_pairs: below this many pairs no interval is given (``low``/``high`` None): with two
            models every correlation is ±1 and resampling them says nothing. Resamples in which a
            variable is constant are skipped; with fewer than half of the resamples usable the
            interval is None as well.
    """
    value = method(x, y)
    n = len(x)
    if value is None or n < min_pairs:
        return Estimate(value, None, None, n)
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    index = _resample_indices(n, n_boot, seed)
    draws = [method(list(xs[row]), list(ys[row])) for row in index]
    usable = [d for d in draws if d is not None]
    if len(usable) < n_boot / 2:
        return Estimate(value, None, None, n)
    low, high = percentile_interval(usable, level)
    return Estimate(value, low, high, n)


def group_difference(first: Sequence[tuple[int, int]], second: Sequence[tuple[int, int]], *,
                     n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0, level: float = 0.95) -> Estimate:
    """Pooled rate of ``first`` minus pooled rate of ``second`` for two *disjoint* groups of items
    (e.g. items answered correctly vs wrongly), resampling items within each group."""
    fs, fn = _counts(first)
    ss, sn = _counts(second)
    if fn.sum() <= 0 or sn.sum() <= 0:
        return Estimate(None, None, None, len(first) + len(second))
    value = float(fs.sum() / fn.sum() - ss.sum() / sn.sum())
    rng = np.random.default_rng(seed)
    fi = rng.integers(0, len(first), size=(n_boot, len(first)))
    si = rng.integers(0, len(second), size=(n_boot, len(second)))
    f_total, s_total = fn[fi].sum(axis=1), sn[si].sum(axis=1)
    ok = (f_total > 0) & (s_total > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        diffs = np.where(ok, fs[fi].sum(axis=1) / np.where(ok, f_total, 1)
                         - ss[si].sum(axis=1) / np.where(ok, s_total, 1), np.nan)
    low, high = percentile_interval(diffs, level)
    return Estimate(value, low, high, len(first) + len(second))


def mean_interval(values: Sequence[float], *, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0,
                  level: float = 0.95) -> Estimate:
    """The mean of per-item values (e.g. mean similarity per item) with a bootstrap interval over items."""
    array = np.asarray(values, dtype=float)
    if array.size == 0:
        return Estimate(None, None, None, 0)
    index = _resample_indices(array.size, n_boot, seed)
    low, high = percentile_interval(array[index].mean(axis=1), level)
    return Estimate(float(array.mean()), low, high, int(array.size))


def word_tokens(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, apostrophes) used by the lexical similarity."""
    return re.findall(r"[a-z0-9']+", text.lower())


def lexical_similarity(generated: str, reference: str) -> float:
    """Unigram F1 between two texts' word tokens (bag of words with counts, as in SQuAD's F1).

    Both empty gives 1.0; exactly one empty gives 0.0.
    """
    a, b = word_tokens(generated), word_tokens(reference)
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    remaining: dict[str, int] = {}
    for token in b:
        remaining[token] = remaining.get(token, 0) + 1
    overlap = 0
    for token in a:
        if remaining.get(token, 0) > 0:
            overlap += 1
            remaining[token] -= 1
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(a), overlap / len(b)
    return 2 * precision * recall / (precision + recall)
