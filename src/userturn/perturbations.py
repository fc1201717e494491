"""Perturbations of the ``[query, response]`` context before the user-turn stage.

Each perturbation is registered by name with the direction it is *expected* to move the
follow-up rate, so that the probe is checked rather than assumed. Every perturbation is a pure
function of the scored turn, the dataset's population, its options and the run seed: the same
items and seed give the same perturbed contexts whatever model wrote the responses (up to the
response text itself), so a perturbation is applied identically across models.

A perturbation that does not apply to an item (no numeric answer to falsify, nothing to
truncate, no other item to swap with) returns None; the item then has no context for that
perturbation, and effects are computed on the items both arms share.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from userturn.errors import ConfigError
from userturn.records import Message, ScoredTurn
from userturn.verifiers.numeric import normalize_number

Direction = Literal["up", "down", "none"]
Options = Mapping[str, Any]
ApplyFunction = Callable[[ScoredTurn, Sequence[ScoredTurn], Options, int], "tuple[Message, ...] | None"]


@dataclass(frozen=True)
class Perturbation:
    """A named, deterministic transformation of the user-turn context.

    Args:
        name: the registry name (``--perturb NAME``).
        expected: the direction a grounded user model should move the follow-up rate, relative to
            the control ``none``: ``up``, ``down`` or ``none`` (no change expected).
        description: one line for ``userturn list perturbations``.
        apply: ``apply(scored, population, options, seed)`` returns the messages the user model
            sees, or None when the perturbation does not apply to this item. ``population`` is
            every scored turn of the same dataset (for perturbations that borrow from other items).
        defaults: the options the perturbation takes and their default values; a user value is
            converted to the default's type.
        check: validates resolved options; returns an error message or None.
    """

    name: str
    expected: Direction
    description: str
    apply: ApplyFunction
    defaults: Mapping[str, Any] = field(default_factory=dict)
    check: Callable[[Options], str | None] | None = None


_REGISTRY: dict[str, Perturbation] = {}


def register_perturbation(p: Perturbation) -> Perturbation:
    _REGISTRY[p.name] = p
    return p


def get_perturbation(name: str) -> Perturbation:
    if name not in _REGISTRY:
        raise ConfigError(f"unknown perturbation '{name}'; choose from: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def perturbation_names() -> list[str]:
    return sorted(_REGISTRY)


def expected_direction(name: str) -> Direction:
    """The declared direction of a registered perturbation; ``none`` for names not registered here."""
    return _REGISTRY[name].expected if name in _REGISTRY else "none"


def _convert(value: Any, default: Any, where: str) -> Any:
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "1", "yes", "on"):
            return True
        if str(value).lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if isinstance(default, (int, float)):
        try:
            number = float(value) if isinstance(default, float) else int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected a number, got {value!r}") from None
        return number
    return str(value)


def resolve_options(name: str, given: Options | None = None) -> dict[str, Any]:
    """The perturbation's defaults overridden by ``given``, converted and checked.

    Raises:
        ConfigError: unknown perturbation, an option it does not take, a value of the wrong type or
            out of range; the message names ``perturbation_options.NAME.KEY``.
    """
    perturbation = get_perturbation(name)
    resolved = dict(perturbation.defaults)
    for key, value in (given or {}).items():
        where = f"perturbation option '{name}.{key}'"
        if key not in perturbation.defaults:
            takes = ", ".join(sorted(perturbation.defaults)) or "no options"
            raise ConfigError(f"{where}: unknown option; '{name}' takes {takes}")
        resolved[key] = _convert(value, perturbation.defaults[key], where)
    if perturbation.check is not None:
        problem = perturbation.check(resolved)
        if problem:
            raise ConfigError(f"perturbation option '{name}': {problem}")
    return resolved


def check_all_options(names: Sequence[str], options: Mapping[str, Options]) -> dict[str, dict[str, Any]]:
    """Resolve the options of every perturbation in ``names``; options for one not in the run are an error."""
    for name in options:
        get_perturbation(name)
        if name not in names:
            raise ConfigError(f"perturbation options given for '{name}', which is not in --perturb")
    return {name: resolve_options(name, options.get(name)) for name in names}


def _rng(seed: int, *parts: str) -> random.Random:
    """A private random stream per (seed, purpose, item): independent of run order and of the model."""
    digest = hashlib.sha256("|".join((str(seed), *parts)).encode()).hexdigest()
    return random.Random(int(digest[:16], 16))


def _with_response(scored: ScoredTurn, response: str) -> tuple[Message, ...]:
    return (*scored.turn.item.messages, Message("assistant", response))


# --- none -----------------------------------------------------------------------------------------

def _control(scored: ScoredTurn, population: Sequence[ScoredTurn], options: Options, seed: int
             ) -> tuple[Message, ...]:
    return scored.turn.context


# --- truncate -------------------------------------------------------------------------------------

_WORD_SPAN = re.compile(r"\S+")


def truncate_text(text: str, fraction: float) -> str | None:
    """The first ``fraction`` of ``text``'s words, cut at the end of a word (inner whitespace kept).

    Args:
        fraction: in (0, 1); the number of words kept is ``floor(words * fraction)``, at least 1 and at
            most ``words - 1``, so the result is always strictly shorter than the text.

    Returns None when the text has fewer than two words (nothing can be cut off).
    """
    spans = [m.span() for m in _WORD_SPAN.finditer(text)]
    if len(spans) < 2:
        return None
    keep = min(len(spans) - 1, max(1, int(len(spans) * fraction)))
    return text[:spans[keep - 1][1]]


def _truncate(scored: ScoredTurn, population: Sequence[ScoredTurn], options: Options, seed: int
              ) -> tuple[Message, ...] | None:
    cut = truncate_text(scored.turn.response_visible, float(options["fraction"]))
    return None if cut is None else _with_response(scored, cut)


def _check_fraction(options: Options) -> str | None:
    fraction = options["fraction"]
    return None if 0 < fraction < 1 else f"fraction must be strictly between 0 and 1, got {fraction}"


# --- wrong_answer ---------------------------------------------------------------------------------

_NUMBER_TOKEN = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w]|\.\d)")


def gold_number(scored: ScoredTurn) -> Decimal | None:
    """The item's gold answer as a number: ``item.answer`` when it is one, else ``meta['gold']``
    (GSM8K keeps the solution text in ``answer`` and the number in ``meta['gold']``)."""
    item = scored.turn.item
    for candidate in (item.answer, item.meta.get("gold")):
        if candidate is not None:
            value = normalize_number(str(candidate))
            if value is not None:
                return value
    return None


def _format_like(value: Decimal, template: str) -> str:
    """``value`` written like ``template``: same number of decimals, thousands commas if it had them."""
    decimals = len(template.split(".")[1]) if "." in template else 0
    quantized = value.quantize(Decimal(1).scaleb(-decimals)) if decimals else value.to_integral_value()
    text = f"{quantized:,.{decimals}f}" if "," in template else f"{quantized:.{decimals}f}"
    return text


def plausible_wrong_number(value: Decimal, avoid: Sequence[Decimal], rng: random.Random,
                           decimals: int = 0) -> Decimal:
    """A number near ``value`` that is none of ``avoid``: ``value ± m·step`` for m in 1..3, where
    ``step`` is about 10% of ``value`` (at least one unit of the last decimal place); a non-negative
    value stays non-negative."""
    unit = Decimal(1).scaleb(-decimals)
    step = max(unit, (abs(value) / 10).quantize(unit))
    candidates = [value + sign * m * step for m in (1, 2, 3) for sign in (1, -1)]
    candidates = [c for c in candidates if c not in avoid and (value < 0 or c >= 0)]
    if not candidates:  # unreachable for |avoid| < 4, kept for safety
        candidates = [value + 7 * step]
    return rng.choice(candidates)


def replace_number(text: str, target: Decimal, replacement: Decimal) -> tuple[str, int]:
    """Replace every number in ``text`` whose value equals ``target`` with ``replacement``, keeping
    each occurrence's format (commas, decimals). Returns the new text and the count replaced."""
    count = 0

    def swap(match: re.Match[str]) -> str:
        nonlocal count
        token = match.group(0)
        if normalize_number(token) != target:
            return token
        count += 1
        return _format_like(replacement, token)

    return _NUMBER_TOKEN.sub(swap, text), count


def _wrong_answer(scored: ScoredTurn, population: Sequence[ScoredTurn], options: Options, seed: int
                  ) -> tuple[Message, ...] | None:
    gold = gold_number(scored)
    extracted = scored.verdict.extracted
    final = normalize_number(extracted) if extracted is not None else None
    if gold is None or final is None:
        return None
    response = scored.turn.response_visible
    tokens = [m.group(0) for m in _NUMBER_TOKEN.finditer(response) if normalize_number(m.group(0)) == final]
    if not tokens:
        return None
    decimals = max(0, -int(final.as_tuple().exponent))  # integers stay integers, 2.5 moves in tenths
    item = scored.turn.item
    wrong = plausible_wrong_number(final, [final, gold], _rng(seed, "wrong_answer", item.dataset, item.id), decimals)
    changed, _ = replace_number(response, final, wrong)
    return _with_response(scored, changed)


# --- swap_response --------------------------------------------------------------------------------

def swap_partner(item_id: str, population_ids: Sequence[str], seed: int, dataset: str = "") -> str | None:
    """The item whose response ``item_id`` borrows: a seeded shuffle of the (sorted) ids, each paired
    with the next one in the cycle, so that no item gets its own response and every response is used
    once. None when the population has fewer than two items."""
    ids = sorted(set(population_ids))
    if len(ids) < 2 or item_id not in ids:
        return None
    order = ids[:]
    _rng(seed, "swap_response", dataset).shuffle(order)
    return order[(order.index(item_id) + 1) % len(order)]


def _swap_response(scored: ScoredTurn, population: Sequence[ScoredTurn], options: Options, seed: int
                   ) -> tuple[Message, ...] | None:
    item = scored.turn.item
    by_id = {s.turn.item.id: s for s in population}
    partner = swap_partner(item.id, list(by_id), seed, item.dataset)
    if partner is None:
        return None
    return _with_response(scored, by_id[partner].turn.response_visible)


# --- empty_response, no_context -------------------------------------------------------------------

def _empty_response(scored: ScoredTurn, population: Sequence[ScoredTurn], options: Options, seed: int
                    ) -> tuple[Message, ...]:
    return _with_response(scored, "")


def _no_context(scored: ScoredTurn, population: Sequence[ScoredTurn], options: Options, seed: int
                ) -> tuple[Message, ...]:
    return ()


# --- append_question, system_prompt ---------------------------------------------------------------

DEFAULT_APPENDED_QUESTION = "Would you like me to explain any step in more detail, or go further?"
DEFAULT_USER_PERSONA = (
    "The user in this conversation is curious and collaborative. After each reply they engage with "
    "what was said: they ask about specific steps, point out anything that looks wrong or missing, "
    "and ask for clarifications or extensions."
)


def _append_question(scored: ScoredTurn, population: Sequence[ScoredTurn], options: Options, seed: int
                     ) -> tuple[Message, ...]:
    response = scored.turn.response_visible.rstrip()
    question = str(options["text"]).strip()
    return _with_response(scored, f"{response}\n\n{question}" if response else question)


def _system_prompt(scored: ScoredTurn, population: Sequence[ScoredTurn], options: Options, seed: int
                   ) -> tuple[Message, ...]:
    context = scored.turn.context
    system = Message("system", str(options["text"]))
    if context and context[0].role == "system":  # the item's own system message is replaced
        return (system, *context[1:])
    return (system, *context)


def _check_text(options: Options) -> str | None:
    return None if str(options["text"]).strip() else "text must not be empty"


for _p in (
    Perturbation("none", "none", "control: the context as the assistant wrote it", _control),
    Perturbation("truncate", "up", "the response cut at a fraction of its words (option fraction, default 0.5); "
                 "a grounded user notices the cut", _truncate, {"fraction": 0.5}, _check_fraction),
    Perturbation("wrong_answer", "up", "numeric items: every occurrence of the final answer replaced by a "
                 "nearby wrong number (seeded); a grounded user objects", _wrong_answer),
    Perturbation("swap_response", "up", "the response of another item of the same dataset (seeded pairing); "
                 "a grounded user is confused", _swap_response),
    Perturbation("empty_response", "down", "an empty assistant turn: nothing to follow up on, the user "
                 "should re-ask", _empty_response),
    Perturbation("no_context", "down", "the user turn opened with no conversation before it (new-query "
                 "baseline)", _no_context),
    Perturbation("append_question", "up", "the response ends with a question to the user (option text)",
                 _append_question, {"text": DEFAULT_APPENDED_QUESTION}, _check_text),
    Perturbation("system_prompt", "up", "a system message describing a collaborative user persona "
                 "(option text)", _system_prompt, {"text": DEFAULT_USER_PERSONA}, _check_text),
):
    register_perturbation(_p)
