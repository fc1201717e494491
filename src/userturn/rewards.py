"""userturn's classifier as an RL reward: plain functions that TRL, verl or any trainer can call.

``follow_up_reward(prompts, completions, **kwargs) -> list[float]`` follows TRL's reward-function
convention (``GRPOTrainer(reward_funcs=[follow_up_reward])``): one float per completion, with the
dataset's other columns passed as keyword lists. :func:`make_follow_up_reward` builds one with other
label weights, a length penalty or another classifier.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from userturn.classifiers import ClassifyInput, load_classifier
from userturn.errors import ConfigError
from userturn.records import LABELS

DEFAULT_WEIGHTS: dict[str, float] = {
    "follow_up": 1.0,
    "acknowledgement": 0.0,
    "restatement": 0.0,
    "new_query": 0.0,
    "meta": -0.5,
    "assistant_drift": -0.5,
    "empty": -1.0,
}

RewardFunction = Callable[..., list[float]]

_WORDS = re.compile(r"\S+")


def _completion_text(completion: Any) -> str:
    """TRL passes strings for plain prompts and ``[{"role", "content"}]`` lists for conversational ones."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content", ""))
    return str(completion)


def _prompt_text(prompt: Any) -> str:
    """A rendered prompt as is; a message list as its contents joined."""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, Mapping))


def _column(kwargs: Mapping[str, Any], name: str, size: int) -> list[str] | None:
    values = kwargs.get(name)
    if values is None:
        return None
    if isinstance(values, str):  # a single value for the whole batch
        return [values] * size
    values = list(values)
    if len(values) != size:
        raise ConfigError(f"reward column '{name}' has {len(values)} values for {size} completions")
    return [str(v) for v in values]


def make_follow_up_reward(weights: Mapping[str, float] | None = None, *, length_penalty: float = 0.0,
                          max_words: int = 60, classifier: str = "rules",
                          classifier_options: Mapping[str, Any] | None = None) -> RewardFunction:
    """Build a reward function ``(prompts, completions, **kwargs) -> list[float]`` from userturn's classifier.

    Args:
        weights: reward per label; labels not given keep their :data:`DEFAULT_WEIGHTS` value
            (follow_up 1.0, acknowledgement/restatement/new_query 0.0, meta/assistant_drift -0.5,
            empty -1.0). An unknown label name raises :class:`ConfigError`.
        length_penalty: subtracted in proportion to the words beyond ``max_words``, reaching the full
            ``length_penalty`` at twice ``max_words``; 0 disables it.
        max_words: the length a user turn may have without penalty.
        classifier: a registered classifier name (``userturn list classifiers``); it is loaded once.
        classifier_options: passed to the classifier factory.

    The returned function reads the original ``query`` and the assistant ``response`` from the
    keyword columns of the same names when they are present (TRL passes every dataset column);
    without them the whole prompt stands in for the response and the query is empty, so the
    classifier can still check that the turn is grounded in what the user saw.
    If a ``log_metric`` callable is passed (TRL does), the batch's follow-up rate is logged as
    ``follow_up_rate``.
    """
    merged = dict(DEFAULT_WEIGHTS)
    for label, value in (weights or {}).items():
        if label not in LABELS:
            raise ConfigError(f"reward weight for unknown label '{label}'; labels are: {', '.join(LABELS)}")
        merged[label] = float(value)
    if length_penalty < 0 or max_words < 1:
        raise ConfigError("length_penalty must be >= 0 and max_words >= 1")
    judge = load_classifier(classifier, **dict(classifier_options or {}))

    def follow_up_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        size = len(completions)
        texts = [_completion_text(c) for c in completions]
        queries = _column(kwargs, "query", size) or [""] * size
        responses = _column(kwargs, "response", size) or [_prompt_text(p) for p in prompts]
        labels = judge.classify([ClassifyInput(query=q, response=r, user_turn=t)
                                 for q, r, t in zip(queries, responses, texts, strict=True)])
        rewards = []
        for label, text in zip(labels, texts, strict=True):
            reward = merged.get(label.label, 0.0)
            if length_penalty:
                excess = max(0, len(_WORDS.findall(text)) - max_words)
                reward -= length_penalty * min(1.0, excess / max_words)
            rewards.append(reward)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and labels:
            log_metric("follow_up_rate", sum(lab.label == "follow_up" for lab in labels) / len(labels))
        return rewards

    return follow_up_reward


_DEFAULT: RewardFunction | None = None


def follow_up_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """The default reward: the rules classifier with :data:`DEFAULT_WEIGHTS` and no length penalty.

    Args:
        prompts: the prompts (rendered strings or message lists), one per completion.
        completions: the generated user turns (strings or ``[{"role", "content"}]`` lists).
        kwargs: optional ``query`` and ``response`` columns (lists, one per completion); see
            :func:`make_follow_up_reward` for what happens without them.

    Returns:
        One float per completion: 1.0 for a follow-up, lower for everything else.
    """
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = make_follow_up_reward()
    return _DEFAULT(prompts, completions, **kwargs)
