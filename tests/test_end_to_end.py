"""The real probe on the embedded SmolLM2: outputs, determinism, and resume after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TEXT_FIELDS = ("item_id", "temperature", "sample_index", "seed", "assistant_prompt", "assistant_response",
               "user_turn_prompt", "user_turn", "finish_reason", "label")
SAMPLE_FIELDS = {"item_id", "dataset", "model", "temperature", "sample_index", "seed", "assistant_prompt",
                 "user_turn_prompt", "assistant_response", "correct", "user_turn", "finish_reason", "label"}
SUMMARY_FIELDS = {"n", "follow_up_rate", "ci_low", "ci_high", "accuracy", "labels"}
SMALL = ["--limit", "3", "--temperatures", "0,1.0", "--samples", "2", "--assistant-max-new-tokens", "40",
         "--user-max-new-tokens", "20", "--threads", "1"]


def userturn(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-m", "userturn", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"userturn {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def read_samples(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


def text_fields(rows: list[dict]) -> list[tuple]:
    return [tuple(r[f] for f in TEXT_FIELDS) for r in rows]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("ref")
    proc = userturn("run", *SMALL, "--out", str(work / "a"), cwd=work)
    assert "follow-up rate" in proc.stdout
    return work / "a"


def test_run_writes_samples_and_summary_with_the_documented_fields(reference_run):
    rows = read_samples(reference_run)
    assert len(rows) == 3 * (1 + 2)
    assert all(SAMPLE_FIELDS <= set(r) for r in rows)
    assert all(r["user_turn_prompt"].endswith("<|im_start|>user\n") for r in rows)
    assert all(r["user_turn_prompt"].startswith(r["assistant_prompt"]) for r in rows)
    summary = json.loads((reference_run / "summary.json").read_text())
    assert {r["temperature"] for r in summary["rows"]} == {0.0, 1.0}
    for row in summary["rows"]:
        assert SUMMARY_FIELDS <= set(row)
        assert row["ci_low"] <= row["follow_up_rate"] <= row["ci_high"]
        assert sum(row["labels"].values()) == row["n"] + row["unlabeled"]
    greedy = [r for r in summary["rows"] if r["temperature"] == 0.0][0]
    assert greedy["n"] == 3


def test_same_command_twice_gives_identical_text_even_with_another_batch_size(reference_run, tmp_path):
    userturn("run", *SMALL, "--batch-size", "1", "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert text_fields(read_samples(tmp_path / "b")) == text_fields(read_samples(reference_run))


def _stored(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("SELECT COUNT(*) FROM generations WHERE stage='user_turn'").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_killed_run_resumes_without_regenerating_and_matches_an_uninterrupted_run(reference_run, tmp_path):
    out = tmp_path / "killed"
    args = [sys.executable, "-m", "userturn", "run", *SMALL, "--batch-size", "1", "--out", str(out),
            "--quiet"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and _stored(out / "store.sqlite") < 3:
        time.sleep(0.2)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _stored(out / "store.sqlite")
    assert 3 <= before < 9
    rerun = userturn("run", *SMALL, "--batch-size", "1", "--out", str(out), "--json", cwd=tmp_path)
    summary = json.loads(rerun.stdout)
    assert summary["generated"] == 9 - before  # only the missing user turns; the 3 assistant turns were stored
    assert _stored(out / "store.sqlite") == 9
    assert text_fields(read_samples(out)) == text_fields(read_samples(reference_run))
    again = json.loads(userturn("run", *SMALL, "--out", str(out), "--json", cwd=tmp_path).stdout)
    assert again["generated"] == 0


def test_default_out_resumes_the_earlier_run_of_the_same_configuration(tmp_path):
    first = json.loads(userturn("run", "--limit", "1", "--temperatures", "0", "--assistant-max-new-tokens", "8",
                                "--user-max-new-tokens", "8", "--threads", "1", "--json", cwd=tmp_path).stdout)
    second = json.loads(userturn("run", "--limit", "1", "--temperatures", "0", "--assistant-max-new-tokens", "8",
                                 "--user-max-new-tokens", "8", "--threads", "1", "--json", cwd=tmp_path).stdout)
    assert first["generated"] == 2 and second["generated"] == 0
    assert len(list((tmp_path / "runs").iterdir())) == 1
