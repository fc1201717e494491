"""IFEval: the 25 verifiable instruction types, strict and loose, instruction- and prompt-level.

Each checker is written from the instruction definitions published with IFEval (Zhou et al.,
2023, "Instruction-Following Evaluation for Large Language Models", Table 1) and takes the
response and the item's kwargs for that instruction. Where the definition leaves a detail open,
the choice below follows the reference scorer's behaviour, so that scores stay comparable:

- ``keywords:existence`` / ``keywords:frequency`` match the keyword case-insensitively anywhere
  (``cat`` counts in ``category``); ``keywords:forbidden_words`` matches whole words only.
- ``detectable_content:postscript`` passes when the marker (``P.S.``, ``P.P.S``, any case, an
  optional space after each inner period) appears anywhere in the response.
- Relations are ``"less than"`` (count < N) and ``"at least"`` (count >= N).
- Sentences and words are split offline by :mod:`userturn.verifiers.text`.
- Language checks use ``langdetect`` (seeded, so deterministic); a text it cannot classify (no
  letters) passes, as in the reference scorer.
- An empty or whitespace-only response follows no instruction.

**Strict** checks the response as given. **Loose** passes an instruction when any of eight
variants passes: the response with its first line, its last line, or both removed, each with and
without every ``*`` removed (markdown emphasis a reader would not notice).
Instruction-level accuracy counts instructions; prompt-level needs every instruction of a prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from userturn.errors import ConfigError
from userturn.records import Verdict
from userturn.verifiers.text import count_sentences, count_words

Checker = Callable[[str, dict[str, Any], str], bool]
INSTRUCTIONS: dict[str, Checker] = {}


def instruction(name: str) -> Callable[[Checker], Checker]:
    """Register the checker of instruction type ``name`` (``group:type``)."""

    def register(checker: Checker) -> Checker:
        INSTRUCTIONS[name] = checker
        return checker

    return register


class InstructionArgumentError(ValueError):
    """An instruction's kwargs are missing a value or have one the definition does not allow."""


def _arg(kwargs: dict[str, Any], key: str) -> Any:
    value = kwargs.get(key)
    if value is None:
        raise InstructionArgumentError(f"missing instruction argument '{key}'")
    return value


def _compare(count: int, relation: str, threshold: int) -> bool:
    if relation == "less than":
        return count < int(threshold)
    if relation == "at least":
        return count >= int(threshold)
    raise InstructionArgumentError(f"relation must be 'less than' or 'at least', not {relation!r}")


@lru_cache(maxsize=4096)
def detect_language(text: str) -> str | None:
    """The ISO 639-1 code of ``text``'s language by ``langdetect`` (seed 0), or None when it cannot tell.

    Raises:
        ConfigError: when ``langdetect`` is not installed (``pip install userturn[verifiers]``).
    """
    try:
        import langdetect
        from langdetect.lang_detect_exception import LangDetectException
    except ImportError as exc:
        raise ConfigError(
            "IFEval language instructions need langdetect: pip install 'userturn[verifiers]'"
        ) from exc
    langdetect.DetectorFactory.seed = 0
    try:
        return str(langdetect.detect(text))
    except LangDetectException:
        return None


def _is_language(text: str, code: str) -> bool:
    detected = detect_language(text)
    return detected is None or detected == code


# --- keywords -------------------------------------------------------------------------------


@instruction("keywords:existence")
def keywords_existence(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """Include every keyword of ``keywords`` (case-insensitive, anywhere)."""
    lowered = response.lower()
    return all(str(keyword).lower() in lowered for keyword in _arg(kwargs, "keywords"))


@instruction("keywords:frequency")
def keywords_frequency(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """The word ``keyword`` appears ``relation`` ``frequency`` times (case-insensitive occurrences)."""
    keyword = str(_arg(kwargs, "keyword")).lower()
    count = len(re.findall(re.escape(keyword), response.lower()))
    return _compare(count, _arg(kwargs, "relation"), _arg(kwargs, "frequency"))


@instruction("keywords:forbidden_words")
def keywords_forbidden_words(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """None of ``forbidden_words`` appears as a whole word (case-insensitive)."""
    return not any(
        re.search(rf"\b{re.escape(str(word))}\b", response, re.IGNORECASE)
        for word in _arg(kwargs, "forbidden_words")
    )


@instruction("keywords:letter_frequency")
def keywords_letter_frequency(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """The letter ``letter`` appears ``let_relation`` ``let_frequency`` times (case-insensitive)."""
    letter = str(_arg(kwargs, "letter")).lower()
    return _compare(response.lower().count(letter), _arg(kwargs, "let_relation"), _arg(kwargs, "let_frequency"))


# --- language and case --------------------------------------------------------------------


@instruction("language:response_language")
def response_language(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """The whole response is in language ``language`` (ISO 639-1 code)."""
    return _is_language(response, str(_arg(kwargs, "language")))


@instruction("change_case:english_capital")
def english_capital(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """The response is English and all capital letters."""
    return response.isupper() and _is_language(response, "en")


@instruction("change_case:english_lowercase")
def english_lowercase(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """The response is English and all lowercase letters."""
    return response.islower() and _is_language(response, "en")


@instruction("change_case:capital_word_frequency")
def capital_word_frequency(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """Words in all capitals appear ``capital_relation`` ``capital_frequency`` times.

    A word here may join parts with ``-`` or ``.`` (``AI-POWERED``, ``U.S.`` are one word) and splits
    at an apostrophe (``DON'T`` is two), the way a Treebank tokenizer counts them.
    """
    capitals = sum(1 for word in re.findall(r"\w+(?:[-.]\w+)*", response) if word.isupper())
    return _compare(capitals, _arg(kwargs, "capital_relation"), _arg(kwargs, "capital_frequency"))


# --- length ---------------------------------------------------------------------------------


@instruction("length_constraints:number_words")
def number_words(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """The response has ``relation`` ``num_words`` words."""
    return _compare(count_words(response), _arg(kwargs, "relation"), _arg(kwargs, "num_words"))


@instruction("length_constraints:number_sentences")
def number_sentences(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """The response has ``relation`` ``num_sentences`` sentences."""
    return _compare(count_sentences(response), _arg(kwargs, "relation"), _arg(kwargs, "num_sentences"))


def _divider_paragraphs(response: str) -> list[str] | None:
    """Paragraphs separated by the markdown divider ``***``; None when one in the middle is empty."""
    parts = re.split(r"\s?\*\*\*\s?", response)
    kept = []
    for index, part in enumerate(parts):
        if part.strip():
            kept.append(part)
        elif 0 < index < len(parts) - 1:
            return None
    return kept


@instruction("length_constraints:number_paragraphs")
def number_paragraphs(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """Exactly ``num_paragraphs`` paragraphs separated by ``***`` (an empty one in between fails)."""
    paragraphs = _divider_paragraphs(response)
    return paragraphs is not None and len(paragraphs) == int(_arg(kwargs, "num_paragraphs"))


@instruction("length_constraints:nth_paragraph_first_word")
def nth_paragraph_first_word(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """Exactly ``num_paragraphs`` paragraphs separated by blank lines (``\\n\\n``), and paragraph
    ``nth_paragraph`` (1-based, counting the pieces between ``\\n\\n``) starts with ``first_word``
    (case-insensitive; quotes before it and punctuation after it ignored)."""
    pieces = response.split("\n\n")
    wanted = int(_arg(kwargs, "num_paragraphs"))
    nth = int(_arg(kwargs, "nth_paragraph"))
    non_empty = sum(1 for piece in pieces if piece.strip())
    if nth > non_empty or nth < 1:
        return False
    paragraph = pieces[nth - 1].strip()
    if not paragraph:
        return False
    word = paragraph.split()[0].lstrip("'\"")
    first = re.split(r"[.,?!'\"]", word, maxsplit=1)[0].lower()
    return non_empty == wanted and first == str(_arg(kwargs, "first_word")).lower()


# --- detectable content and format ------------------------------------------------------------


@instruction("detectable_content:number_placeholders")
def number_placeholders(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """At least ``num_placeholders`` placeholders in square brackets (``[address]``)."""
    return len(re.findall(r"\[.*?\]", response)) >= int(_arg(kwargs, "num_placeholders"))


@instruction("detectable_content:postscript")
def postscript(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """A postscript starting with ``postscript_marker`` (``P.S.``, ``P.P.S``) is present."""
    marker = str(_arg(kwargs, "postscript_marker")).strip().lower()
    letters = [re.escape(piece) for piece in marker.split(".")]
    pattern = r"\.\s?".join(letters)
    return re.search(pattern, response.lower()) is not None


@instruction("detectable_format:number_bullet_lists")
def number_bullet_lists(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """Exactly ``num_bullets`` markdown bullet points (lines starting with ``* `` or ``-``)."""
    star_bullets = re.findall(r"^\s*\*[^*].*$", response, re.MULTILINE)
    dash_bullets = re.findall(r"^\s*-.*$", response, re.MULTILINE)
    return len(star_bullets) + len(dash_bullets) == int(_arg(kwargs, "num_bullets"))


_CONSTRAINED_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


@instruction("detectable_format:constrained_response")
def constrained_response(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """The response contains one of the fixed options ``My answer is yes./no./maybe.``."""
    stripped = response.strip()
    return any(option in stripped for option in _CONSTRAINED_OPTIONS)


@instruction("detectable_format:number_highlighted_sections")
def number_highlighted_sections(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """At least ``num_highlights`` non-empty markdown highlights (``*text*`` or ``**text**``, one line)."""
    single = [m for m in re.findall(r"\*[^\n*]*\*", response) if m.strip("*").strip()]
    double = [m for m in re.findall(r"\*\*[^\n*]*\*\*", response) if m.removeprefix("**").removesuffix("**").strip()]
    return len(single) + len(double) >= int(_arg(kwargs, "num_highlights"))


@instruction("detectable_format:multiple_sections")
def multiple_sections(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """At least ``num_sections`` sections, each starting with ``section_spliter`` and a number (``SECTION 1``)."""
    splitter = re.escape(str(_arg(kwargs, "section_spliter")).strip())
    sections = re.split(rf"\s?{splitter}\s?\d+\s?", response)
    return len(sections) - 1 >= int(_arg(kwargs, "num_sections"))


@instruction("detectable_format:json_format")
def json_format(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """The whole response is valid JSON; one markdown code fence (```` ```json ````) around it is allowed."""
    text = response.strip()
    text = re.sub(r"^```(?:json|Json|JSON)?", "", text)
    text = re.sub(r"```$", "", text).strip()
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@instruction("detectable_format:title")
def title(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """A title in double angular brackets on one line, ``<<like this>>``, not empty."""
    return any(match.strip() for match in re.findall(r"<<([^\n]+)>>", response))


# --- combination, start/end, punctuation -------------------------------------------------------


@instruction("combination:two_responses")
def two_responses(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """Exactly two different responses separated by six asterisks ``******``."""
    parts = response.split("******")
    kept = []
    for index, part in enumerate(parts):
        if part.strip():
            kept.append(part.strip())
        elif 0 < index < len(parts) - 1:
            return False
    return len(kept) == 2 and kept[0] != kept[1]


@instruction("combination:repeat_prompt")
def repeat_prompt(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """The response starts by repeating ``prompt_to_repeat`` word for word (case-insensitive)."""
    return response.strip().lower().startswith(str(_arg(kwargs, "prompt_to_repeat")).strip().lower())


@instruction("startend:end_checker")
def end_checker(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """The response ends with ``end_phrase`` and nothing after it (surrounding double quotes ignored)."""
    ending = response.strip().strip('"').lower()
    return ending.endswith(str(_arg(kwargs, "end_phrase")).strip().lower())


@instruction("startend:quotation")
def quotation(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """The whole response is wrapped in double quotation marks."""
    stripped = response.strip()
    return len(stripped) > 1 and stripped[0] == '"' and stripped[-1] == '"'


@instruction("punctuation:no_comma")
def no_comma(response: str, kwargs: dict[str, Any], prompt: str) -> bool:
    """The response has no comma (``,``)."""
    return "," not in response


# --- scoring --------------------------------------------------------------------------------


def loose_variants(response: str) -> list[str]:
    """The eight variants loose scoring tries (first/last line removed, ``*`` removed)."""
    lines = response.split("\n")
    trimmed = [response, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return trimmed + [variant.replace("*", "") for variant in trimmed]


def check_instruction(instruction_id: str, response: str, kwargs: dict[str, Any] | None, prompt: str = "") -> bool:
    """Strict check of one instruction.

    Args:
        instruction_id: one of :data:`INSTRUCTIONS` (``"punctuation:no_comma"``, ...).
        kwargs: that instruction's arguments; keys whose value is None are ignored.
        prompt: the item's prompt (used by none of the 25 types, kept for their signature).

    Raises:
        KeyError: for an unknown instruction id.
        InstructionArgumentError: for missing or invalid arguments.
    """
    checker = INSTRUCTIONS[instruction_id]
    if not response.strip():
        return False
    clean_kwargs = {key: value for key, value in (kwargs or {}).items() if value is not None}
    return bool(checker(response, clean_kwargs, prompt))


@dataclass(frozen=True)
class IFEvalResult:
    """Per-instruction strict and loose results for one response."""

    instruction_ids: tuple[str, ...]
    strict: tuple[bool, ...]
    loose: tuple[bool, ...]

    @property
    def prompt_strict(self) -> bool:
        return all(self.strict)

    @property
    def prompt_loose(self) -> bool:
        return all(self.loose)

    def to_dict(self) -> dict[str, Any]:
        return {
            "instructions": [
                {"id": iid, "strict": s, "loose": loose}
                for iid, s, loose in zip(self.instruction_ids, self.strict, self.loose, strict=True)
            ],
            "prompt_level_strict": self.prompt_strict,
            "prompt_level_loose": self.prompt_loose,
        }


def evaluate_ifeval(
    response: str, instruction_ids: Sequence[str], kwargs_list: Sequence[dict[str, Any] | None], prompt: str = ""
) -> IFEvalResult:
    """Strict and loose results of every instruction of one IFEval item.

    Args:
        instruction_ids, kwargs_list: the item's ``instruction_id_list`` and ``kwargs`` (same length).
        prompt: the item's prompt.

    Raises:
        ValueError: when the two lists differ in length; KeyError for an unknown instruction id.
    """
    if len(instruction_ids) != len(kwargs_list):
        raise ValueError(f"{len(instruction_ids)} instruction ids but {len(kwargs_list)} kwargs")
    variants = loose_variants(response)
    strict, loose = [], []
    for instruction_id, kwargs in zip(instruction_ids, kwargs_list, strict=True):
        strict.append(check_instruction(instruction_id, response, kwargs, prompt))
        loose.append(any(check_instruction(instruction_id, v, kwargs, prompt) for v in variants))
    return IFEvalResult(tuple(instruction_ids), tuple(strict), tuple(loose))


def verify_ifeval(
    response: str, instruction_ids: Sequence[str], kwargs_list: Sequence[dict[str, Any] | None], prompt: str = ""
) -> Verdict:
    """A :class:`Verdict` whose ``correct`` is prompt-level strict, with every result in ``details``."""
    result = evaluate_ifeval(response, instruction_ids, kwargs_list, prompt)
    return Verdict(correct=result.prompt_strict, extracted=None, details=result.to_dict())
