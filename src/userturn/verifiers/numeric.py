"""Final numeric answers: extraction from free text and tolerant comparison.

The rule for the *final* answer of a response (:func:`extract_final_answer`), used by GSM8K:

1. An **answer marker** is one of ``#### X``, ``\\boxed{X}`` (also ``\\fbox``), or a phrase
   ``answer is X`` / ``answer: X`` / ``answer = X`` (any case, so ``The final answer is``,
   ``Answer:`` and ``**Answer:** $18`` all count). Its number is the first number after it;
   for a phrase, when its line goes on to an ``=``, the number after the last ``=`` on that line
   (``The answer is 3 x 6 = 18`` gives 18).
2. **Last answer wins**: the marker that *starts* last in the response gives the answer, so a
   model that corrects itself (``The answer is 12. Wait ... The answer is 18.``) is scored on 18.
3. With no marker at all, the last number in the response is the answer.
4. A response with no number has no answer and is wrong.

A number is an optional minus sign (``-`` or ``−``, not when it joins two numbers as in ``3-5``),
an optional ``$``, digits with optional comma thousands groups (``1,800``) and an optional decimal
part. Values compare as decimals: ``1,800`` equals ``1800``, ``18.00`` equals ``18``, ``-3`` is not
``3``; trailing sentence periods, ``$``, ``%`` and units are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

# A minus counts only when it is not glued to a preceding word or digit ("3-5" is two numbers).
_NUMBER_PATTERN = (
    r"(?<![\w.,])[-−]?\s?\$?\s?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?![\d])"
)
_NUMBER = re.compile(_NUMBER_PATTERN)
_HASH_MARKER = re.compile(r"####")
_BOXED_MARKER = re.compile(r"\\(?:boxed|fbox)\s*\{")
_PHRASE_MARKER = re.compile(r"answer\s*(?:\*\*)?\s*(?:is|:|=)", re.IGNORECASE)


@dataclass(frozen=True)
class NumericAnswer:
    """A number found in a response.

    Args:
        text: the number as written, without ``$`` (``"1,800"``, ``"-3.5"``).
        rule: which rule found it: ``"####"``, ``"boxed"``, ``"answer phrase"`` or ``"last number"``.
        position: the character offset of the marker (or of the number for ``"last number"``).
    """

    text: str
    rule: str
    position: int


def _clean(match_text: str) -> str:
    return match_text.replace("$", "").replace(" ", "").replace("−", "-")


def normalize_number(text: str) -> Decimal | None:
    """Parse ``"$1,800.00"`` → ``Decimal("1800")``; None when ``text`` is not a number.

    Args:
        text: one number; commas, ``$``, spaces, a trailing period or ``%`` and the Unicode minus
            are tolerated, anything else (``"18 apples"``, ``""``) gives None.
    """
    cleaned = text.strip().replace(",", "").replace("$", "").replace(" ", "").replace("−", "-")
    cleaned = cleaned.rstrip(".").rstrip("%")
    if not cleaned:
        return None
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    # Integral values drop their zeros (18.00 -> 18) without exponent notation (1800, not 1.8E+3).
    return value.quantize(Decimal(1)) if value == value.to_integral_value() else value.normalize()


def extract_last_number(text: str) -> str | None:
    """The last number in ``text`` (commas and a leading ``$`` allowed), or None if it has none."""
    matches = _NUMBER.findall(text)
    return _clean(matches[-1]) if matches else None


def _first_number(text: str) -> str | None:
    match = _NUMBER.search(text)
    return _clean(match.group(0)) if match else None


def _boxed_content(text: str, open_brace_end: int) -> str:
    """The text inside a ``{`` that ends at ``open_brace_end``, up to its matching ``}`` (or the end)."""
    depth = 1
    for index in range(open_brace_end, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[open_brace_end:index]
    return text[open_brace_end:]


def _phrase_number(text: str, start: int) -> str | None:
    line_end = text.find("\n", start)
    line = text[start:] if line_end < 0 else text[start:line_end]
    if "=" in line:
        after_equals = _first_number(line[line.rindex("=") + 1 :])
        if after_equals is not None:
            return after_equals
    number = _first_number(line)
    if number is None and line.strip() == "":
        # "Answer:\n18": the number is on the next line.
        return _first_number(text[start:][:80])
    return number


def find_marked_answers(text: str) -> list[NumericAnswer]:
    """Every answer marker of ``text`` that has a number, in order of position (see the module rule)."""
    found: list[NumericAnswer] = []
    for match in _HASH_MARKER.finditer(text):
        number = _first_number(text[match.end() : match.end() + 80])
        if number is not None:
            found.append(NumericAnswer(number, "####", match.start()))
    for match in _BOXED_MARKER.finditer(text):
        number = _first_number(_boxed_content(text, match.end()))
        if number is not None:
            found.append(NumericAnswer(number, "boxed", match.start()))
    for match in _PHRASE_MARKER.finditer(text):
        number = _phrase_number(text, match.end())
        if number is not None:
            found.append(NumericAnswer(number, "answer phrase", match.start()))
    return sorted(found, key=lambda answer: answer.position)


def extract_final_answer(text: str) -> NumericAnswer | None:
    """The final numeric answer of a response by the module's last-answer-wins rule, or None.

    Args:
        text: a free-text response; an empty or number-free response gives None (scored wrong).
    """
    marked = find_marked_answers(text)
    if marked:
        return marked[-1]
    matches = list(_NUMBER.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    return NumericAnswer(_clean(last.group(0)), "last number", last.start())


def numbers_equal(a: str | None, b: str | None) -> bool:
    """True when both parse as numbers with the same value (``18.00`` equals ``18``).

    Args:
        a, b: numbers as text; None or a non-number on either side gives False.
    """
    if a is None or b is None:
        return False
    x, y = normalize_number(a), normalize_number(b)
    return x is not None and y is not None and x == y
