import math

import pytest

from userturn.stats import wilson_interval


def test_wilson_interval_matches_hand_computed_values():
    # 3 of 10: p=0.3, z=1.96 → centre 0.3808/1.3842, half-width from the textbook formula
    low, high = wilson_interval(3, 10)
    assert low == pytest.approx(0.1078, abs=1e-4)
    assert high == pytest.approx(0.6032, abs=1e-4)


def test_wilson_interval_is_not_degenerate_at_zero_successes():
    low, high = wilson_interval(0, 36)
    assert low == 0.0
    assert high == pytest.approx(0.0964, abs=1e-4)


def test_wilson_interval_at_all_successes_mirrors_zero():
    low, high = wilson_interval(36, 36)
    assert high == 1.0
    assert 1 - low == pytest.approx(wilson_interval(0, 36)[1])


def test_wilson_interval_without_data_is_uninformative():
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_wilson_interval_rejects_impossible_counts():
    with pytest.raises(ValueError):
        wilson_interval(5, 4)


def test_wilson_interval_narrows_with_more_data():
    small = wilson_interval(2, 10)
    large = wilson_interval(200, 1000)
    assert (large[1] - large[0]) < (small[1] - small[0])
    assert not any(math.isnan(x) for x in small + large)
