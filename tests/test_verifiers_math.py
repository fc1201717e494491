"""MATH-500: the last boxed answer, compared by symbolic equivalence."""

from __future__ import annotations

import pytest

from userturn.verifiers import math_answer
from userturn.verifiers.math_answer import (
    answers_equivalent,
    extract_boxed,
    extract_math_answer,
    normalize_latex,
    verify_math,
)


@pytest.mark.parametrize(
    ("response", "gold"),
    [
        ("So $x = \\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
        ("\\boxed{0.5}", "\\frac12"),
        ("\\boxed{\\dfrac{3}{4}}", "\\frac{3}{4}"),
        ("\\boxed{2\\sqrt{2}}", "\\sqrt{8}"),
        ("\\boxed{(3, \\pi/2)}", "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("\\boxed{[2, 5)}", "[2,5)"),
        ("\\boxed{\\text{(C)}}", "\\text{(C)}"),
        ("The answer is \\boxed{C}.", "\\text{(C)}"),
        ("\\boxed{90^\\circ}", "90"),
        ("\\boxed{\\text{Evelyn}}", "\\text{Evelyn}"),
        ("First \\boxed{3}, no wait: \\boxed{4}.", "4"),
        ("The final answer is $10\\sqrt{2}$.", "10\\sqrt2"),
        ("\\boxed{x^2+2x+1}", "(x+1)^2"),
    ],
)
def test_accepts_equivalent_answers(response: str, gold: str) -> None:
    verdict = verify_math(response, gold)
    assert verdict.correct is True, (response, gold, verdict)


@pytest.mark.parametrize(
    ("response", "gold"),
    [
        ("\\boxed{(2, 5)}", "[2,5)"),
        ("\\boxed{3} and later \\boxed{4}", "3"),
        ("The result is 1/2 but I did not box it", "\\frac{1}{2}"),
        ("", "1"),
        ("\\boxed{\\frac{1}{3}}", "\\frac{1}{2}"),
        ("\\boxed{-2}", "2"),
        ("\\boxed{\\text{(B)}}", "\\text{(C)}"),
    ],
)
def test_rejects_different_or_missing_answers(response: str, gold: str) -> None:
    assert verify_math(response, gold).correct is False


def test_extract_boxed_balances_nested_braces_and_ignores_an_unclosed_box() -> None:
    assert extract_boxed("\\boxed{\\frac{a}{b}}") == "\\frac{a}{b}"
    assert extract_boxed("\\boxed{1} then \\boxed{\\frac{2}{") == "1"
    assert extract_boxed("no box") is None
    assert extract_math_answer("Final Answer: $\\frac{1}{2}$.") == "\\frac{1}{2}"


def test_normalize_latex_canonical_forms() -> None:
    assert normalize_latex("\\dfrac{1}{2}") == normalize_latex("\\frac12")
    assert normalize_latex("\\left( 1, 2 \\right)") == "(1,2)"
    assert normalize_latex("\\text{(c)}") == "C"


def test_fallback_without_math_verify_still_compares_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(math_answer, "_math_verify", lambda: None)
    assert answers_equivalent("\\frac{1}{2}", "0.5") == (True, "sympy")
    assert answers_equivalent("2\\sqrt{2}", "\\sqrt{8}")[0]
    assert answers_equivalent("\\frac{1}{2}", "\\dfrac12") == (True, "string")
    assert answers_equivalent("\\frac{1}{3}", "0.5") == (False, "none")
