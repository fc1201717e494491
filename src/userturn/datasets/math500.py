"""MATH-500 (Lightman et al., 2023): the 500-problem test subset of Hendrycks MATH.

Sources: ``--data-dir`` → ``math500/test.jsonl`` (``problem``, ``answer``, ``subject``, ``level``,
``unique_id``); ``--dataset-path`` → your JSONL (``problem``/``answer`` unless mapped); otherwise the
Hugging Face hub ``HuggingFaceH4/MATH-500``, split ``test``, at a pinned revision.
Item ids are the problem's ``unique_id`` (``test/precalculus/807.json``), a stable string.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from userturn.datasets import DatasetSpec, LoadOptions, register_dataset
from userturn.datasets.jsonl import field_name, hub_rows, local_file, read_jsonl, require
from userturn.records import Item, Message, Verdict
from userturn.verifiers.math_answer import verify_math

HUB_REPO, HUB_SPLIT = "HuggingFaceH4/MATH-500", "test"


def _item(row: dict, item_id: str, problem: str, answer: str, meta: dict) -> Item:
    return Item(
        id=item_id,
        dataset="math500",
        messages=(Message("user", problem),),
        answer=answer,
        meta={"subject": row.get("subject"), "level": row.get("level"), **meta},
    )


def _load(options: LoadOptions) -> Iterator[Item]:
    path = Path(options.path) if options.path else local_file(options, "math500/test.jsonl")
    if path is None:
        rows, revision = hub_rows(HUB_REPO, HUB_SPLIT, revision=options.extra.get("revision"))
        source = f"hf:{HUB_REPO}/{HUB_SPLIT}@{revision}"
        for index, row in enumerate(rows):
            yield _item(row, str(row.get("unique_id") or index), row["problem"], row["answer"], {"source": source})
        return
    query_field = field_name(options, "query", "problem")
    answer_field = field_name(options, "answer", "answer")
    id_field = field_name(options, "id", "unique_id")
    for index, (number, row) in enumerate(read_jsonl(path)):
        where = (str(path), number)
        problem = require(row, query_field, str, where)
        answer = str(require(row, answer_field, (str, int, float), where))
        item_id = str(row[id_field]) if row.get(id_field) is not None else str(index)
        yield _item(row, item_id, problem, answer, {"source": str(path), "line": number})


def verify_item(item: Item, response: str) -> Verdict:
    return verify_math(response, item.answer or "")


register_dataset(
    DatasetSpec(
        name="math500",
        description="MATH-500: competition math, 7 subjects, levels 1-5 (HuggingFaceH4/MATH-500 test)",
        load=_load,
        verify=verify_item,
        verifier_description="last \\boxed{} answer equivalent to the gold answer (math-verify, then string/sympy)",
        size=500,
    )
)
