"""Summary rows from labeled turns built by hand."""

from __future__ import annotations

import pytest

from userturn.records import (
    AssistantTurn,
    Item,
    Label,
    LabeledTurn,
    Message,
    ScoredTurn,
    UserTurn,
    UserTurnContext,
    Verdict,
)
from userturn.stages.aggregate import markdown_table, summarize


def labeled(item_id: str, correct: bool | None, temperature: float, label: str, index: int = 0) -> LabeledTurn:
    item = Item(id=item_id, dataset="demo", messages=(Message("user", "q"),))
    turn = AssistantTurn(item=item, model="m", prompt="p", response="r", response_visible="r", finish_reason="stop")
    context = UserTurnContext(ScoredTurn(turn, Verdict(correct)), "none", turn.context)
    user = UserTurn(context=context, user_model="m", prompt="p2", temperature=temperature, sample_index=index,
                    seed=index, text="t", finish_reason="stop")
    return LabeledTurn(user, Label(label, "test"))


def test_rates_intervals_and_accuracy_per_temperature():
    turns = [labeled("a", True, 0.0, "follow_up"), labeled("b", False, 0.0, "new_query"),
             labeled("c", None, 0.0, "restatement")]
    turns += [labeled("a", True, 1.0, "follow_up", i) for i in range(3)] + [labeled("b", False, 1.0, "empty")]
    rows = {r["temperature"]: r for r in summarize(turns)}
    assert rows[0.0]["n"] == 3 and rows[0.0]["follow_up_rate"] == pytest.approx(1 / 3)
    assert rows[0.0]["accuracy"] == 0.5 and rows[0.0]["accuracy_n"] == 2  # item c has no verifier
    assert rows[1.0]["follow_up"] == 3 and rows[1.0]["follow_up_rate"] == 0.75
    assert rows[1.0]["ci_low"] < 0.75 < rows[1.0]["ci_high"]
    assert rows[1.0]["labels"]["empty"] == 1 and rows[1.0]["labels"]["meta"] == 0


def test_judge_errors_are_reported_but_not_counted_as_labels():
    turns = [labeled("a", None, 0.0, "follow_up"), labeled("b", None, 0.0, "judge_error")]
    row = summarize(turns)[0]
    assert (row["n"], row["unlabeled"], row["follow_up_rate"]) == (1, 1, 1.0)
    assert row["labels"]["judge_error"] == 1


def test_accuracy_is_null_when_no_item_has_a_verifier():
    row = summarize([labeled("a", None, 0.0, "follow_up")])[0]
    assert row["accuracy"] is None
    assert "–" in markdown_table([row])
