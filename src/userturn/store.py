"""A content-addressed store of generations in one SQLite file (WAL mode).

Every completion is keyed by a hash of everything that determines it: model identity and
revision, backend and dtype, chat-template hash, the exact prompt, the sampling parameters, the
seed and the sample index. Nothing about batch size or hardware is in the key, so a killed run
resumes anywhere, and a changed parameter regenerates only what it changes. Writes are batched
in transactions and committed after each chunk of generation.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from userturn.errors import StoreError
from userturn.records import Completion

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    stage TEXT NOT NULL,
    request TEXT NOT NULL,
    text TEXT NOT NULL,
    token_ids TEXT NOT NULL,
    finish_reason TEXT NOT NULL,
    created REAL NOT NULL
);
"""


def generation_key(request: dict[str, Any]) -> str:
    """The store key of one completion: sha256 of the canonical JSON of ``request``."""
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StoredGeneration:
    key: str
    stage: str
    request: dict[str, Any]
    completion: Completion


class Store:
    """Open (or create) the store at ``path``.

    Raises:
        StoreError: the file is not a SQLite database, is truncated/corrupt, was written by an
            incompatible userturn version, or cannot be created (read-only folder, full disk).
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.inserted = 0  # completions written by this process: lets a run report what it generated
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            existing = self.path.is_file() and self.path.stat().st_size > 0
            self._db = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
            self._db.execute("PRAGMA busy_timeout=60000")
            if existing:
                self._check_existing()  # reads only: a store we cannot use is never modified
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # One transaction, so that a second process opening the store at the same moment sees all or nothing.
            self._db.executescript(
                "BEGIN IMMEDIATE;" + _SCHEMA
                + f"INSERT OR IGNORE INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}'); COMMIT;"
            )
        except StoreError:
            self.close()
            raise
        except sqlite3.DatabaseError as exc:
            self.close()
            raise StoreError(
                f"store {self.path} is not a readable userturn store: corrupt, truncated or another kind of file "
                f"(sqlite: {exc}); move it away or use a new --out directory — it was not modified"
            ) from exc
        except OSError as exc:
            self.close()
            raise StoreError(f"cannot create the store at {self.path}: {exc.strerror or exc}") from exc

    def _check_existing(self) -> None:
        """Refuse, without writing anything, a file that is not an intact store of this schema version."""
        tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "meta" in tables:
            row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is not None and row[0] != str(SCHEMA_VERSION):
                raise StoreError(
                    f"store {self.path} has schema version {row[0]}, this userturn needs {SCHEMA_VERSION}: "
                    "use a new --out directory, or the userturn version that wrote it (the old store is left untouched)"
                )
        if tables and not {"meta", "generations"} <= tables:
            raise StoreError(
                f"{self.path} is an SQLite database but not a userturn store (tables: {', '.join(sorted(tables))}); "
                "use another --out directory — it was not modified"
            )
        check = self._db.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise StoreError(
                f"store {self.path} is corrupt (integrity check: {check}); move it away or use a new --out "
                "directory — it was not modified"
            )

    def get_many(self, keys: Sequence[str]) -> dict[str, Completion]:
        """The stored completions among ``keys`` (missing keys are simply absent)."""
        found: dict[str, Completion] = {}
        for start in range(0, len(keys), 500):
            chunk = list(keys[start:start + 500])
            marks = ",".join("?" * len(chunk))
            try:
                rows = self._db.execute(
                    f"SELECT key, text, token_ids, finish_reason FROM generations WHERE key IN ({marks})", chunk
                ).fetchall()
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"store {self.path} cannot be read ({exc}); it may be corrupt") from exc
            for key, text, token_ids, finish in rows:
                found[key] = Completion(text=text, token_ids=tuple(json.loads(token_ids)), finish_reason=finish)
        return found

    def put_many(self, entries: Iterable[tuple[str, str, dict[str, Any], Completion]]) -> int:
        """Write ``(key, stage, request, completion)`` entries in one transaction; returns how many were new."""
        rows = [
            (key, stage, json.dumps(request, sort_keys=True, ensure_ascii=False), c.text,
             json.dumps(list(c.token_ids)), c.finish_reason, time.time())
            for key, stage, request, c in entries
        ]
        if not rows:
            return 0
        try:
            cursor = self._db.cursor()
            cursor.execute("BEGIN IMMEDIATE")
            before = self._db.total_changes
            cursor.executemany("INSERT OR IGNORE INTO generations VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            cursor.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            self._rollback()
            raise StoreError(f"cannot write to the store {self.path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            self._rollback()
            raise StoreError(f"store {self.path} cannot be written ({exc}); it may be corrupt") from exc
        new = self._db.total_changes - before
        self.inserted += new
        return new

    def _rollback(self) -> None:
        try:
            self._db.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def count(self, stage: str | None = None) -> int:
        if stage is None:
            return int(self._db.execute("SELECT COUNT(*) FROM generations").fetchone()[0])
        return int(self._db.execute("SELECT COUNT(*) FROM generations WHERE stage=?", (stage,)).fetchone()[0])

    def integrity_ok(self) -> bool:
        return self._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    def close(self) -> None:
        """Close the connection; safe to call twice."""
        db = self.__dict__.pop("_db", None)
        if db is not None:
            db.close()
