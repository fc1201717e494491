"""GSM8K (Cobbe et al., 2021): 1,319 grade-school math word problems, test split.

Sources: ``--data-dir`` → ``gsm8k/test.jsonl`` (the original ``question``/``answer`` lines);
``--dataset-path`` → your JSONL (fields ``question``/``answer`` unless mapped); otherwise the
Hugging Face hub ``openai/gsm8k``, config ``main``, split ``test``, at a pinned revision.
The model sees the question as written (no answer-format instruction). Item ids are the
0-based line index (``"0"`` … ``"1318"``); in your own file, its ``id`` field when present.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from userturn.datasets import DatasetSpec, LoadOptions, register_dataset
from userturn.datasets.jsonl import field_name, hub_rows, local_file, read_jsonl, require
from userturn.records import Item, Message, Verdict
from userturn.verifiers.gsm8k import gold_number, verify_gsm8k

HUB_REPO, HUB_CONFIG, HUB_SPLIT = "openai/gsm8k", "main", "test"


def _item(index: int, question: str, answer: str, item_id: str, meta: dict) -> Item:
    return Item(
        id=item_id,
        dataset="gsm8k",
        messages=(Message("user", question),),
        answer=answer,
        meta={"index": index, "gold": gold_number(answer), **meta},
    )


def _load(options: LoadOptions) -> Iterator[Item]:
    path = Path(options.path) if options.path else local_file(options, "gsm8k/test.jsonl")
    if path is None:
        rows, revision = hub_rows(HUB_REPO, HUB_SPLIT, config=HUB_CONFIG, revision=options.extra.get("revision"))
        source = f"hf:{HUB_REPO}/{HUB_CONFIG}/{HUB_SPLIT}@{revision}"
        for index, row in enumerate(rows):
            yield _item(index, row["question"], row["answer"], str(index), {"source": source})
        return
    query_field = field_name(options, "query", "question")
    answer_field = field_name(options, "answer", "answer")
    id_field = field_name(options, "id", "id")
    for index, (number, row) in enumerate(read_jsonl(path)):
        where = (str(path), number)
        question = require(row, query_field, str, where)
        answer = str(require(row, answer_field, (str, int, float), where))
        item_id = str(row[id_field]) if row.get(id_field) is not None else str(index)
        yield _item(index, question, answer, item_id, {"source": str(path), "line": number})


def verify_item(item: Item, response: str) -> Verdict:
    return verify_gsm8k(response, item.answer or "")


register_dataset(
    DatasetSpec(
        name="gsm8k",
        description="GSM8K test: grade-school math word problems (openai/gsm8k main/test)",
        load=_load,
        verify=verify_item,
        verifier_description="final number (####, \\boxed, 'answer is', else last number; last answer wins) "
        "equals the number after ####",
        size=1319,
    )
)
