"""Rates pooled over samples: item-clustered bootstrap and the unbiased "any follow-up in k"."""

import pytest

from userturn.stats import (
    any_in_k,
    any_in_k_rate,
    clustered_rate_interval,
    mean_interval,
    percentile_interval,
    pooled_rate,
    wilson_interval,
)


def test_percentile_interval_interpolates_between_order_statistics():
    # 25th and 75th percentiles of 1..5 with linear interpolation: positions 1 and 3 → 2 and 4
    assert percentile_interval([5, 1, 4, 2, 3], level=0.5) == (2.0, 4.0)
    # 2.5th percentile of 1..5: position 0.1 → 1.1; 97.5th: position 3.9 → 4.9
    low, high = percentile_interval([1, 2, 3, 4, 5])
    assert (low, high) == (pytest.approx(1.1), pytest.approx(4.9))


def test_percentile_interval_ignores_nan_and_rejects_empty():
    assert percentile_interval([float("nan"), 1.0, 1.0]) == (1.0, 1.0)
    with pytest.raises(ValueError):
        percentile_interval([float("nan")])


def test_pooled_rate_is_total_successes_over_total_samples():
    assert pooled_rate([(1, 4), (3, 4), (0, 2)]) == pytest.approx(0.4)
    assert pooled_rate([]) is None


def test_clustered_interval_collapses_when_every_item_has_the_same_rate():
    estimate = clustered_rate_interval([(1, 2), (2, 4), (3, 6)], n_boot=500)
    assert (estimate.value, estimate.low, estimate.high, estimate.n) == (0.5, 0.5, 0.5, 3)


def test_clustered_interval_of_two_opposite_items_matches_the_enumerated_bootstrap():
    # Resampling two items (rates 0 and 1, equal sizes) gives 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4:
    # the 2.5%/97.5% percentiles are 0 and 1, the 30%/70% ones are both 0.5.
    items = [(0, 3), (3, 3)]
    wide = clustered_rate_interval(items, n_boot=4000, seed=1)
    assert (wide.value, wide.low, wide.high) == (0.5, 0.0, 1.0)
    narrow = clustered_rate_interval(items, n_boot=4000, seed=1, level=0.4)
    assert (narrow.low, narrow.high) == (0.5, 0.5)


def test_clustering_widens_the_interval_when_items_differ():
    # 10 items, 10 samples each: five never follow up, five always do. 100 samples look like a
    # binomial to Wilson, but there are only 10 independent items.
    items = [(0, 10)] * 5 + [(10, 10)] * 5
    clustered = clustered_rate_interval(items, seed=3)
    wilson = wilson_interval(50, 100)
    assert clustered.value == 0.5
    assert (clustered.high - clustered.low) > 2 * (wilson[1] - wilson[0])


def test_bootstrap_is_reproducible_with_a_seed_and_varies_without_it():
    items = [(0, 4), (1, 4), (3, 4), (4, 4), (2, 4)]
    assert clustered_rate_interval(items, seed=7) == clustered_rate_interval(items, seed=7)
    intervals = {clustered_rate_interval(items, seed=s, n_boot=200) for s in range(5)}
    assert len(intervals) > 1


def test_clustered_interval_without_samples_is_empty():
    assert clustered_rate_interval([]).value is None
    assert clustered_rate_interval([(0, 0)]).low is None


def test_impossible_counts_are_rejected():
    with pytest.raises(ValueError):
        clustered_rate_interval([(3, 2)])


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (4, 1, 2, 0.5),          # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (5, 2, 2, 0.7),          # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (3, 1, 1, 1 / 3),        # k = 1 is the plain rate
        (4, 0, 4, 0.0),
        (4, 1, 4, 1.0),          # k = n: did any sample succeed
        (4, 3, 2, 1.0),          # fewer failures than draws: certain
    ],
)
def test_any_in_k_matches_the_pass_at_k_formula(n, c, k, expected):
    assert any_in_k(n, c, k) == pytest.approx(expected)


def test_any_in_k_rejects_k_larger_than_the_samples():
    with pytest.raises(ValueError):
        any_in_k(2, 1, 3)


def test_any_in_k_rate_averages_items_and_skips_those_with_too_few_samples():
    # items as (successes, samples): estimates at k=2 are 0.5, 0.0, 1.0; the 1-sample item is skipped
    estimate = any_in_k_rate([(1, 4), (0, 4), (4, 4), (1, 1)], k=2, n_boot=300)
    assert estimate.value == pytest.approx(0.5)
    assert estimate.n == 3
    assert 0.0 <= estimate.low <= 0.5 <= estimate.high <= 1.0


def test_mean_interval_of_constant_values_is_a_point():
    assert mean_interval([0.25, 0.25, 0.25]).as_dict() == {"value": 0.25, "ci_low": 0.25, "ci_high": 0.25, "n": 3}
