"""Crash safety with real processes: SIGKILL at seeded points in every stage, Ctrl-C, SIGTERM, restart.

One run directory is killed again and again, each time at the next point of a seeded schedule, and
restarted with the same command; the last restart must end with exactly the samples of an
uninterrupted run. ``USERTURN_TEST_TRACE`` (see ``userturn/crashpoints.py``) lets the test count every
completion that any of the processes committed: each of the 12 must have been committed exactly once,
so nothing already stored was ever generated again.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import (
    SAMPLE_KEY,
    SMALL,
    SMALL_ASSISTANT,
    SMALL_USER,
    child_env,
    command,
    comparable,
    default_signals,
    integrity,
    read_samples,
    store_rows,
    stored,
    userturn,
)

pytestmark = pytest.mark.slow

SEED = 20240611
ARGS = ["run", *SMALL, "--batch-size", "1"]


def crash_schedule(seed: int) -> list[tuple[str, str]]:
    """``(how, where)`` steps: ``hook`` kills at a crash point, ``SIGINT``/``SIGTERM`` are sent from outside.

    Every stage is hit: the assistant stage (after a commit, and between generating and committing), the
    user-turn stage (the same two places, plus a Ctrl-C and a SIGTERM at a random moment), after
    classification and between the output files. The numbers are drawn so that each point is reached.
    """
    rng = random.Random(seed)
    return [
        ("hook", f"assistant:{rng.randint(1, 2)}"),
        ("hook", "assistant.uncommitted:1"),
        ("hook", f"user_turn:{rng.randint(1, 3)}"),
        ("SIGINT", "user_turn+1"),
        ("hook", f"user_turn.uncommitted:{rng.randint(1, 2)}"),
        ("SIGTERM", f"{rng.uniform(1.0, 12.0):.2f}s"),
        ("hook", "classify:1"),
        ("hook", "samples.jsonl:1"),
    ]


def _signal_when(proc: subprocess.Popen, db: Path, how: str, where: str) -> None:
    """Send ``how`` once the store holds one more user turn (``user_turn+1``) or after a delay (``N.s``)."""
    if where.endswith("s"):
        deadline = time.time() + float(where[:-1])
        while time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
    else:
        target = stored(db, "user_turn") + 1
        deadline = time.time() + 600
        while time.time() < deadline and proc.poll() is None and stored(db, "user_turn") < target:
            time.sleep(0.1)
    if proc.poll() is None:
        proc.send_signal(getattr(signal, how))


def test_seeded_kills_in_every_stage_lose_nothing_and_regenerate_nothing(reference_run, tmp_path):
    out = tmp_path / "run"
    db = out / "store.sqlite"
    trace = tmp_path / "trace.txt"
    args = [*ARGS, "--out", str(out), "--quiet"]
    survived = []
    for how, where in crash_schedule(SEED):
        env = child_env(USERTURN_TEST_TRACE=str(trace))
        if how == "hook":
            env["USERTURN_TEST_CRASH_AT"] = where
        proc = subprocess.Popen(command(*args), cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
        if how != "hook":
            _signal_when(proc, db, how, where)
        _, stderr = proc.communicate(timeout=900)
        if how == "hook":
            assert proc.returncode == -signal.SIGKILL, f"{where} was not reached:\n{stderr[-2000:]}"
        elif how == "SIGINT":
            assert proc.returncode == 130, stderr[-2000:]
            assert "run the same command again to resume" in stderr.strip().splitlines()[-1]
            assert str(out) in stderr and "Traceback" not in stderr
            assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
        else:  # SIGTERM lands anywhere, even before the handler is installed
            assert proc.returncode in (143, -signal.SIGTERM), stderr[-2000:]
            if proc.returncode == 143:
                assert "run the same command again to resume" in stderr
        survived.append(f"{how}@{where}")
        if db.exists():
            assert integrity(db) == "ok"
        for name in ("run.json", "summary.json"):
            if (out / name).exists():
                json.loads((out / name).read_text())  # an output file is whole or absent, never half-written
        if where.startswith("samples.jsonl"):
            # Killed right after samples.jsonl was written: it is complete, the summary is not there yet.
            assert comparable(read_samples(out)) == comparable(read_samples(reference_run))
            assert not (out / "summary.json").exists()

    final = userturn(*args, "--json", cwd=tmp_path, env=child_env(USERTURN_TEST_TRACE=str(trace)))
    assert final.returncode == 0, final.stderr[-3000:]
    summary = json.loads(final.stdout)
    assert summary["generated"] == 0  # the schedule ends after every generation was committed

    rows = read_samples(out)
    assert comparable(rows) == comparable(read_samples(reference_run))
    assert len({tuple(r[k] for k in SAMPLE_KEY) for r in rows}) == len(rows) == SMALL_USER
    keys = store_rows(db)
    assert len(keys) == len({k for k, _ in keys}) == SMALL_ASSISTANT + SMALL_USER
    assert integrity(db) == "ok"

    committed: Counter[str] = Counter()
    processes = set()
    for line in trace.read_text().splitlines():
        point, count, pid = line.split()
        processes.add(pid)
        if point in ("assistant", "user_turn"):
            committed[point] += int(count)
    # Every generation was committed by exactly one process: nothing stored was generated twice.
    assert committed == {"assistant": SMALL_ASSISTANT, "user_turn": SMALL_USER}
    assert len(survived) >= 5 and len(processes) >= 6
    print(f"crash points survived: {len(survived)}: {', '.join(survived)}")


def test_two_processes_on_one_store_both_finish_without_duplicates(reference_run, tmp_path):
    out = tmp_path / "shared"
    args = command(*ARGS, "--out", str(out), "--quiet")
    procs = [subprocess.Popen(args, cwd=tmp_path, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    results = [p.communicate(timeout=900) for p in procs]
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err[-3000:]
    db = out / "store.sqlite"
    assert integrity(db) == "ok"
    keys = store_rows(db)
    assert len(keys) == len({k for k, _ in keys}) == SMALL_ASSISTANT + SMALL_USER
    assert comparable(read_samples(out)) == comparable(read_samples(reference_run))


def test_store_level_concurrent_writers_keep_every_row_once(tmp_path):
    """Four processes write overlapping rows in many small transactions into one new store."""
    script = (
        "import sys\n"
        "from userturn.records import Completion\n"
        "from userturn.store import Store\n"
        "s = Store(sys.argv[1]); w = int(sys.argv[2])\n"
        "for i in range(0, 400, 4):\n"
        "    s.put_many([(f'k{j}', 'user_turn', {'j': j}, Completion(f't{j}', (j,), 'stop'))\n"
        "                for j in range(i + w, i + w + 8)])\n"
        "s.close()\n"
    )
    db = tmp_path / "store.sqlite"
    procs = [subprocess.Popen(command()[:1] + ["-c", script, str(db), str(w)], env=child_env(),
                              stderr=subprocess.PIPE, text=True) for w in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    keys = store_rows(db)
    assert len(keys) == len({k for k, _ in keys}) == 407  # k0 … k406, each written by up to four processes
    assert integrity(db) == "ok"


def test_ctrl_c_commits_the_finished_chunk_says_how_to_resume_and_exits_130(tmp_path):
    """A Ctrl-C from a crash point in the assistant stage: exit 130, one line saying how to resume."""
    out = tmp_path / "run"
    proc = userturn(*ARGS, "--out", str(out), "--quiet", cwd=tmp_path,
                    env=child_env(USERTURN_TEST_CRASH_AT="assistant:1:INT"))
    assert proc.returncode == 130
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("interrupted:") and "run the same command again to resume" in last
    assert "Traceback" not in proc.stderr
    assert stored(out / "store.sqlite", "assistant") == 1  # the chunk finished before Ctrl-C was committed
    assert not (out / "samples.jsonl").exists()
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
