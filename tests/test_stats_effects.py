"""Perturbation effects: paired bootstrap over items and the verdict against the declared direction."""

import pytest

from userturn.stats import effect_verdict, group_difference, paired_difference


def test_paired_difference_is_the_difference_of_pooled_rates():
    # control 1 of 4, treatment 3 of 4 → +0.5
    estimate = paired_difference([(0, 2), (1, 2)], [(2, 2), (1, 2)], n_boot=200)
    assert estimate.value == pytest.approx(0.5)
    assert estimate.n == 2


def test_pairing_removes_item_difficulty_from_the_interval():
    # Items differ a lot in their control rate, but the perturbation adds exactly one follow-up of
    # four samples to every item: every paired resample gives +0.25.
    control = [(0, 4), (1, 4), (2, 4), (3, 4)] * 3
    treatment = [(c + 1, n) for c, n in control]
    paired = paired_difference(control, treatment, seed=5)
    assert (paired.value, paired.low, paired.high) == (pytest.approx(0.25), pytest.approx(0.25), pytest.approx(0.25))
    unpaired = group_difference(treatment, control, seed=5)
    assert unpaired.value == pytest.approx(0.25)
    assert unpaired.low < 0.25 - 0.05 and unpaired.high > 0.25 + 0.05


def test_paired_difference_needs_the_same_items():
    with pytest.raises(ValueError):
        paired_difference([(0, 1)], [(0, 1), (1, 1)])


def test_group_difference_point_value():
    assert group_difference([(3, 4)], [(1, 4)], n_boot=100).value == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("expected", "low", "high", "verdict"),
    [
        ("up", 0.1, 0.4, "as_expected"),
        ("up", -0.4, -0.1, "opposite"),
        ("up", -0.1, 0.3, "not_significant"),
        ("down", -0.4, -0.05, "as_expected"),
        ("down", 0.05, 0.2, "opposite"),
        ("down", 0.0, 0.0, "not_significant"),   # an interval touching 0 does not exclude it
        ("none", -0.1, 0.1, "as_expected"),
        ("none", 0.1, 0.2, "opposite"),
        ("up", None, None, "not_significant"),
    ],
)
def test_effect_verdict_checks_the_interval_against_the_declared_direction(expected, low, high, verdict):
    assert effect_verdict(expected, low, high) == verdict
