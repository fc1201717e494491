"""The LLM judge: output parsing, voting, and a smoke test with the embedded model."""

import json
from pathlib import Path

import pytest

from userturn.classifiers import ClassifyInput
from userturn.classifiers.judge import (
    JUDGE_ERROR,
    PROMPT_HASH,
    EnsembleClassifier,
    judge_messages,
    majority_vote,
    parse_judge_output,
    parse_judge_spec,
)
from userturn.records import LABELS, Label

GOLD = Path(__file__).parent / "data" / "gold_user_turns.jsonl"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"label": "follow_up", "reason": "asks about step 2"}', ("follow_up", "asks about step 2")),
        ('```json\n{"label": "Assistant_Drift", "reason": "offers help"}\n```', ("assistant_drift", "offers help")),
        ('Sure. {"label": "new query"} done', ("new_query", "")),
        ('{"label": "question"} then {"label": "meta", "reason": "grades"}', ("meta", "grades")),
    ],
)
def test_parse_accepts_json_label_and_normalises(text, expected):
    assert parse_judge_output(text) == expected


@pytest.mark.parametrize("text", ["", "follow_up", '{"label": 3}', '{"label": "unsure"}', "{not json}"])
def test_parse_rejects_what_is_not_a_known_label(text):
    assert parse_judge_output(text) is None


def test_prompt_defines_all_labels_and_shows_the_turn():
    messages = judge_messages(ClassifyInput("What is 2 + 3?", "2 + 3 = 5", "Why 5?"))
    for name in LABELS:
        assert name in messages[0].content
    assert "<<<Why 5?>>>" in messages[1].content
    retry = judge_messages(ClassifyInput("q", "r", "u"), retry=True)
    assert "not valid" in retry[1].content
    assert len(PROMPT_HASH) == 16


def _vote(label: str, model: str) -> Label:
    return Label(label, f"judge: {label}", "judge", 1.0, {"judge_model": model})


def test_majority_vote_picks_the_majority():
    result = majority_vote([_vote("follow_up", "a"), _vote("new_query", "b"), _vote("follow_up", "c")])
    assert result.label == "follow_up" and result.details["tie"] is False
    assert result.confidence == pytest.approx(2 / 3)


def test_majority_vote_records_ties_and_prefers_the_rules_label():
    votes = [_vote("follow_up", "a"), _vote("new_query", "b")]
    tied = majority_vote(votes, fallback="new_query")
    assert tied.label == "new_query" and tied.details["tie"] is True
    assert tied.details["tied_labels"] == ["follow_up", "new_query"]
    assert majority_vote(votes, fallback="meta").label == "follow_up"  # earliest judge among the tied


def test_majority_vote_ignores_failed_judges_and_reports_total_failure():
    failed = Label(JUDGE_ERROR, "judge_error:unparseable_output", "judge", 0.0, {"judge_error": True})
    assert majority_vote([failed, _vote("meta", "b")]).label == "meta"
    everything_failed = majority_vote([failed, failed])
    assert everything_failed.label == JUDGE_ERROR and everything_failed.details["judge_error"] is True


def test_judge_spec_names_backend_and_model():
    assert parse_judge_spec("embedded") == ("transformers", "embedded")
    assert parse_judge_spec("transformers:/models/x") == ("transformers", "/models/x")
    assert parse_judge_spec("C:/weird/path") == ("transformers", "C:/weird/path")


@pytest.fixture(scope="session")
def embedded_backend():
    from userturn.backends import load_backend

    backend = load_backend("transformers", "embedded")
    yield backend
    backend.close()


@pytest.mark.slow
def test_judge_smoke_with_embedded_model(embedded_backend, tmp_path):
    from userturn.classifiers.judge import JudgeClassifier
    from userturn.store import Store

    rows = [json.loads(line) for line in GOLD.read_text(encoding="utf-8").splitlines()][:5]
    inputs = [ClassifyInput(r["query"], r["response"], r["user_turn"]) for r in rows]
    cache = Store(tmp_path / "store.sqlite")
    judge = JudgeClassifier(embedded_backend, retries=1, max_tokens=32, store=cache)
    labels = judge.classify(inputs)
    print("embedded judge:", [(r["label"], result.label) for r, result in zip(rows, labels, strict=True)])
    assert len(labels) == 5
    for result in labels:
        # a 135M model is a weak judge: any known label or an explicit judge_error, never a silent default
        assert result.label in (*LABELS, JUDGE_ERROR)
        assert result.details["prompt_hash"] == PROMPT_HASH
        assert result.details["judge_model"] == embedded_backend.identity.name
        assert isinstance(result.details["raw_output"], str)
        assert 1 <= result.details["attempts"] <= 2
        assert (result.label == JUDGE_ERROR) == bool(result.details.get("judge_error"))
    stored = cache.count("judge")
    assert stored >= 5
    again = judge.classify(inputs)  # served from the cache: same labels, nothing new stored
    assert [r.label for r in again] == [r.label for r in labels]
    assert cache.count("judge") == stored and cache.count() == stored

    ensemble = EnsembleClassifier([judge], only_uncertain=True)
    mixed = ensemble.classify(inputs)
    for result, rules_first in zip(mixed, ensemble.rules.classify(inputs), strict=True):
        if rules_first.confidence >= 0.7:
            assert result == rules_first  # confident rules labels never reach the judge
        else:
            assert result.details["rules_label"] == rules_first.label
