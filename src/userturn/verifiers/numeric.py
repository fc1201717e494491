"""Final numeric answers: extraction from free text and tolerant comparison."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?|-?\$?\.\d+")


def normalize_number(text: str) -> Decimal | None:
    """Parse ``"$1,800.00"`` → ``Decimal("1800")``; None when ``text`` is not a number."""
    cleaned = text.strip().replace(",", "").replace("$", "").rstrip(".")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    return value.normalize() if value == value.to_integral_value() else value


def extract_last_number(text: str) -> str | None:
    """The last number in ``text`` (commas and a leading ``$`` allowed), or None if it has none."""
    matches = _NUMBER.findall(text)
    return matches[-1].replace("$", "") if matches else None


def numbers_equal(a: str | None, b: str | None) -> bool:
    """True when both parse as numbers with the same value (``18.00`` equals ``18``)."""
    if a is None or b is None:
        return False
    x, y = normalize_number(a), normalize_number(b)
    return x is not None and y is not None and x == y
