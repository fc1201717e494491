"""Classify stage: label every generated user turn."""

from __future__ import annotations

from collections.abc import Sequence

from userturn.classifiers import Classifier, ClassifyInput
from userturn.records import LabeledTurn, UserTurn


def classify_input(turn: UserTurn, special_tokens: Sequence[str] = ()) -> ClassifyInput:
    """What the classifier sees: the original query, the response the user model saw, and the turn."""
    shown = [m.content for m in turn.context.messages if m.role == "assistant"]
    return ClassifyInput(query=turn.context.scored.turn.item.query, response=shown[-1] if shown else "",
                         user_turn=turn.text, finish_reason=turn.finish_reason,
                         special_tokens=tuple(special_tokens))


def run_classify_stage(turns: Sequence[UserTurn], classifier: Classifier,
                       special_tokens: Sequence[str] = ()) -> list[LabeledTurn]:
    labels = classifier.classify([classify_input(t, special_tokens) for t in turns])
    return [LabeledTurn(user_turn=t, label=label) for t, label in zip(turns, labels, strict=True)]
