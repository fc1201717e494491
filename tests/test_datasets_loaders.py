"""Dataset loaders on the real benchmark files, the conversation cut, and errors on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shared_data import SHARED_DATA, needs_shared_data

from userturn.datasets import LoadOptions, dataset_names, get_dataset, load_items, verify
from userturn.datasets.conversations import threads_from_messages
from userturn.errors import ConfigError, DataError
from userturn.records import Message

REAL = LoadOptions(data_dir=SHARED_DATA)


def test_all_builtin_datasets_are_listed() -> None:
    assert {"gsm8k", "math500", "ifeval", "mtbench", "conversations", "mtbench101", "jsonl"} <= set(dataset_names())


@needs_shared_data
@pytest.mark.parametrize(
    ("name", "size", "first_id"),
    [("gsm8k", 1319, "0"), ("math500", 500, "test/precalculus/807.json"), ("ifeval", 541, "1000"), ("mtbench", 80, "81")],
)
def test_single_turn_benchmarks_load_every_item_with_stable_unique_ids(name: str, size: int, first_id: str) -> None:
    items = load_items(name, REAL)
    assert len(items) == size == get_dataset(name).size
    assert items[0].id == first_id
    assert len({item.id for item in items}) == size
    assert all(len(item.messages) == 1 and item.messages[0].role == "user" and item.query for item in items)
    assert load_items(name, REAL, limit=3) == items[:3]


@needs_shared_data
def test_gold_fields_and_verifiers_on_real_items() -> None:
    gsm8k = load_items("gsm8k", REAL, limit=1)[0]
    assert gsm8k.meta["gold"] == "18" and verify(gsm8k, "She makes $18.").correct
    math = load_items("math500", REAL, limit=1)[0]
    assert verify(math, "\\boxed{(3, \\frac{\\pi}{2})}").correct and not verify(math, "\\boxed{(3, \\pi)}").correct
    ifeval = load_items("ifeval", REAL, limit=1)[0]
    assert ifeval.meta["instruction_id_list"][0] == "punctuation:no_comma"
    assert verify(ifeval, "Short, with commas.").correct is False
    mtbench = load_items("mtbench", REAL, limit=1)[0]
    assert mtbench.reference_user_turn.startswith("Rewrite your previous response")
    assert mtbench.meta["category"] == "writing" and verify(mtbench, "anything").correct is None


@needs_shared_data
def test_oasst_threads_rebuilt_from_raw_message_trees_equal_the_published_threads() -> None:
    raw = [json.loads(line) for line in (SHARED_DATA / "oasst1_en" / "oasst1_en_validation_messages.jsonl").open()]
    published = [json.loads(line) for line in (SHARED_DATA / "oasst1_en" / "conversations.jsonl").open()]
    assert threads_from_messages(raw) == published


@needs_shared_data
@pytest.mark.parametrize("cut", ["first", "last", "all"])
def test_conversation_cut_ends_with_the_query_and_keeps_the_real_reply_and_next_turn(cut: str) -> None:
    items = load_items("conversations", LoadOptions(data_dir=SHARED_DATA, extra={"cut": cut}))
    assert items and len({item.id for item in items}) == len(items)
    threads = [json.loads(line) for line in (SHARED_DATA / "oasst1_en" / "conversations.jsonl").open()]
    for item in items[:50]:
        assert item.messages[-1].role == "user" and item.given_response and item.reference_user_turn
        assert item.meta["cut"] == cut
        if cut == "first":
            assert len(item.messages) == 1
    first = items[0]
    thread = next(t for t in threads if first.id in t["message_ids"])
    at = thread["message_ids"].index(first.id)
    assert first.given_response == thread["messages"][at]["content"]
    assert first.reference_user_turn in [t["messages"][at + 1]["content"] for t in threads
                                         if t["message_ids"][: at + 1] == thread["message_ids"][: at + 1]]
    assert verify(first, "x").correct is None


@needs_shared_data
def test_all_cuts_cover_first_and_last() -> None:
    def ids(cut: str) -> set[str]:
        return {i.id for i in load_items("conversations", LoadOptions(data_dir=SHARED_DATA, extra={"cut": cut}))}

    every = ids("all")
    assert ids("first") <= every and ids("last") <= every and len(every) > len(ids("last"))


@needs_shared_data
def test_sharegpt_export_loads_through_dataset_path() -> None:
    path = SHARED_DATA / "sharegpt_sample" / "sharegpt_v3_sample500.jsonl"
    items = load_items("conversations", LoadOptions(path=path, extra={"cut": "first"}), limit=5)
    assert items[0].id == "yn2eWCt_0@1"
    assert items[0].messages == (Message("user", "how do I add multiple new columns in m for power query or power bi?"),)
    assert items[0].given_response.startswith("In Power Query or Power BI")


@needs_shared_data
def test_mtbench101_cuts_after_a_bot_turn_and_keeps_the_task() -> None:
    items = load_items("mtbench101", LoadOptions(data_dir=SHARED_DATA, extra={"cut": "first"}), limit=2)
    assert items[0].id == "1@1" and items[0].meta["task"] == "GR" and items[0].meta["task_name"] == "General Reasoning"
    assert items[0].given_response.startswith("Based on the given information")
    assert items[0].reference_user_turn.startswith("Now there are two more people")


def _write(tmp_path: Path, lines: list[str], name: str = "data.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, ['{"question": "q", "answer": "#### 1"}', '{"question": "q", "answer": '])
    with pytest.raises(DataError, match=r"data\.jsonl:2: not valid JSON"):
        load_items("gsm8k", LoadOptions(path=path))


def test_missing_field_names_file_line_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, ['{"prompt": "What is 2+2?", "target": "4"}'])
    with pytest.raises(DataError, match=r"data\.jsonl:1: field 'answer': missing field"):
        load_items("gsm8k", LoadOptions(path=path, fields={"query": "prompt"}))
    items = load_items("gsm8k", LoadOptions(path=path, fields={"query": "prompt", "answer": "target"}))
    assert items[0].query == "What is 2+2?" and verify(items[0], "It is 4.").correct


def test_wrong_type_and_unknown_instruction_are_data_errors(tmp_path: Path) -> None:
    path = _write(tmp_path, ['{"problem": ["not", "a", "string"], "answer": "1"}'])
    with pytest.raises(DataError, match=r":1: field 'problem': expected str, got list"):
        load_items("math500", LoadOptions(path=path))
    path = _write(tmp_path, ['{"key": 1, "prompt": "p", "instruction_id_list": ["made:up"], "kwargs": [{}]}'])
    with pytest.raises(DataError, match=r"field 'instruction_id_list\[0\]': unknown instruction id"):
        load_items("ifeval", LoadOptions(path=path))


def test_conversation_with_an_unknown_role_is_a_data_error(tmp_path: Path) -> None:
    path = _write(tmp_path, ['{"messages": [{"role": "robot", "content": "hi"}]}'])
    with pytest.raises(DataError, match=r"field 'messages\[0\]\.role'"):
        load_items("conversations", LoadOptions(path=path))


def test_bad_cut_is_a_config_error(tmp_path: Path) -> None:
    path = _write(tmp_path, ['{"messages": [{"role": "user", "content": "hi"}]}'])
    with pytest.raises(ConfigError, match="--cut"):
        load_items("conversations", LoadOptions(path=path, extra={"cut": "middle"}))


def test_data_dir_without_the_file_names_the_expected_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"gsm8k/test\.jsonl"):
        load_items("gsm8k", LoadOptions(data_dir=tmp_path))


def test_user_jsonl_with_messages_and_field_mapping(tmp_path: Path) -> None:
    path = _write(tmp_path, [
        '{"uid": "a", "prompt": "Tell me a joke."}',
        '{"uid": "b", "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},'
        ' {"role": "user", "content": "How are you?"}]}',
    ])
    items = load_items("jsonl", LoadOptions(path=path, fields={"query": "prompt", "id": "uid"}))
    assert [i.id for i in items] == ["a", "b"] and items[1].query == "How are you?" and len(items[1].messages) == 3
    with pytest.raises(ConfigError, match="--dataset-path"):
        load_items("jsonl", LoadOptions())


def test_conversations_from_user_jsonl_cut_every_assistant_turn(tmp_path: Path) -> None:
    turns = [{"role": r, "content": f"{r} {n}"} for n in range(3) for r in ("user", "assistant")]
    path = _write(tmp_path, [json.dumps({"id": "c1", "messages": [{"role": "system", "content": "sys"}, *turns]})])
    items = load_items("conversations", LoadOptions(path=path, extra={"cut": "all"}))
    assert [i.id for i in items] == ["c1@1", "c1@2"]  # the final assistant turn has no next user turn
    assert items[1].messages[-1] == Message("user", "user 1") and items[1].messages[0].role == "system"
    assert items[1].given_response == "assistant 1" and items[1].reference_user_turn == "user 2"
