"""MT-Bench (Zheng et al., 2023): 80 two-turn questions in 8 categories.

Sources: ``--data-dir`` → ``mt_bench/question.jsonl`` (FastChat's ``question_id``, ``category``,
``turns``, optional ``reference``); ``--dataset-path`` → your JSONL in that format; otherwise the
Hugging Face hub ``HuggingFaceH4/mt_bench_prompts`` (``prompt``, ``prompt_id``, ``category``,
``reference``), split ``train``, at a pinned revision.

The model sees the first turn; the dataset's second user turn is kept as ``reference_user_turn``,
a human-written reference follow-up. No verifier (accuracy ``null``). Ids are the ``question_id``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from userturn.datasets import DatasetSpec, LoadOptions, register_dataset
from userturn.datasets.jsonl import hub_rows, local_file, read_jsonl, require
from userturn.errors import DataError
from userturn.records import Item, Message

HUB_REPO, HUB_SPLIT = "HuggingFaceH4/mt_bench_prompts", "train"


def _item(question_id: object, category: str, turns: list[str], reference: object, meta: dict) -> Item:
    return Item(
        id=str(question_id),
        dataset="mtbench",
        messages=(Message("user", turns[0]),),
        reference_user_turn=turns[1] if len(turns) > 1 else None,
        meta={"category": category, "turns": list(turns), "reference_answers": reference or [], **meta},
    )


def _load(options: LoadOptions) -> Iterator[Item]:
    path = Path(options.path) if options.path else local_file(options, "mt_bench/question.jsonl")
    if path is None:
        rows, revision = hub_rows(HUB_REPO, HUB_SPLIT, revision=options.extra.get("revision"))
        source = f"hf:{HUB_REPO}/{HUB_SPLIT}@{revision}"
        for row in rows:
            yield _item(row["prompt_id"], row["category"], list(row["prompt"]), row.get("reference"),
                        {"source": source})
        return
    for number, row in read_jsonl(path):
        where = (str(path), number)
        question_id = require(row, "question_id", (int, str), where)
        turns = require(row, "turns", list, where)
        if not turns or not all(isinstance(t, str) and t.strip() for t in turns):
            raise DataError("expected a list of non-empty strings", path=str(path), line=number, field="turns")
        category = row.get("category") or "uncategorized"
        yield _item(question_id, category, turns, row.get("reference"), {"source": str(path), "line": number})


register_dataset(
    DatasetSpec(
        name="mtbench",
        description="MT-Bench: 80 two-turn questions, 8 categories; turn 2 kept as the human reference follow-up",
        load=_load,
        verify=None,
        verifier_description="none (accuracy null)",
        size=80,
    )
)
