"""Perturbations through the real pipeline on the embedded SmolLM2 (tiny runs: the CPU is shared)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SRC = Path(__file__).resolve().parents[1] / "src"
VERDICTS = {"as_expected", "opposite", "not_significant"}


def userturn(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-m", "userturn", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=1200)
    if proc.returncode != 0:
        raise AssertionError(f"userturn {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def test_run_with_perturbations_prints_and_writes_the_effects_table(tmp_path):
    out = tmp_path / "run"
    proc = userturn("run", "--perturb", "none,truncate,empty_response", "--limit", "2", "--temperatures", "0",
                    "--assistant-max-new-tokens", "24", "--user-max-new-tokens", "16", "--threads", "2",
                    "--quiet", "--out", str(out), cwd=tmp_path)
    assert "Perturbation effects" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    effects = {r["perturbation"]: r for r in summary["effects"]}
    assert set(effects) == {"truncate", "empty_response"}
    assert effects["truncate"]["expected"] == "up" and effects["empty_response"]["expected"] == "down"
    for row in effects.values():
        assert row["verdict"] in VERDICTS
        assert row["ci_low"] <= row["effect"] <= row["ci_high"]
        assert row["effect"] == pytest.approx(row["rate"] - row["control_rate"])
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert {s["perturbation"] for s in samples} == {"none", "truncate", "empty_response"}
    empty = [s for s in samples if s["perturbation"] == "empty_response"]
    assert all(s["context"][-1] == {"role": "assistant", "content": ""} for s in empty)
    truncated = [s for s in samples if s["perturbation"] == "truncate"]
    assert all(s["perturbation_options"] == {"fraction": 0.5} for s in truncated)
    # the perturbed context changes the prompt, hence the store key: 2 assistant + 3 × 2 user turns
    assert summary["generated"] == 2 + 6


def test_responses_file_replaces_the_assistant_and_wrong_answer_falsifies_it(tmp_path):
    responses = tmp_path / "samples_demo.jsonl"
    responses.write_text(json.dumps({"doc_id": "m01", "resps": [["Monday 24 × 3 = 72, Tuesday 48 × 3 = 144, "
                                                                 "so 72 + 144 = 216 dollars."]]}) + "\n")
    out = tmp_path / "run"
    proc = userturn("run", "--responses", str(responses), "--perturb", "none,wrong_answer", "--limit", "3",
                    "--temperatures", "0", "--user-max-new-tokens", "8", "--threads", "2", "--json",
                    "--out", str(out), cwd=tmp_path)
    summary = json.loads(proc.stdout)
    assert summary["generated"] == 2          # two user turns, no assistant turn
    samples = {s["perturbation"]: s for s in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    assert set(samples) == {"none", "wrong_answer"}   # only m01 of the first 3 items has a response
    assert samples["none"]["model"] == "file:samples_demo.jsonl" and samples["none"]["correct"] is True
    falsified = samples["wrong_answer"]["context"][-1]["content"]
    assert "216" not in falsified and "72 + 144 = " in falsified
    assert summary["effects"][0]["perturbation"] == "wrong_answer"
