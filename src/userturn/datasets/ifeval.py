"""IFEval (Zhou et al., 2023): 541 prompts with 1-3 verifiable instructions each (25 types).

Sources: ``--data-dir`` → ``ifeval/input_data.jsonl`` (``key``, ``prompt``, ``instruction_id_list``,
``kwargs``); ``--dataset-path`` → your JSONL with the same fields (``prompt`` can be mapped as
``query``); otherwise the Hugging Face hub ``google/IFEval``, split ``train``, at a pinned revision.
Item ids are the ``key`` (``"1000"``). ``correct`` is prompt-level strict accuracy; the verdict's
details hold strict and loose results per instruction (see :mod:`userturn.verifiers.ifeval`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from userturn.datasets import DatasetSpec, LoadOptions, register_dataset
from userturn.datasets.jsonl import field_name, hub_rows, local_file, read_jsonl, require
from userturn.errors import DataError
from userturn.records import Item, Message, Verdict
from userturn.verifiers.ifeval import INSTRUCTIONS, verify_ifeval

HUB_REPO, HUB_SPLIT = "google/IFEval", "train"


def validate_instructions(instruction_ids: object, kwargs: object, where: tuple[str, int]) -> None:
    """Check that the ids are known and each has a kwargs object.

    Raises:
        DataError: naming the file, line and field of the first problem.
    """
    path, line = where
    if not isinstance(instruction_ids, list) or not all(isinstance(i, str) for i in instruction_ids):
        raise DataError("expected a list of instruction ids", path=path, line=line, field="instruction_id_list")
    if not isinstance(kwargs, list) or not all(isinstance(k, dict) for k in kwargs):
        raise DataError("expected a list of objects", path=path, line=line, field="kwargs")
    if len(instruction_ids) != len(kwargs):
        raise DataError(f"{len(instruction_ids)} instruction ids but {len(kwargs)} kwargs entries",
                        path=path, line=line, field="kwargs")
    for index, instruction_id in enumerate(instruction_ids):
        if instruction_id not in INSTRUCTIONS:
            raise DataError(f"unknown instruction id {instruction_id!r}", path=path, line=line,
                            field=f"instruction_id_list[{index}]")


def _item(key: object, prompt: str, instruction_ids: list, kwargs: list, meta: dict) -> Item:
    return Item(
        id=str(key),
        dataset="ifeval",
        messages=(Message("user", prompt),),
        meta={"instruction_id_list": list(instruction_ids), "kwargs": [dict(k) for k in kwargs], **meta},
    )


def _load(options: LoadOptions) -> Iterator[Item]:
    path = Path(options.path) if options.path else local_file(options, "ifeval/input_data.jsonl")
    if path is None:
        rows, revision = hub_rows(HUB_REPO, HUB_SPLIT, revision=options.extra.get("revision"))
        source = f"hf:{HUB_REPO}/{HUB_SPLIT}@{revision}"
        for row in rows:
            yield _item(row["key"], row["prompt"], row["instruction_id_list"], row["kwargs"], {"source": source})
        return
    query_field = field_name(options, "query", "prompt")
    id_field = field_name(options, "id", "key")
    for index, (number, row) in enumerate(read_jsonl(path)):
        where = (str(path), number)
        prompt = require(row, query_field, str, where)
        instruction_ids = require(row, "instruction_id_list", list, where)
        kwargs = require(row, "kwargs", list, where)
        validate_instructions(instruction_ids, kwargs, where)
        key = row[id_field] if row.get(id_field) is not None else index
        yield _item(key, prompt, instruction_ids, kwargs, {"source": str(path), "line": number})


def verify_item(item: Item, response: str) -> Verdict:
    return verify_ifeval(response, item.meta["instruction_id_list"], item.meta["kwargs"], item.query)


register_dataset(
    DatasetSpec(
        name="ifeval",
        description="IFEval: prompts with verifiable instructions (google/IFEval train)",
        load=_load,
        verify=verify_item,
        verifier_description="all 25 instruction types; correct = prompt-level strict (loose and "
        "instruction-level in details)",
        size=541,
    )
)
