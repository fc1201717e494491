"""Writing run outputs: atomic files, so a crash never leaves a half-written result behind."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from userturn.errors import OutputError


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and an atomic rename.

    Raises:
        OutputError: the folder is read-only or the disk is full; ``path`` keeps its old content, if any.
    """
    _write_chunks(path, [text])


def _write_chunks(path: Path, chunks: Iterable[str]) -> None:
    """Write ``chunks`` one after the other (never all in memory) to a temporary file, then rename it to ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}; what was generated before is kept in "
                              "the store: fix it and run the same command again") from exc
        raise


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """One JSON object per line, written atomically; ``rows`` is streamed, so memory does not grow with it."""
    _write_chunks(path, (json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_filename(text: str, *, max_length: int = 80) -> str:
    """A file-name component made from data (an item id, a model or dataset name) that cannot leave its folder.

    Anything but letters, digits, ``.``, ``_`` and ``-`` becomes ``_``; leading dots and dashes are dropped
    (no ``..``, no hidden files, no option-like names); a short hash of the original keeps two different ids
    from mapping to the same name.

    Args:
        text: any string, including ``../../etc/passwd``, absolute paths, NUL bytes or the empty string.
        max_length: the readable part is cut to this many characters before the hash is added.
    """
    readable = _UNSAFE.sub("_", text).lstrip(".-")[:max_length] or "_"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{readable}-{digest}"
