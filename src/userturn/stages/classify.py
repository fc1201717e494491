"""Classify stage: label every generated user turn."""

from __future__ import annotations

from collections.abc import Sequence

from userturn.classifiers import Classifier, ClassifyInput
from userturn.records import LabeledTurn, UserTurn


def classify_input(turn: UserTurn, special_tokens: Sequence[str] = ()) -> ClassifyInput:
    """What the classifier sees: the query and response the user model saw (after any perturbation;
    both empty for ``no_context``), and the turn."""
    shown = [m.content for m in turn.context.messages if m.role == "assistant"]
    asked = [m.content for m in turn.context.messages if m.role == "user"]
    return ClassifyInput(query=asked[-1] if asked else "", response=shown[-1] if shown else "",
                         user_turn=turn.text, finish_reason=turn.finish_reason,
                         special_tokens=tuple(special_tokens))


def run_classify_stage(turns: Sequence[UserTurn], classifier: Classifier,
                       special_tokens: Sequence[str] = ()) -> list[LabeledTurn]:
    labels = classifier.classify([classify_input(t, special_tokens) for t in turns])
    return [LabeledTurn(user_turn=t, label=label) for t, label in zip(turns, labels, strict=True)]
