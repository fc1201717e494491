"""GSM8K: the response's final number against the number after ``####`` in the gold solution."""

from __future__ import annotations

from userturn.records import Verdict
from userturn.verifiers.numeric import extract_final_answer, normalize_number, numbers_equal


def gold_number(answer: str) -> str:
    """The gold number of a GSM8K ``answer`` field: the text after the last ``####``, commas dropped.

    Args:
        answer: a full GSM8K solution (``"... #### 1,800"``) or just the number (``"18"``);
            without ``####`` the whole string is the number.
    """
    tail = answer.rsplit("####", 1)[-1] if "####" in answer else answer
    return tail.strip().replace(",", "")


def verify_gsm8k(response: str, answer: str) -> Verdict:
    """Score ``response`` against a GSM8K gold ``answer`` by the last-answer-wins rule of
    :mod:`userturn.verifiers.numeric`.

    Args:
        response: the assistant response; one with no number is wrong (``extracted`` None).
        answer: the gold solution or number (see :func:`gold_number`).
    """
    gold = gold_number(answer)
    found = extract_final_answer(response)
    if found is None:
        return Verdict(correct=False, extracted=None, details={"gold": gold, "rule": None})
    value = normalize_number(found.text)
    return Verdict(
        correct=numbers_equal(found.text, gold),
        extracted=str(value) if value is not None else found.text,
        details={"gold": gold, "rule": found.rule},
    )
