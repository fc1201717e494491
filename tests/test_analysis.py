"""Analysis tables over samples dicts: effects, conditional rates, reference agreement, decoupling."""

from __future__ import annotations

import pytest

from userturn.analysis import (
    add_rate_details,
    comparison_table,
    conditional_rows,
    decoupling_rows,
    decoupling_table,
    effect_rows,
    effects_table,
    model_pair_rows,
    paired_run_rows,
    reference_rows,
)


def sample(item: str, label: str, *, perturbation: str = "none", temperature: float = 1.0, model: str = "m",
           correct: bool | None = None, dataset: str = "demo", **extra) -> dict:
    return {"item_id": item, "dataset": dataset, "model": model, "user_model": model,
            "perturbation": perturbation, "temperature": temperature, "label": label, "correct": correct, **extra}


def arm(perturbation: str, follow_ups: dict[str, int], k: int = 2, **kwargs) -> list[dict]:
    rows = []
    for item, count in follow_ups.items():
        rows += [sample(item, "follow_up" if i < count else "new_query", perturbation=perturbation, **kwargs)
                 for i in range(k)]
    return rows


def test_effects_compare_each_perturbation_with_the_control_on_shared_items():
    samples = (arm("none", {"a": 0, "b": 1, "c": 0}) + arm("truncate", {"a": 2, "b": 2, "c": 2})
               + arm("append_question", {"a": 0, "b": 0}) + arm("no_context", {"a": 0, "b": 1, "c": 0}))
    rows = {r["perturbation"]: r for r in effect_rows(samples, n_boot=500)}
    assert set(rows) == {"truncate", "append_question", "no_context"}
    t = rows["truncate"]
    assert (t["control_rate"], t["rate"], t["effect"], t["n_items"]) == (pytest.approx(1 / 6), 1.0,
                                                                          pytest.approx(5 / 6), 3)
    assert t["verdict"] == "as_expected" and t["expected"] == "up"
    a = rows["append_question"]   # only a and b are shared: control 1 of 4, perturbed 0 of 4
    assert (a["n_items"], a["effect"]) == (2, pytest.approx(-0.25))
    assert a["verdict"] in ("opposite", "not_significant")
    assert rows["no_context"]["effect"] == 0.0 and rows["no_context"]["verdict"] == "not_significant"
    assert set(t) >= {"model", "dataset", "temperature", "perturbation", "expected", "effect", "ci_low", "ci_high",
                      "verdict", "control_rate", "rate", "n_items"}
    assert "truncate" in effects_table(list(rows.values()))


def test_a_consistent_drop_against_an_expected_rise_is_reported_as_opposite():
    control = arm("none", {str(i): 2 for i in range(8)})
    perturbed = arm("append_question", {str(i): 0 for i in range(8)})
    (row,) = effect_rows(control + perturbed, n_boot=300)
    assert (row["effect"], row["ci_low"], row["ci_high"], row["verdict"]) == (-1.0, -1.0, -1.0, "opposite")


def test_turns_a_judge_failed_to_label_are_left_out_of_the_rates():
    samples = arm("none", {"a": 1}) + [sample("a", "judge_error")] + arm("truncate", {"a": 2})
    (row,) = effect_rows(samples, n_boot=50)
    assert (row["control_rate"], row["effect"]) == (0.5, 0.5)


def test_effects_need_a_control():
    assert effect_rows(arm("truncate", {"a": 1})) == []


def test_effects_are_per_temperature():
    samples = arm("none", {"a": 0}, temperature=0.0, k=1) + arm("truncate", {"a": 1}, temperature=0.0, k=1) \
        + arm("none", {"a": 2}) + arm("truncate", {"a": 0})
    rows = {r["temperature"]: r["effect"] for r in effect_rows(samples, n_boot=100)}
    assert rows == {0.0: 1.0, 1.0: -1.0}


def test_rate_details_add_item_intervals_and_any_follow_up_in_k():
    samples = arm("none", {"a": 0, "b": 1, "c": 4}, k=4)
    rows = [{"model": "m", "user_model": "m", "dataset": "demo", "perturbation": "none", "temperature": 1.0}]
    (row,) = add_rate_details(rows, samples, n_boot=300)
    assert row["item_ci_low"] <= 5 / 12 <= row["item_ci_high"]
    by_k = {e["k"]: e["value"] for e in row["any_follow_up"]}
    # k=1: mean rate (0 + 1/4 + 1)/3; k=2: (0 + 1/2 + 1)/3; k=4: items with any follow-up, 2 of 3
    assert by_k == {1: pytest.approx(5 / 12), 2: pytest.approx(0.5), 4: pytest.approx(2 / 3)}


def test_greedy_rows_have_no_any_in_k():
    samples = arm("none", {"a": 1, "b": 0}, k=1, temperature=0.0)
    rows = [{"model": "m", "user_model": "m", "dataset": "demo", "perturbation": "none", "temperature": 0.0}]
    assert "any_follow_up" not in add_rate_details(rows, samples, n_boot=50)[0]


def test_conditional_rates_split_items_by_correctness():
    samples = (arm("none", {"a": 2}, correct=True) + arm("none", {"b": 1}, correct=True)
               + arm("none", {"c": 0}, correct=False) + arm("none", {"d": 1}))   # d has no verdict
    (row,) = conditional_rows(samples, n_boot=300)
    assert (row["correct_rate"], row["correct_items"]) == (0.75, 2)
    assert (row["wrong_rate"], row["wrong_items"]) == (0.0, 1)
    assert row["difference"] == 0.75


def test_conditional_rows_skip_datasets_without_a_verifier():
    assert conditional_rows(arm("none", {"a": 1})) == []


def test_reference_agreement_and_lexical_similarity():
    samples = [
        sample("a", "follow_up", user_turn="why is the sky blue", reference_user_turn="why is it blue",
               reference_label="follow_up"),
        sample("a", "new_query", user_turn="tell me a joke", reference_user_turn="why is it blue",
               reference_label="follow_up"),
        sample("b", "acknowledgement", user_turn="thanks", reference_user_turn="thanks",
               reference_label="acknowledgement"),
        sample("b", "acknowledgement", user_turn="thanks", reference_user_turn="thanks",
               reference_label="acknowledgement", perturbation="truncate"),   # not the control: ignored
    ]
    (row,) = reference_rows(samples, n_boot=200)
    assert row["label_agreement"] == pytest.approx(2 / 3)
    assert row["reference_follow_up_rate"] == 0.5
    # item a: F1("why is the sky blue", "why is it blue") = 2·(3/5·3/4)/(3/5+3/4) = 2/3, F1(joke) = 0 → 1/3;
    # item b: 1.0 → mean over items (1/3 + 1)/2
    assert row["lexical_similarity"] == pytest.approx((1 / 3 + 1) / 2)
    assert "semantic_similarity" not in row


def test_reference_rows_use_the_embedder_when_given():
    def embed(texts):
        return [[1.0, 0.0] if "blue" in t else [0.0, 1.0] for t in texts]

    samples = [sample("a", "follow_up", user_turn="blue?", reference_user_turn="why blue",
                      reference_label="follow_up"),
               sample("b", "new_query", user_turn="joke", reference_user_turn="why blue", reference_label="follow_up")]
    (row,) = reference_rows(samples, embed=embed, n_boot=100)
    assert row["semantic_similarity"] == pytest.approx(0.5)


def _run(model: str, verdicts: dict[str, bool], follow: dict[str, int], k: int = 2) -> list[dict]:
    return [dict(s, correct=verdicts[s["item_id"]]) for s in arm("none", follow, k=k, model=model)]


def test_decoupling_correlates_accuracy_and_follow_up_across_models():
    items = [str(i) for i in range(10)]
    # accuracies 0.2, 0.5, 0.8 and follow-up rates 0.1, 0.3, 0.2 → Spearman 0.5, Pearson 0.5 (by hand)
    runs = {
        "m1": _run("m1", {i: int(i) < 2 for i in items}, {i: int(int(i) < 1) * 2 for i in items}),
        "m2": _run("m2", {i: int(i) < 5 for i in items}, {i: int(int(i) < 3) * 2 for i in items}),
        "m3": _run("m3", {i: int(i) < 8 for i in items}, {i: int(int(i) < 2) * 2 for i in items}),
    }
    (row,) = decoupling_rows(runs, n_boot=300)
    assert [m["accuracy"] for m in row["models"]] == [0.2, 0.5, 0.8]
    assert [m["follow_up_rate"] for m in row["models"]] == pytest.approx([0.1, 0.3, 0.2])
    assert row["spearman"] == pytest.approx(0.5) and row["pearson"] == pytest.approx(0.5)
    assert row["n_models"] == 3 and row["n_items"] == 10
    assert "m2: 0.50 / 0.30" in decoupling_table([row])


def test_decoupling_with_two_models_gives_no_interval_but_paired_differences():
    items = [str(i) for i in range(6)]
    runs = {"a": _run("a", {i: True for i in items}, {i: 1 for i in items}),
            "b": _run("b", {i: int(i) < 3 for i in items}, {i: 1 for i in items})}
    (row,) = decoupling_rows(runs, n_boot=100)
    assert row["spearman"] is None   # follow-up rate is the same for both: undefined
    (pair,) = model_pair_rows(runs, n_boot=300)
    assert (pair["model_a"], pair["model_b"]) == ("a", "b")
    assert pair["accuracy_difference"] == pytest.approx(-0.5)
    assert pair["rate_difference"] == 0.0
    assert pair["accuracy_ci_high"] < 0   # accuracy moved, the follow-up rate did not: decoupled
    assert "| a | b |" in comparison_table([pair], with_models=True)


def test_paired_run_rows_use_the_items_both_runs_have():
    first = arm("none", {"a": 0, "b": 0, "c": 2}, model="x")
    second = arm("none", {"a": 2, "b": 2}, model="y")
    (row,) = paired_run_rows(first, second, n_boot=100)
    assert (row["n_items"], row["rate_a"], row["rate_b"], row["rate_difference"]) == (2, 0.0, 1.0, 1.0)
    assert row["accuracy_a"] is None


def test_reference_turns_are_labelled_once_per_item_by_the_run_classifier():
    from userturn.classifiers import load_classifier
    from userturn.pipeline import attach_reference_labels
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

    item = Item(id="q1", dataset="mtbench", messages=(Message("user", "Write a haiku about autumn leaves."),),
                reference_user_turn="Thanks, that's lovely!")
    turn = AssistantTurn(item=item, model="m", prompt="p", response="Red leaves drift and fall", 
                         response_visible="Red leaves drift and fall", finish_reason="stop")
    context = UserTurnContext(scored=ScoredTurn(turn, Verdict(None)), perturbation="none", messages=turn.context)
    labeled = [LabeledTurn(UserTurn(context, "m", "p", 1.0, i, i, "Why red?", "stop"), Label("follow_up", "r"))
               for i in range(2)]
    samples = [lt.to_sample() for lt in labeled]
    attach_reference_labels(samples, labeled, load_classifier("rules"), [])
    assert [s["reference_label"] for s in samples] == ["acknowledgement", "acknowledgement"]
    (row,) = reference_rows(samples, n_boot=50)
    assert row["label_agreement"] == 0.0 and row["reference_follow_up_rate"] == 0.0
