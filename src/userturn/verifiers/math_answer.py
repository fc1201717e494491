"""MATH-500: the final ``\\boxed{}`` answer compared with the gold answer by symbolic equivalence.

Extraction rule: the answer is the content of the **last** ``\\boxed{...}`` (or ``\\fbox{...}``) of the
response, braces balanced. A response without one falls back to its last ``answer is X`` /
``Final Answer: X`` phrase (to the end of that line, ``$`` and a final period removed); a response
with neither has no answer and is wrong.

Comparison: with ``math-verify`` installed (``pip install userturn[verifiers]``), both sides are
parsed as LaTeX and compared by its ``verify`` (fractions, radicals, intervals, sets, tuples,
equations, units of degrees and percent). If it says no, or is missing, two fallbacks can still
say yes: equal strings after LaTeX normalization (``\\dfrac``→``\\frac``, no ``\\left``/``\\right``,
spacing, ``\\text{}``, ``^\\circ``), and equal values when both sides are simple expressions that
sympy can read after a small LaTeX-to-Python rewrite.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

from userturn.records import Verdict

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BOXED_BARE = re.compile(r"\\boxed\s+([^\s$]+)")
_ANSWER_PHRASE = re.compile(r"(?:final\s+answer|answer\s+is)\s*:?\s*(?:is\s*)?", re.IGNORECASE)


def _braced(text: str, start: int) -> str | None:
    depth = 1
    for index in range(start, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return text[start:index]
    return None


def extract_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{}``/``\\fbox{}`` of ``text`` (``\\boxed 5`` too), or None.

    Args:
        text: a response; an unclosed last box is ignored (the previous closed one counts).
    """
    candidates: list[tuple[int, str]] = []
    for match in _BOXED.finditer(text):
        content = _braced(text, match.end())
        if content is not None:
            candidates.append((match.start(), content.strip()))
    for match in _BOXED_BARE.finditer(text):
        candidates.append((match.start(), match.group(1).strip()))
    if not candidates:
        return None
    return max(candidates)[1]


def extract_math_answer(text: str) -> str | None:
    """The final answer of a response by the module rule: last box, else last answer phrase."""
    boxed = extract_boxed(text)
    if boxed is not None:
        return boxed
    matches = list(_ANSWER_PHRASE.finditer(text))
    if not matches:
        return None
    rest = text[matches[-1].end() :].split("\n", 1)[0].strip()
    rest = rest.strip("*").strip().strip("$").strip()
    rest = re.sub(r"[.\s]+$", "", rest).strip("$").strip()
    return rest or None


def normalize_latex(answer: str) -> str:
    """A canonical string form of a LaTeX answer, for exact comparison.

    Args:
        answer: a bare answer (``"\\dfrac{1}{2}"``, ``"\\text{(C)}"``); never fails.
    """
    s = answer.strip().strip("$")
    s = re.sub(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}", r"\1", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("\\left", "").replace("\\right", "")
    for spacing in ("\\!", "\\,", "\\;", "\\:", "\\ ", "~"):
        s = s.replace(spacing, "")
    s = re.sub(r"\^\s*\{?\\circ\}?", "", s)
    s = s.replace("\\%", "").replace("%", "").replace("\\$", "")
    s = re.sub(r"\s+", "", s)
    s = s.rstrip(".")
    # "\frac12" → "\frac{1}{2}"
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)
    if re.fullmatch(r"\(?[A-Ea-e]\)?", s):
        s = s.strip("()").upper()
    return s


def _latex_to_python(s: str) -> str:
    s = normalize_latex(s)
    for _ in range(5):
        s = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"((\1)/(\2))", s)
        s = re.sub(r"\\sqrt\[([^{}]*)\]\{([^{}]*)\}", r"((\2)**(1/(\1)))", s)
        s = re.sub(r"\\sqrt\{([^{}]*)\}", r"sqrt(\1)", s)
    s = re.sub(r"\\sqrt(\d+)", r"sqrt(\1)", s)
    s = s.replace("\\pi", "pi").replace("\\cdot", "*").replace("\\times", "*").replace("^", "**")
    s = s.replace("{", "(").replace("}", ")")
    return s


_SAFE_CHARS = re.compile(r"[0-9A-Za-z+\-*/().,\s]*")
_NAME = re.compile(r"[A-Za-z]+")
_SAFE_NAMES = frozenset({"sqrt", "pi"})
_SAFE_POWER = re.compile(r"\*\*\s*(?:\d{1,3}(?:\.\d+)?|[A-Za-z]\b|\([^*]{1,20}\)|-\d{1,3})")


def is_safe_expression(expression: str) -> bool:
    """True when ``expression`` may be handed to sympy's ``parse_expr``, which *evaluates Python code*.

    Model output and dataset text are data: only arithmetic survives (digits, ``+ - * / ( ) . ,``, single-letter
    variables, ``sqrt`` and ``pi``). No underscores, quotes, brackets, attribute access or ``!``, so nothing can
    reach Python; powers only of short exponents, so that ``9**9**9**9`` cannot hang the run; 200 characters at most.
    """
    if len(expression) > 200 or not _SAFE_CHARS.fullmatch(expression):
        return False
    if any(len(name) > 1 and name not in _SAFE_NAMES for name in _NAME.findall(expression)):
        return False
    if re.search(r"[A-Za-z]\s*\.|\.\s*[A-Za-z]", expression):
        return False
    return expression.count("**") == len(_SAFE_POWER.findall(expression))


def _sympy_equal(a: str, b: str) -> bool:
    left_text, right_text = _latex_to_python(a), _latex_to_python(b)
    if not (is_safe_expression(left_text) and is_safe_expression(right_text)):
        return False
    try:
        import sympy
        from sympy.parsing.sympy_parser import (
            implicit_multiplication_application,
            parse_expr,
            standard_transformations,
        )
    except ImportError:
        return False
    transformations = (*standard_transformations, implicit_multiplication_application)
    try:
        left = parse_expr(left_text, transformations=transformations, evaluate=True)
        right = parse_expr(right_text, transformations=transformations, evaluate=True)
        return bool(sympy.simplify(left - right) == 0)
    except Exception:  # sympy raises many kinds of errors on text it cannot read
        return False


@lru_cache(maxsize=1)
def _math_verify():
    try:
        import math_verify
    except ImportError:
        return None
    return math_verify


def math_verify_available() -> bool:
    """True when the ``math-verify`` package can be imported."""
    return _math_verify() is not None


def _math_verify_equal(gold: str, answer: str) -> bool | None:
    library = _math_verify()
    if library is None:
        return None
    # math-verify's timeouts use signal.alarm, which only works on the main thread.
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    try:
        gold_parsed = library.parse(f"${gold}$", parsing_timeout=timeout)
        answer_parsed = library.parse(f"${answer}$", parsing_timeout=timeout)
        if not gold_parsed or not answer_parsed:
            return False
        return bool(library.verify(gold_parsed, answer_parsed, timeout_seconds=timeout))
    except Exception:  # a parse failure or timeout is "not shown equal"
        return False


def answers_equivalent(gold: str, answer: str) -> tuple[bool, str]:
    """Whether ``answer`` equals ``gold``, and which method said so (``"none"`` when unequal).

    Args:
        gold, answer: bare LaTeX answers without the box; empty strings are never equal.
    """
    if not gold.strip() or not answer.strip():
        return False, "none"
    if normalize_latex(gold) == normalize_latex(answer):
        return True, "string"
    if _math_verify_equal(gold, answer):
        return True, "math-verify"
    if _sympy_equal(gold, answer):
        return True, "sympy"
    return False, "none"


def verify_math(response: str, gold: str) -> Verdict:
    """Score ``response`` against a MATH gold answer (see the module rule).

    Args:
        response: the assistant response; no box and no answer phrase means wrong.
        gold: the dataset's ``answer`` field (bare LaTeX).
    """
    extracted = extract_math_answer(response)
    if extracted is None:
        return Verdict(correct=False, extracted=None, details={"gold": gold, "method": "none"})
    equal, method = answers_equivalent(gold, extracted)
    return Verdict(correct=equal, extracted=extracted, details={"gold": gold, "method": method})
