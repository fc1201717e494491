"""Shared pieces of the reliability tests: the real CLI in a subprocess, a reference run, tiny models."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# The smallest run that still crosses every stage: 3 items, greedy + 2 samples at T=1 → 3 assistant turns and
# 9 user turns, 12 generations; batch size 1 commits each generation on its own, so crash points are fine-grained.
SMALL = ["--limit", "3", "--temperatures", "0,1", "--samples", "2", "--assistant-max-new-tokens", "16",
         "--user-max-new-tokens", "12", "--threads", "1"]
SMALL_ASSISTANT, SMALL_USER = 3, 9
SAMPLE_KEY = ("dataset", "item_id", "perturbation", "temperature", "sample_index")


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("USERTURN_TEST_")}
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def default_signals() -> None:
    """Child setup: Ctrl-C behaves as in a terminal even when the test runner runs in the background.

    A shell starts background jobs with SIGINT ignored, and Python then never raises KeyboardInterrupt.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "userturn", *args]


def userturn(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 900,
             **popen: object) -> subprocess.CompletedProcess:
    """Run the real CLI to completion (no check on the exit code)."""
    popen.setdefault("preexec_fn", default_signals)
    return subprocess.run(command(*args), cwd=cwd, env=env or child_env(), capture_output=True, text=True,
                          timeout=timeout, **popen)


class Result:
    def __init__(self, code: int, stderr: str) -> None:
        self.returncode, self.stderr = code, stderr


def run_cli(capsys, *args: str) -> Result:
    """The real CLI entry point in this process; returns the exit code and stderr."""
    from userturn.cli.app import main

    previous = signal.getsignal(signal.SIGTERM)
    code: int = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    return Result(code, capsys.readouterr().err)


def read_samples(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text(encoding="utf-8").splitlines()]


def comparable(rows: list[dict]) -> list[dict]:
    """Samples without fields that may legitimately differ between two runs (none today; kept explicit)."""
    return sorted(rows, key=lambda r: tuple(str(r.get(k)) for k in SAMPLE_KEY))


def store_rows(db: Path) -> list[tuple[str, str]]:
    """``(key, stage)`` of every stored generation, read without writing."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return con.execute("SELECT key, stage FROM generations").fetchall()
    finally:
        con.close()


def stored(db: Path, stage: str | None = None) -> int:
    """How many generations the store holds (0 while it does not exist yet or is locked)."""
    try:
        rows = store_rows(db)
    except sqlite3.Error:
        return 0
    return sum(1 for _, s in rows if stage is None or s == stage)


def integrity(db: Path) -> str:
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def assert_one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    """Exit code ≠ 0, the last stderr line is ``error: ...`` holding every fragment, and no traceback."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode not in (0, None), proc.stderr[-2000:]
    assert lines, "no error message"
    last = lines[-1]
    assert last.startswith("error: "), proc.stderr[-2000:]
    for fragment in fragments:
        assert fragment in last, f"{fragment!r} not in {last!r}"
    assert "Traceback" not in proc.stderr
    return last


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory) -> Path:
    """An uninterrupted run of SMALL with automatic batching: the ground truth the crash tests must reproduce."""
    work = tmp_path_factory.mktemp("reference")
    proc = userturn("run", *SMALL, "--out", str(work / "run"), "--quiet", cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return work / "run"


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory) -> Path:
    """A few-MB random-weight Llama with SmolLM2's tokenizer and template (see tiny_models.py)."""
    from tiny_models import build_base

    return build_base(tmp_path_factory.mktemp("tiny") / "base")
