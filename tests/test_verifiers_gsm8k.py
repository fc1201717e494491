"""GSM8K extraction: the forms a model writes its final answer in, and the last-answer-wins rule."""

from __future__ import annotations

import pytest

from userturn.verifiers.gsm8k import gold_number, verify_gsm8k
from userturn.verifiers.numeric import (
    extract_final_answer,
    extract_last_number,
    normalize_number,
    numbers_equal,
)

GOLD = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18.\n#### 18"


@pytest.mark.parametrize(
    "response",
    [
        "#### 18",
        "She makes 9 * 2 = 18 dollars.\n#### 18",
        "The answer is $18.",
        "The answer is: 18",
        "So the final answer is \\boxed{18}.",
        "Final Answer: The final answer is $\\boxed{18}$. I hope it is correct.",
        "She makes **18** dollars.",
        "**Answer:** $18",
        "The answer is 18.00",
        "The answer is 3 * 6 = 18 dollars.",
        "The answer is 12. Wait, I forgot the muffins. The answer is 18.",
        "Answer:\n18",
        "She earns 9 eggs x $2 = $18 per day",
        "#### 18\n\nQuestion: Tom has 5 apples. How many?",
    ],
)
def test_accepts_the_right_answer_in_every_form(response: str) -> None:
    verdict = verify_gsm8k(response, GOLD)
    assert verdict.correct is True, (response, verdict)
    assert verdict.extracted == "18"


@pytest.mark.parametrize(
    "response",
    [
        "",
        "I am not sure how to solve this.",
        "The answer is 18. Wait, that is wrong: the answer is 16.",
        "She makes -18 dollars.",
        "She makes 180 dollars.",
        "The answer is 1.8",
        "18 eggs are laid, so she makes 26.",
        "\\boxed{16} (though 18 is also possible)",
    ],
)
def test_rejects_a_wrong_or_missing_answer(response: str) -> None:
    assert verify_gsm8k(response, GOLD).correct is False


def test_thousands_commas_and_negative_and_decimal_golds() -> None:
    assert verify_gsm8k("The total is 1,800 dollars.", "#### 1800").correct
    assert verify_gsm8k("The total is $1,800.", "#### 1,800").correct
    assert verify_gsm8k("It dropped to -5 degrees.", "#### -5").correct
    assert not verify_gsm8k("It dropped by 5 degrees.", "#### -5").correct
    assert verify_gsm8k("She pays 2.50 each.", "#### 2.5").correct
    assert verify_gsm8k("A range of 3-5 means 5 at most.", "#### 5").correct


def test_a_response_with_no_number_has_no_extraction() -> None:
    verdict = verify_gsm8k("No idea.", GOLD)
    assert verdict.extracted is None and verdict.details["rule"] is None


def test_last_marker_wins_over_later_plain_numbers() -> None:
    found = extract_final_answer("The answer is 42. Step 3 used 7 and 9.")
    assert found is not None and found.text == "42" and found.rule == "answer phrase"


def test_without_a_marker_the_last_number_wins() -> None:
    found = extract_final_answer("First 3 apples, then 4 more, so 7 apples.")
    assert found is not None and found.text == "7" and found.rule == "last number"


def test_gold_number_reads_the_text_after_the_last_hashes() -> None:
    assert gold_number(GOLD) == "18"
    assert gold_number("#### 1,234") == "1234"
    assert gold_number("42") == "42"


def test_existing_numeric_helpers_keep_working() -> None:
    assert extract_last_number("It costs $1,800.") == "1,800"
    assert extract_last_number("none") is None
    assert str(normalize_number("$1,800.00")) == "1800"
    assert normalize_number("eighteen") is None
    assert numbers_equal("18.00", "18") and not numbers_equal("18", None) and not numbers_equal("x", "x")
