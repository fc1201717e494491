"""Damaged stores and unwritable disks: a clear error, and nothing that was there is ever overwritten.

The disk tests use what Linux offers without extra packages: a per-process file-size limit
(``RLIMIT_FSIZE``, the child sees ``EFBIG`` exactly like a full disk) and, when the tests run as root,
small or read-only tmpfs mounts.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    SMALL,
    SMALL_ASSISTANT,
    SMALL_USER,
    assert_one_line_error,
    child_env,
    comparable,
    default_signals,
    integrity,
    read_samples,
    stored,
    userturn,
)

from userturn.errors import StoreError
from userturn.records import Completion
from userturn.store import SCHEMA_VERSION, Store

TINY = ["--limit", "1", "--temperatures", "0", "--assistant-max-new-tokens", "4", "--user-max-new-tokens", "4",
        "--threads", "1", "--quiet"]


def _filled_store(path: Path, rows: int = 300) -> Path:
    store = Store(path)
    store.put_many([(f"k{i}", "user_turn", {"i": i}, Completion("text " * 60 + str(i), (i,), "stop"))
                    for i in range(rows)])
    store.close()  # the last connection checkpoints the WAL into the main file
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    return path


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _scribble_page(path: Path) -> None:
    data = bytearray(path.read_bytes())
    page = 4096
    data[3 * page: 4 * page] = bytes((i * 37 + 11) % 256 for i in range(page))
    path.write_bytes(bytes(data))


def _garbage(path: Path) -> None:
    path.write_bytes(b"definitely not sqlite " * 500)


def _future_version(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    db.execute("ALTER TABLE generations RENAME TO generations_v2")
    db.commit()
    db.close()


def _foreign_database(path: Path) -> None:
    path.unlink()
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    db.execute("INSERT INTO invoices VALUES (1, 9.5)")
    db.commit()
    db.close()


@pytest.mark.parametrize(("damage", "message"), [
    (_truncate, "not a readable userturn store"),
    (_scribble_page, "corrupt"),
    (_garbage, "not a readable userturn store"),
    (_future_version, f"schema version {SCHEMA_VERSION + 1}"),
    (_foreign_database, "not a userturn store"),
])
def test_damaged_store_is_refused_and_never_modified(tmp_path, damage, message):
    path = _filled_store(tmp_path / "store.sqlite")
    damage(path)
    before = _snapshot(tmp_path)
    with pytest.raises(StoreError, match=message) as raised:
        Store(path)
    assert "--out" in str(raised.value) or "move it away" in str(raised.value)
    after = {k: v for k, v in _snapshot(tmp_path).items() if not k.endswith(("-wal", "-shm"))}
    assert after == before


def test_an_empty_file_is_a_new_store(tmp_path):
    """Zero bytes hold nothing to lose (a crash before the first write): it is initialised, not refused."""
    (tmp_path / "store.sqlite").write_bytes(b"")
    store = Store(tmp_path / "store.sqlite")
    assert store.count() == 0 and store.integrity_ok()
    store.close()


def test_a_killed_writer_leaves_a_readable_store(tmp_path):
    """SIGKILL in the middle of a stream of transactions: every committed row is there, the store is intact."""
    script = (
        "import sys\n"
        "from userturn.records import Completion\n"
        "from userturn.store import Store\n"
        "s = Store(sys.argv[1])\n"
        "i = 0\n"
        "while True:\n"
        "    s.put_many([(f'k{i}-{j}', 'user_turn', {}, Completion('x' * 3000, (1,), 'stop')) for j in range(20)])\n"
        "    i += 1\n"
        "    if i == 5: print('ready', flush=True)\n"
    )
    db = tmp_path / "store.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", script, str(db)],
                            env=child_env(), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = Store(db)
    assert store.integrity_ok()
    count = store.count()
    assert count >= 100 and count % 20 == 0  # whole transactions only
    store.close()


@pytest.mark.slow
@pytest.mark.parametrize(("damage", "fragment"), [(_garbage, "not a readable userturn store"),
                                                  (_future_version, "schema version")])
def test_run_into_a_damaged_store_stops_with_one_line_and_keeps_it(tmp_path, damage, fragment):
    out = tmp_path / "run"
    out.mkdir()
    path = _filled_store(out / "store.sqlite")
    damage(path)
    before = _snapshot(out)
    proc = userturn("run", *TINY, "--out", str(out), cwd=tmp_path)
    assert_one_line_error(proc, fragment, str(out / "store.sqlite"))
    after = {k: v for k, v in _snapshot(out).items() if not k.endswith(("-wal", "-shm", ".log"))}
    assert after == before
    assert not (out / "run.json").exists()


def _limit_file_size(limit: int):
    def apply() -> None:
        default_signals()
        # Ignored SIGXFSZ survives exec, so a write past the limit fails with EFBIG, as on a full disk.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.slow
def test_disk_full_during_the_run_stops_clearly_and_keeps_every_committed_generation(reference_run, tmp_path):
    out = tmp_path / "run"
    trace = tmp_path / "trace.txt"
    args = ["run", *SMALL, "--batch-size", "1", "--out", str(out), "--quiet"]
    full = userturn(*args, cwd=tmp_path, env=child_env(USERTURN_TEST_TRACE=str(trace)),
                    preexec_fn=_limit_file_size(40 * 1024))
    last = assert_one_line_error(full, "store")
    assert "full" in last or "too large" in last.lower() or "disk" in last
    kept = stored(out / "store.sqlite")
    assert 0 < kept < SMALL_ASSISTANT + SMALL_USER
    assert integrity(out / "store.sqlite") == "ok"
    resumed = userturn(*args, "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads(resumed.stdout)["generated"] == SMALL_ASSISTANT + SMALL_USER - kept
    assert comparable(read_samples(out)) == comparable(read_samples(reference_run))


def _mount_tmpfs(target: Path, size: str, *options: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    target.mkdir(parents=True, exist_ok=True)
    opts = ",".join([f"size={size}", *options])
    return subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(target)], capture_output=True).returncode == 0


def _umount(target: Path) -> None:
    subprocess.run(["umount", "-l", str(target)], capture_output=True)


@pytest.mark.slow
def test_output_filesystem_without_room_is_refused_before_any_generation(tmp_path):
    mount = tmp_path / "small"
    if not _mount_tmpfs(mount, "1m"):
        pytest.skip("needs root to mount a 1 MiB tmpfs")
    try:
        proc = userturn("run", *TINY, "--out", str(mount / "run"), cwd=tmp_path)
        assert_one_line_error(proc, "KiB free", str(mount / "run"))
        assert not (mount / "run" / "store.sqlite").exists()
    finally:
        _umount(mount)


@pytest.mark.slow
def test_read_only_output_directory_is_refused_and_what_is_there_is_kept(tmp_path):
    mount = tmp_path / "disk"
    if os.geteuid() != 0:
        mount.mkdir()
        readonly = lambda: mount.chmod(0o555)  # noqa: E731
    elif _mount_tmpfs(mount, "64m"):
        readonly = lambda: subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)  # noqa: E731
    else:
        pytest.skip("root without permission to mount a tmpfs: a read-only folder cannot be made")
    try:
        out = mount / "run"
        first = userturn("run", *TINY, "--out", str(out), cwd=tmp_path)
        assert first.returncode == 0, first.stderr[-2000:]
        before = _snapshot(out)
        readonly()
        again = userturn("run", *TINY, "--out", str(out), cwd=tmp_path)
        assert_one_line_error(again, "cannot write", str(out))
        assert _snapshot(out) == before
    finally:
        if os.geteuid() == 0:
            _umount(mount)
        else:
            mount.chmod(0o755)
