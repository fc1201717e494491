"""Correlations across models and the lexical similarity to the human reference turn."""

import math

import pytest

from userturn.stats import correlation_interval, lexical_similarity, pearson, ranks, spearman


def test_ranks_average_ties():
    assert ranks([10, 20, 20, 30]) == [1, 2.5, 2.5, 4]
    assert ranks([3, 1, 2]) == [3, 1, 2]


def test_pearson_hand_computed():
    # deviations (-1, 0, 1) and (-1, 1, 0): sxy = 1, sxx = syy = 2 → 0.5
    assert pearson([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [6, 4, 2]) == pytest.approx(-1.0)


def test_pearson_is_undefined_for_constant_or_too_few_values():
    assert pearson([1, 1, 1], [1, 2, 3]) is None
    assert pearson([1], [2]) is None


def test_spearman_hand_computed():
    # ranks (1,2,3,4) vs (1,3,2,4): 1 - 6·Σd²/(n(n²-1)) = 1 - 6·2/60 = 0.8
    assert spearman([10, 20, 30, 40], [1, 3, 2, 4]) == pytest.approx(0.8)


def test_spearman_with_ties_is_pearson_of_average_ranks():
    # ranks (1, 2.5, 2.5, 4) vs (1, 2, 3, 4): sxy = 4.5, sxx = 4.5, syy = 5 → 4.5 / sqrt(22.5)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(22.5))


def test_spearman_is_monotone_invariant():
    x = [0.1, 0.4, 0.35, 0.9]
    y = [3.0, 5.0, 4.0, 100.0]
    assert spearman(x, y) == pytest.approx(1.0)
    assert pearson(x, y) < 0.99


def test_correlation_interval_needs_three_models():
    estimate = correlation_interval([0.1, 0.5], [0.2, 0.1], pearson)
    assert estimate.value == pytest.approx(-1.0)
    assert (estimate.low, estimate.high) == (None, None)


def test_correlation_interval_of_a_perfect_line_is_a_point_and_reproducible():
    x = [0.1, 0.2, 0.3, 0.4, 0.5]
    y = [0.3, 0.5, 0.7, 0.9, 1.1]
    estimate = correlation_interval(x, y, pearson, seed=2)
    assert (estimate.value, estimate.low, estimate.high) == (pytest.approx(1.0), pytest.approx(1.0),
                                                             pytest.approx(1.0))
    noisy = [0.3, 0.2, 0.7, 0.5, 0.4]
    assert correlation_interval(x, noisy, spearman, seed=2) == correlation_interval(x, noisy, spearman, seed=2)
    wide = correlation_interval(x, noisy, spearman, seed=2)
    assert wide.low < wide.value < wide.high


def test_lexical_similarity_is_unigram_f1():
    # overlap {the, cat} = 2; precision 2/3, recall 2/4 → F1 = 4/7
    assert lexical_similarity("The cat sat", "the cat ran away") == pytest.approx(4 / 7)
    assert lexical_similarity("a a b", "a b b") == pytest.approx(2 / 3)   # counts are clipped
    assert lexical_similarity("", "") == 1.0
    assert lexical_similarity("hello", "") == 0.0
