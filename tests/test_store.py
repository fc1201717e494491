"""The content-addressed store on a real SQLite file."""

from __future__ import annotations

import sqlite3

import pytest

from userturn.errors import StoreError
from userturn.records import Completion
from userturn.store import SCHEMA_VERSION, Store, generation_key


def test_key_depends_on_every_field_and_not_on_order():
    a = {"prompt": "p", "seed": 1, "sampling": {"temperature": 0.7}}
    assert generation_key(a) == generation_key(dict(reversed(list(a.items()))))
    assert generation_key(a) != generation_key({**a, "seed": 2})
    assert generation_key(a) != generation_key({**a, "prompt": "p "})


def test_put_then_get_roundtrips_and_counts_only_new_rows(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    c = Completion("hello <|im_start|>", (1, 2, 3), "length")
    assert store.put_many([("k1", "user_turn", {"x": 1}, c)]) == 1
    assert store.put_many([("k1", "user_turn", {"x": 1}, c), ("k2", "assistant", {}, c)]) == 1
    assert store.get_many(["k1", "k2", "missing"]) == {"k1": c, "k2": c}
    assert store.count() == 2 and store.count("assistant") == 1
    assert store.inserted == 2
    store.close()
    reopened = Store(tmp_path / "s.sqlite")
    assert reopened.get_many(["k1"])["k1"] == c
    assert reopened.integrity_ok()


def test_store_uses_wal_journal(tmp_path):
    Store(tmp_path / "s.sqlite").close()
    mode = sqlite3.connect(tmp_path / "s.sqlite").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_garbage_file_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a readable userturn store"):
        Store(path)
    assert path.read_bytes() == before


def test_store_from_another_schema_version_is_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="schema version"):
        Store(path)
