"""Assistant responses from a file (``--responses``), instead of generating them.

Accepted: any JSONL with an item id and a response per line. The id is read from ``item_id``,
``id`` or ``doc_id`` (lm-evaluation-harness ``samples_*.jsonl`` number documents from 0, like
userturn's GSM8K ids); the response from ``response``, ``assistant_response`` (a userturn
``samples.jsonl``), ``resps`` (lm-eval's raw generations, a list of lists; the first string is
taken, not the filtered answer), ``completion`` or ``output``. A ``dataset`` field, when
present, restricts a line to that dataset. The same id given twice with the same text is fine (lm-eval
writes one line per filter); with different texts it is an error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from userturn.errors import DataError
from userturn.records import Item

ID_FIELDS = ("item_id", "id", "doc_id")
RESPONSE_FIELDS = ("response", "assistant_response", "resps", "completion", "output")


def _first_string(value: Any) -> str | None:
    """``"x"`` → ``"x"``; ``[["x"]]`` → ``"x"``; anything else → None."""
    while isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, str) else None


def read_responses(path: Path) -> dict[tuple[str | None, str], str]:
    """Read ``path`` into ``{(dataset or None, item id): response}``.

    Raises:
        DataError: missing file, a line that is not a JSON object, a line without an id field or
            response field (naming the accepted names), a response that is not text, or one id
            with two different responses; the message names the file, line and field.
    """
    if not path.is_file():
        raise DataError("file not found", path=str(path))
    responses: dict[tuple[str | None, str], str] = {}
    first_line: dict[tuple[str | None, str], int] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"not valid JSON ({exc.msg})", path=str(path), line=number) from None
            if not isinstance(row, dict):
                raise DataError("expected a JSON object per line", path=str(path), line=number)
            id_field = next((f for f in ID_FIELDS if row.get(f) is not None), None)
            if id_field is None:
                raise DataError(f"no item id; expected one of {', '.join(ID_FIELDS)}", path=str(path), line=number,
                                field=ID_FIELDS[0])
            response_field = next((f for f in RESPONSE_FIELDS if f in row), None)
            if response_field is None:
                raise DataError(f"no response; expected one of {', '.join(RESPONSE_FIELDS)}", path=str(path),
                                line=number, field=RESPONSE_FIELDS[0])
            text = _first_string(row[response_field])
            if text is None:
                raise DataError("the response must be a string (or a list whose first element is one)",
                                path=str(path), line=number, field=response_field)
            dataset = row.get("dataset") if isinstance(row.get("dataset"), str) else None
            key = (dataset, str(row[id_field]))
            if key in responses and responses[key] != text:
                raise DataError(f"item '{key[1]}' already has a different response on line {first_line[key]}",
                                path=str(path), line=number, field=response_field)
            responses[key] = text
            first_line.setdefault(key, number)
    if not responses:
        raise DataError("no responses in the file", path=str(path))
    return responses


def apply_responses(items: Sequence[Item], responses: dict[tuple[str | None, str], str], path: Path
                    ) -> tuple[list[Item], list[Item]]:
    """Give each item its response from the file; returns ``(with_response, without)``.

    A line with a ``dataset`` field matches that dataset's item only; one without matches the
    item of that id in any dataset.

    Raises:
        DataError: not one item of the run has a response in the file (the message shows a few ids
            of each side, so a numbering mismatch is visible).
    """
    matched, missing = [], []
    for item in items:
        text = responses.get((item.dataset, item.id), responses.get((None, item.id)))
        if text is None:
            missing.append(item)
        else:
            matched.append(replace(item, given_response=text))
    if not matched:
        file_ids = ", ".join(sorted({i for _, i in responses})[:3])
        item_ids = ", ".join(i.id for i in items[:3])
        raise DataError(f"no item of the run has a response here (file ids: {file_ids} ...; item ids: "
                        f"{item_ids} ...)", path=str(path))
    return matched, missing
