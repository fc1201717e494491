"""Agreement metrics against values computed by hand."""

import pytest

from userturn.classifiers.validation import (
    accuracy,
    agreement_report,
    cohen_kappa,
    confusion_matrix,
    format_report,
    macro_f1,
    per_label_scores,
)

# 10 items, two labels. gold: 6 x a, 4 x b. predicted: a a a a b b | a b b b
GOLD = ["a"] * 6 + ["b"] * 4
PRED = ["a", "a", "a", "a", "b", "b", "a", "b", "b", "b"]


def test_accuracy_counts_matches():
    assert accuracy(GOLD, PRED) == pytest.approx(7 / 10)


def test_per_label_precision_recall_by_hand():
    scores = per_label_scores(GOLD, PRED, ("a", "b"))
    # a: tp=4, predicted 5, gold 6 -> P=0.8, R=0.6667, F1=0.7273
    assert scores["a"].precision == pytest.approx(0.8)
    assert scores["a"].recall == pytest.approx(4 / 6)
    assert scores["a"].f1 == pytest.approx(2 * 0.8 * (4 / 6) / (0.8 + 4 / 6))
    # b: tp=3, predicted 5, gold 4 -> P=0.6, R=0.75
    assert scores["b"].precision == pytest.approx(0.6)
    assert scores["b"].recall == pytest.approx(0.75)
    assert scores["b"].support == 4


def test_macro_f1_is_unweighted_mean():
    f1_a = 2 * 0.8 * (4 / 6) / (0.8 + 4 / 6)
    f1_b = 2 * 0.6 * 0.75 / (0.6 + 0.75)
    assert macro_f1(GOLD, PRED, ("a", "b", "c")) == pytest.approx((f1_a + f1_b) / 2)  # c absent: ignored


def test_cohen_kappa_by_hand():
    # p_o = 0.7; p_e = 0.6*0.5 + 0.4*0.5 = 0.5; kappa = 0.2/0.5 = 0.4
    assert cohen_kappa(GOLD, PRED) == pytest.approx(0.4)


def test_kappa_of_constant_agreement_is_zero_not_nan():
    assert cohen_kappa(["a", "a"], ["a", "a"]) == 0.0
    assert cohen_kappa([], []) == 0.0


def test_confusion_matrix_rows_are_gold_and_keeps_unknown_predictions():
    labels, matrix = confusion_matrix(["a", "a", "b"], ["a", "judge_error", "a"], ("a", "b"))
    assert labels == ("a", "b", "judge_error")
    assert matrix == ((1, 0, 1), (1, 0, 0), (0, 0, 0))


def test_judge_error_counts_as_wrong_and_is_reported():
    report = agreement_report(["a", "b"], ["a", "judge_error"], ("a", "b"))
    assert report.accuracy == 0.5
    assert report.extra == {"judge_error": 1}
    assert "judge_error: 1 (counted as wrong)" in format_report(report)


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError):
        accuracy(["a"], ["a", "b"])
