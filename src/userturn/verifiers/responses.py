"""Scoring existing responses without a model (``userturn verify``).

Each input row has a ``response`` (or ``assistant_response``, as in ``samples.jsonl``) and either
the gold fields of its dataset (``answer`` for gsm8k/math500; ``instruction_id_list``, ``kwargs``
and ``prompt`` for ifeval) or an ``id`` (or ``item_id``) of a dataset item. Gold fields, when
present, win over the id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from userturn.datasets import get_dataset
from userturn.errors import DataError
from userturn.records import Item, Message, Verdict

GOLD_FIELDS: dict[str, tuple[str, ...]] = {
    "gsm8k": ("answer",),
    "math500": ("answer",),
    "ifeval": ("instruction_id_list", "kwargs", "prompt"),
}


def response_of(row: dict[str, Any], where: tuple[str, int]) -> str:
    """The row's response text.

    Raises:
        DataError: neither ``response`` nor ``assistant_response`` is a string.
    """
    for key in ("response", "assistant_response"):
        if isinstance(row.get(key), str):
            return row[key]
    raise DataError("missing field (a string)", path=where[0], line=where[1], field="response")


def row_id(row: dict[str, Any]) -> str | None:
    for key in ("id", "item_id"):
        if row.get(key) is not None:
            return str(row[key])
    return None


def item_from_row(dataset: str, row: dict[str, Any], where: tuple[str, int],
                  lookup: Callable[[str], Item | None]) -> Item:
    """The item a response row is scored against: built from its gold fields, else looked up by id.

    Args:
        lookup: finds a dataset item by id (loads the dataset on first use); None when unknown.

    Raises:
        DataError: no gold fields and no id, an unknown id, or invalid gold fields.
    """
    gold = GOLD_FIELDS.get(dataset, ())
    if gold and all(row.get(key) is not None for key in gold):
        item_id = row_id(row) or str(where[1])
        if dataset == "ifeval":
            from userturn.datasets.ifeval import validate_instructions

            validate_instructions(row["instruction_id_list"], row["kwargs"], where)
            if not isinstance(row["prompt"], str):
                raise DataError("expected a string", path=where[0], line=where[1], field="prompt")
            return Item(id=item_id, dataset=dataset, messages=(Message("user", row["prompt"]),),
                        meta={"instruction_id_list": row["instruction_id_list"], "kwargs": row["kwargs"]})
        prompt = row.get("question") or row.get("problem") or row.get("prompt") or ""
        return Item(id=item_id, dataset=dataset, messages=(Message("user", str(prompt)),), answer=str(row["answer"]))
    item_id = row_id(row)
    if item_id is None:
        wanted = " + ".join(gold) if gold else "none for this dataset"
        raise DataError(f"needs 'id' of a {dataset} item or the gold fields ({wanted})",
                        path=where[0], line=where[1], field="id")
    item = lookup(item_id)
    if item is None:
        raise DataError(f"no {dataset} item has id {item_id!r}", path=where[0], line=where[1], field="id")
    return item


def scored_row(row: dict[str, Any], verdict: Verdict) -> dict[str, Any]:
    """``row`` with ``correct``, ``extracted_answer`` and the verifier's details added."""
    out = dict(row)
    out["correct"] = verdict.correct
    out["extracted_answer"] = verdict.extracted
    details = dict(verdict.details)
    if "instructions" in details:
        out["instruction_results"] = details.pop("instructions")
        out["prompt_level_strict"] = details.pop("prompt_level_strict")
        out["prompt_level_loose"] = details.pop("prompt_level_loose")
    if details:
        out["verify_details"] = details
    return out


def verify_row(dataset: str, row: dict[str, Any], where: tuple[str, int],
               lookup: Callable[[str], Item | None]) -> dict[str, Any]:
    """Score one response row with ``dataset``'s verifier and return the scored row."""
    spec = get_dataset(dataset)
    item = item_from_row(dataset, row, where, lookup)
    response = response_of(row, where)
    assert spec.verify is not None
    return scored_row(row, spec.verify(item, response))


def summarize(dataset: str, scored: list[dict[str, Any]]) -> dict[str, float | int]:
    """Accuracy figures over scored rows (IFEval adds prompt/instruction, strict/loose)."""
    total = len(scored)
    summary: dict[str, float | int] = {
        "n": total,
        "accuracy": sum(1 for r in scored if r["correct"]) / total if total else 0.0,
    }
    if dataset == "ifeval" and total:
        instructions = [i for r in scored for i in r["instruction_results"]]
        summary["prompt_level_strict"] = sum(r["prompt_level_strict"] for r in scored) / total
        summary["prompt_level_loose"] = sum(r["prompt_level_loose"] for r in scored) / total
        summary["instruction_level_strict"] = sum(i["strict"] for i in instructions) / len(instructions)
        summary["instruction_level_loose"] = sum(i["loose"] for i in instructions) / len(instructions)
    return summary
