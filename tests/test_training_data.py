"""Training data, loss masks, the reward function and the learning-curve plot: no model weights loaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from userturn.errors import ConfigError, DataError
from userturn.records import Message
from userturn.rewards import follow_up_reward, make_follow_up_reward
from userturn.training.data import is_heldout, load_training_file, make_data, used_items
from userturn.training.evaluate import comparison_table, heldout_dataset, plot_learning_curves
from userturn.training.sft import IGNORE, mask_conversation

CONVERSATION = [
    Message("user", "My sourdough is flat. What am I doing wrong?"),
    Message("assistant", "A flat loaf usually means an under-active starter or over-proofing."),
    Message("user", "How can I tell if my starter is active enough?"),
    Message("assistant", "It should double within 4 to 8 hours after feeding."),
    Message("user", "Mine takes twelve hours. Should I feed it twice a day?"),
]


def _trained_runs(tokenizer, example) -> list[str]:
    """Decode each maximal run of tokens that carry loss."""
    runs, current = [], []
    for token, label in zip(example.input_ids, example.labels, strict=True):
        if label != IGNORE:
            assert label == token
            current.append(token)
        elif current:
            runs.append(tokenizer.decode(current))
            current = []
    if current:
        runs.append(tokenizer.decode(current))
    return runs


def test_user_mask_covers_exactly_the_user_turns_that_follow_an_assistant_turn(smol_tokenizer):
    example = mask_conversation(smol_tokenizer, CONVERSATION, "user")
    assert _trained_runs(smol_tokenizer, example) == [
        "How can I tell if my starter is active enough?<|im_end|>",
        "Mine takes twelve hours. Should I feed it twice a day?<|im_end|>",
    ]


def test_assistant_mask_covers_exactly_the_assistant_turns(smol_tokenizer):
    example = mask_conversation(smol_tokenizer, CONVERSATION, "assistant")
    assert _trained_runs(smol_tokenizer, example) == [
        f"{CONVERSATION[1].content}<|im_end|>", f"{CONVERSATION[3].content}<|im_end|>"]


def test_all_mask_trains_every_token(smol_tokenizer):
    example = mask_conversation(smol_tokenizer, CONVERSATION, "all")
    assert example.labels == example.input_ids
    assert smol_tokenizer.decode(example.input_ids).startswith("<|im_start|>system")


def test_user_mask_matches_what_the_probe_asks_the_model_to_generate(smol_tokenizer):
    from userturn.templates import open_user_turn

    example = mask_conversation(smol_tokenizer, CONVERSATION[:3], "user")
    first = next(i for i, label in enumerate(example.labels) if label != IGNORE)
    assert smol_tokenizer.decode(example.input_ids[:first]) == open_user_turn(smol_tokenizer, CONVERSATION[:2])


def test_truncation_that_cuts_every_trained_token_drops_the_example(smol_tokenizer):
    assert mask_conversation(smol_tokenizer, CONVERSATION, "user", max_length=20) is None
    assert mask_conversation(smol_tokenizer, CONVERSATION[:1], "user") is None  # no turn follows an assistant


def test_unknown_loss_on_is_a_config_error(smol_tokenizer):
    with pytest.raises(ConfigError, match="--loss-on"):
        mask_conversation(smol_tokenizer, CONVERSATION, "system")


QUERY = "A bakery sold 24 muffins on Monday and twice as many on Tuesday. How many muffins in total?"
RESPONSE = "On Tuesday it sold 2 x 24 = 48 muffins, so over the two days it sold 24 + 48 = 72 muffins."


def test_reward_is_one_for_a_clear_follow_up_and_lower_for_restatement_and_drift():
    completions = [
        "Why did you multiply the 24 muffins by 2 for Tuesday?",  # follow-up grounded in the response
        QUERY,  # restatement of the query
        "I'd be happy to help! Let me know if you have any other questions.",  # assistant drift
        "",  # empty
    ]
    rewards = follow_up_reward([""] * 4, completions, query=[QUERY] * 4, response=[RESPONSE] * 4)
    assert rewards[0] == 1.0
    assert all(r < 1.0 for r in rewards[1:])
    assert rewards[2] < rewards[1] and rewards[3] < rewards[1]


def test_reward_weights_length_penalty_and_logging():
    logged = {}
    reward = make_follow_up_reward({"restatement": 0.25}, length_penalty=0.5, max_words=5)
    long_follow_up = "Why did you multiply the 24 muffins by 2 for Tuesday and not by 3?"  # 15 words: 10 over
    rewards = reward([""] * 2, [QUERY, long_follow_up], query=[QUERY] * 2, response=[RESPONSE] * 2,
                     log_metric=lambda name, value: logged.__setitem__(name, value))
    assert rewards[0] == 0.25 - 0.5
    assert rewards[1] == pytest.approx(1.0 - 0.5)
    assert logged == {"follow_up_rate": 0.5}
    with pytest.raises(ConfigError, match="unknown label"):
        make_follow_up_reward({"followup": 1.0})


def test_reward_without_query_and_response_columns_grounds_in_the_prompt():
    prompt = f"<|im_start|>user\n{QUERY}<|im_end|>\n<|im_start|>assistant\n{RESPONSE}<|im_end|>\n<|im_start|>user\n"
    assert follow_up_reward([prompt], ["Why did you multiply the 24 muffins by 2?"]) == [1.0]
    chat = [[{"role": "user", "content": QUERY}, {"role": "assistant", "content": RESPONSE}]]
    assert follow_up_reward(chat, [[{"role": "user", "content": "Why did you multiply the 24 muffins by 2?"}]]) \
        == [1.0]


def test_heldout_hash_is_stable_and_roughly_proportional():
    ids = [f"q{i}" for i in range(2000)]
    held = [i for i in ids if is_heldout("gsm8k", i, 30)]
    assert 0.25 < len(held) / len(ids) < 0.35
    assert held == [i for i in ids if is_heldout("gsm8k", i, 30)]
    assert not any(is_heldout("gsm8k", i, 0) for i in ids)


def test_make_data_from_oasst1_and_mt_bench(shared_data, tmp_path):
    out = tmp_path / "sft.jsonl"
    stats = make_data(out, conversations=[shared_data / "oasst1_en" / "conversations.jsonl"],
                      mt_bench=[shared_data / "mt_bench" / "question.jsonl"], holdout_percent=0)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert stats["records"] == len(rows) and stats["by_kind"]["mt_bench"] == 39
    for row in rows:
        roles = [m["role"] for m in row["messages"]]
        assert roles[-2:] == ["assistant", "user"]
    mt = [r for r in rows if r["source"]["kind"] == "mt_bench"]
    assert all(r["source"]["dataset"] == "mtbench" and len(r["messages"]) == 3 for r in mt)

    prompts = tmp_path / "prompts.jsonl"
    make_data(prompts, data_format="prompts", conversations=[shared_data / "oasst1_en" / "conversations.jsonl"],
              holdout_percent=50)
    loaded = load_training_file(prompts, "prompts")
    assert all(r["messages"][-1][0] == "assistant" and r["response"] == r["messages"][-1][1] for r in loaded)
    assert not any(is_heldout(d, i, 50) for d, i in used_items(loaded))


def _sample(item_id: str, label: str, turn: str, reference: str | None = None) -> dict:
    return {"item_id": item_id, "dataset": "demo", "perturbation": "none", "temperature": 1.0, "label": label,
            "user_turn": turn, "reference_user_turn": reference,
            "context": [{"role": "user", "content": QUERY}, {"role": "assistant", "content": RESPONSE}]}


def test_make_data_from_a_run_keeps_only_follow_ups_and_holds_items_out(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    ids = [f"m{i:02d}" for i in range(40)]
    rows = [_sample(i, "follow_up", f"Why 2 x 24 for item {i}?") for i in ids]
    rows += [_sample(ids[0], "restatement", QUERY), _sample(ids[0], "follow_up", f"Why 2 x 24 for item {ids[0]}?")]
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "d.jsonl"
    stats = make_data(out, runs=[run], holdout_percent=50)
    written = [json.loads(line) for line in out.read_text().splitlines()]
    kept_ids = {r["source"]["item_ids"][0] for r in written}
    assert kept_ids == {i for i in ids if not is_heldout("demo", i, 50)}
    assert len(written) == len(kept_ids)  # the duplicate is dropped, the restatement never kept
    assert stats["held_out"] == len(ids) - len(kept_ids)
    assert all(r["messages"][-1]["content"].startswith("Why") for r in written)


def test_bad_training_file_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": [{"role": "bot"}]}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: field 'messages'"):
        load_training_file(path, "sft")
    with pytest.raises(DataError, match=r"bad.jsonl:1: field 'messages'.*assistant"):
        load_training_file(path, "prompts")
    with pytest.raises(ConfigError, match="at least one source"):
        make_data(tmp_path / "x.jsonl")


def test_heldout_dataset_excludes_training_items():
    from userturn.datasets import load_items

    all_ids = [i.id for i in load_items("demo")]
    name = heldout_dataset("demo", {("demo", all_ids[0]), ("demo", all_ids[2]), ("gsm8k", all_ids[1])})
    items = load_items(name)
    assert [i.id for i in items] == [i for i in all_ids if i not in (all_ids[0], all_ids[2])]
    assert {i.dataset for i in items} == {"demo"}  # verifier and summary rows stay the base dataset's


def test_comparison_table_pools_temperatures_with_a_wilson_interval():
    def row(t: float, n: int, k: int) -> dict:
        return {"temperature": t, "n": n, "items": 10, "follow_up": k, "follow_up_rate": k / n, "ci_low": 0.0,
                "ci_high": 1.0, "accuracy": 0.5, "accuracy_n": 10}

    table = comparison_table({"base": [row(0.0, 10, 1), row(1.0, 40, 4)], "trained": [row(0.0, 10, 5)]})
    assert "| base | all | 10 | 50 | 0.100 [0.043, 0.214] | 0.50 (n=10) |" in table
    assert table.count("| trained |") == 2


def test_learning_curves_png(tmp_path: Path):
    log = [{"step": 1, "loss": 2.0, "reward": 0.1}, {"step": 2, "loss": 1.5, "reward": 0.3, "follow_up_rate": 0.25},
           {"step": 2, "train_runtime": 1.0, "train_loss": 1.7}]
    path = plot_learning_curves(log, tmp_path / "curves.png", "test")
    assert path is not None and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_learning_curves([{"step": 1, "train_runtime": 1.0}], tmp_path / "none.png") is None
