"""Reading JSONL input files strictly, line by line, with errors that name the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from userturn.errors import DataError


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for every non-blank line of ``path`` (1-based line numbers).

    Raises:
        DataError: the file is missing or unreadable, a line is not UTF-8, not JSON, or not a JSON
            object. The message names the file and the line.
    """
    if not path.is_file():
        raise DataError("file not found", path=str(path))
    number = 0
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DataError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=str(path),
                                    line=number) from None
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"not valid JSON ({exc.msg} at column {exc.colno})", path=str(path),
                                    line=number) from None
                if not isinstance(row, dict):
                    raise DataError(f"expected a JSON object, got {type(row).__name__}", path=str(path),
                                    line=number)
                yield number, row
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror or exc}", path=str(path), line=number or None) from None
