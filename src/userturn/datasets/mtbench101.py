"""MT-Bench-101 (Bai et al., ACL 2024): 1,388 multi-turn dialogues in 13 task types.

Source: ``--data-dir`` → ``mt_bench_101/mtbench101.jsonl`` (``task``, ``id``, ``history`` of
``{"user", "bot"}`` turns) or your file in that format via ``--dataset-path``. The benchmark is
published on GitHub, not as a Hugging Face dataset, so there is no hub fallback.

Dialogues are cut after a ``bot`` turn exactly like :mod:`userturn.datasets.conversations`
(``extra["cut"]`` first|last|all, default last): ``messages`` end with the user turn, the dataset's
reference ``bot`` answer is ``given_response``, and the real next user turn is
``reference_user_turn``. The dialogues are constructed (GPT-4 drafted, human curated), not logs of
real users; ``meta["task"]`` names the kind of follow-up the later user turns make. Ids are
``<id>@<n>`` for a cut after the n-th bot turn. No verifier.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from userturn.datasets import DatasetSpec, LoadOptions, register_dataset
from userturn.datasets.conversations import Conversation, cut_items, cut_mode
from userturn.datasets.jsonl import local_file, read_jsonl, require
from userturn.errors import ConfigError, DataError
from userturn.records import Message

TASK_NAMES = {
    "CM": "Context Memory", "AR": "Anaphora Resolution", "SI": "Separate Input", "TS": "Topic Shift",
    "CC": "Content Confusion", "CR": "Content Rephrasing", "FR": "Format Rephrasing",
    "SC": "Self-correction", "SA": "Self-affirmation", "MR": "Mathematical Reasoning",
    "GR": "General Reasoning", "IC": "Instruction Clarification", "PI": "Proactive Interaction",
}


def _conversations(path: Path) -> Iterator[Conversation]:
    for number, row in read_jsonl(path):
        where = (str(path), number)
        dialogue_id = require(row, "id", (int, str), where)
        task = require(row, "task", str, where)
        history = require(row, "history", list, where)
        messages: list[Message] = []
        for index, turn in enumerate(history):
            if not isinstance(turn, dict) or not isinstance(turn.get("user"), str) or not isinstance(turn.get("bot"), str):
                raise DataError("expected an object with string 'user' and 'bot'", path=str(path), line=number,
                                field=f"history[{index}]")
            messages += [Message("user", turn["user"]), Message("assistant", turn["bot"])]
        meta = {"task": task, "task_name": TASK_NAMES.get(task, task), "source": str(path), "line": number}
        yield Conversation(str(dialogue_id), tuple(messages), None, meta)


def _load(options: LoadOptions):
    mode = cut_mode(options)
    path = Path(options.path) if options.path else local_file(options, "mt_bench_101/mtbench101.jsonl")
    if path is None:
        raise ConfigError("mtbench101 has no Hugging Face copy: pass --data-dir DIR holding "
                          "mt_bench_101/mtbench101.jsonl (from GitHub mtbench101/mt-bench-101)")
    yield from cut_items("mtbench101", _conversations(path), mode)


register_dataset(
    DatasetSpec(
        name="mtbench101",
        description="MT-Bench-101: 1,388 constructed multi-turn dialogues, 13 follow-up task types, "
        "cut after a bot turn (--cut first|last|all)",
        load=_load,
        verify=None,
        verifier_description="none; the reference bot answer is used and the real next user turn is the reference",
        size=1388,
    )
)
