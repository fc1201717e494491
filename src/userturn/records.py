"""Plain typed records that flow through the pipeline.

Every stage takes records of one kind and returns records of the next kind; nothing
in here does I/O. A record can always be turned back into JSON with ``to_dict``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant"]

LABELS: tuple[str, ...] = (
    "follow_up",
    "acknowledgement",
    "restatement",
    "new_query",
    "assistant_drift",
    "meta",
    "empty",
)


@dataclass(frozen=True)
class Message:
    role: Role
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


def as_messages(raw: list[dict[str, Any]] | list[Message]) -> tuple[Message, ...]:
    """Turn a list of ``{"role", "content"}`` dicts (or Messages) into a tuple of Messages."""
    return tuple(m if isinstance(m, Message) else Message(m["role"], m["content"]) for m in raw)


def messages_to_dicts(messages: tuple[Message, ...] | list[Message]) -> list[dict[str, str]]:
    return [m.to_dict() for m in messages]


@dataclass(frozen=True)
class Item:
    """One benchmark item, as the assistant stage will see it.

    Args:
        id: unique within its dataset; safe for display, never used as a file path.
        dataset: the registered dataset name (``demo``, ``gsm8k``, ...).
        messages: the conversation up to and including the user query the assistant answers.
            Single-turn datasets have exactly one user message.
        answer: the gold answer the verifier compares against, or None when the task has none.
        reference_user_turn: a human-written next user turn, where the dataset has one
            (MT-Bench's second turn, the real next turn of a conversation corpus).
        given_response: an assistant response fixed by the dataset or a responses file; when set,
            the assistant stage uses it instead of generating one.
        meta: verifier inputs and descriptive fields (category, instruction ids, kwargs, ...).
    """

    id: str
    dataset: str
    messages: tuple[Message, ...]
    answer: str | None = None
    reference_user_turn: str | None = None
    given_response: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def query(self) -> str:
        """The last user message: the query the assistant turn answers."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.content
        return ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["messages"] = messages_to_dicts(self.messages)
        return data


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters for one request; mirrors vLLM's names.

    Args:
        temperature: 0 means greedy decoding (seed and top_p are then ignored).
        top_p: nucleus mass in (0, 1]; 1 disables it.
        max_tokens: the most new tokens to generate (at least 1).
        n: how many completions to return for the prompt.
        seed: base seed; completion ``i`` of the request uses ``seed + i``.
        stop: extra stop strings; the backend also stops at the model's end-of-turn and EOS tokens.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    n: int = 1
    seed: int = 0
    stop: tuple[str, ...] = ()

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def key(self) -> dict[str, Any]:
        """The fields that change what a single completion is (``n`` is not one of them)."""
        return {
            "temperature": round(float(self.temperature), 6),
            "top_p": round(float(self.top_p), 6) if not self.greedy else 1.0,
            "max_tokens": int(self.max_tokens),
            "stop": list(self.stop),
        }


@dataclass(frozen=True)
class Completion:
    """One generated continuation.

    ``finish_reason`` is ``"stop"`` when an end-of-turn/EOS token or stop string ended it and
    ``"length"`` when ``max_tokens`` ran out. ``text`` excludes the stop token.
    """

    text: str
    token_ids: tuple[int, ...] = ()
    finish_reason: Literal["stop", "length"] = "stop"


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt with its sampling parameters; the unit a backend receives."""

    prompt: str
    params: SamplingParams


@dataclass(frozen=True)
class AssistantTurn:
    """An item with the assistant response the model gave (or that was given)."""

    item: Item
    model: str
    prompt: str
    response: str
    response_visible: str
    finish_reason: str
    generated: bool = True

    @property
    def context(self) -> tuple[Message, ...]:
        """The conversation the user-turn stage continues: the item's messages plus the visible response."""
        return (*self.item.messages, Message("assistant", self.response_visible))


@dataclass(frozen=True)
class Verdict:
    """The verifier's score of one assistant response. ``correct`` is None when the task has no verifier."""

    correct: bool | None
    extracted: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScoredTurn:
    turn: AssistantTurn
    verdict: Verdict


@dataclass(frozen=True)
class UserTurnContext:
    """The conversation handed to the user-turn stage, after any perturbation."""

    scored: ScoredTurn
    perturbation: str
    messages: tuple[Message, ...]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UserTurn:
    """One generated next user turn."""

    context: UserTurnContext
    user_model: str
    prompt: str
    temperature: float
    sample_index: int
    seed: int
    text: str
    finish_reason: str


@dataclass(frozen=True)
class Label:
    """A classifier's decision for one user turn; ``reason`` names the rule or judge rationale."""

    label: str
    reason: str
    classifier: str = "rules"
    confidence: float = 1.0
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LabeledTurn:
    user_turn: UserTurn
    label: Label

    def to_sample(self) -> dict[str, Any]:
        """The flat JSON line written to ``samples.jsonl``."""
        ut = self.user_turn
        ctx = ut.context
        scored = ctx.scored
        turn = scored.turn
        item = turn.item
        return {
            "item_id": item.id,
            "dataset": item.dataset,
            "model": turn.model,
            "user_model": ut.user_model,
            "perturbation": ctx.perturbation,
            "perturbation_options": dict(ctx.options),
            "temperature": ut.temperature,
            "sample_index": ut.sample_index,
            "seed": ut.seed,
            "query": item.query,
            "assistant_prompt": turn.prompt,
            "assistant_response": turn.response,
            "assistant_finish_reason": turn.finish_reason,
            "correct": scored.verdict.correct,
            "extracted_answer": scored.verdict.extracted,
            "context": messages_to_dicts(ctx.messages),
            "user_turn_prompt": ut.prompt,
            "user_turn": ut.text,
            "finish_reason": ut.finish_reason,
            "label": self.label.label,
            "label_reason": self.label.reason,
            "classifier": self.label.classifier,
            "reference_user_turn": item.reference_user_turn,
        }
