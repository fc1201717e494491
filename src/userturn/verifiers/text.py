"""Offline sentence and word splitting for the length instructions of IFEval.

NLTK's ``punkt`` data cannot be downloaded here, so userturn uses its own fixed rules:

- **Words** are maximal runs of Unicode word characters (letters, digits, ``_``): ``don't`` is
  two words, ``3.5`` two, ``state-of-the-art`` four. This is the rule IFEval's reference code uses
  for ``number_words`` (a ``\\w+`` tokenizer), so word counts match it exactly.
- **Sentences** end at a run of ``.``, ``!``, ``?`` or ``…`` (closing quotes and brackets may follow)
  that is followed by whitespace or the end of the text. Three exceptions keep a sentence going:
  a period after a common abbreviation (``Mr.``, ``Dr.``, ``e.g.``, ``etc.``, ``vs.``, ...), after a
  single capital letter (``J. K. Rowling``), or after a bare list number at the start of a line
  (``1. First``). Line breaks alone do not end a sentence (a heading without a period runs into
  the next sentence), as with punkt. A sentence counts when it has at least one word.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"(?:[.!?]+|…)[\"'”’)\]]*(?=\s|$)")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e u.s u.k a.m p.m no fig inc ltd co corp dept approx est "
    "jan feb mar apr jun jul aug sep sept oct nov dec mt ft".split()
)


def split_words(text: str) -> list[str]:
    """The words of ``text`` by the module rule (runs of word characters)."""
    return _WORD.findall(text)


def count_words(text: str) -> int:
    """How many words ``text`` has (see :func:`split_words`)."""
    return len(split_words(text))


def _keeps_going(text: str, end: int) -> bool:
    """True when the period ending at ``end`` does not end a sentence (abbreviation, initial, list number)."""
    if text[end - 1] != ".":
        return False
    start = end - 1
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    token = text[start : end - 1].lstrip("(\"'“‘")
    if token.lower() in _ABBREVIATIONS:
        return True
    if len(token) == 1 and token.isupper():
        return True
    before = text[:start].rstrip(" \t")
    return token.isdigit() and (before == "" or before.endswith("\n"))


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` by the module rule; empty or word-free pieces are dropped.

    Args:
        text: any text; ``""`` gives ``[]``.
    """
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        punctuation_end = match.end()
        stripped = match.group(0).rstrip("\"'”’)]")
        if _keeps_going(text, match.start() + len(stripped)):
            continue
        sentences.append(text[start:punctuation_end])
        start = punctuation_end
    sentences.append(text[start:])
    return [s.strip() for s in sentences if _WORD.search(s)]


def count_sentences(text: str) -> int:
    """How many sentences ``text`` has (see :func:`split_sentences`)."""
    return len(split_sentences(text))
