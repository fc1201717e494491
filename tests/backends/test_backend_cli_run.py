"""``userturn run`` end to end on the openai backend (real llama.cpp server) and the llamacpp backend."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SRC = Path(__file__).resolve().parents[2] / "src"
SMALL = ["--limit", "2", "--temperatures", "0,1.0", "--samples", "2", "--assistant-max-new-tokens", "24",
         "--user-max-new-tokens", "16", "--threads", "1", "--quiet"]


def userturn(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", "userturn", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def samples(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(llama_server, tmp_path_factory) -> dict[str, list[dict]]:
    pytest.importorskip("userturn.pipeline")
    work = tmp_path_factory.mktemp("cli")
    found = {}
    for name, extra in (("openai", ["--backend", "openai", "--base-url", llama_server.base_url]),
                        ("llamacpp", ["--backend", "llamacpp"])):
        proc = userturn("run", *extra, *SMALL, "--out", str(work / name), cwd=work)
        assert proc.returncode == 0, proc.stderr[-3000:]
        found[name] = samples(work / name)
    return found


@pytest.mark.parametrize("backend", ["openai", "llamacpp"])
def test_run_writes_every_user_turn(runs, backend):
    rows = runs[backend]
    assert len(rows) == 2 * (1 + 2)
    assert all(r["user_turn_prompt"].endswith("<|im_start|>user\n") for r in rows)
    assert all("<|im_end|>" not in r["user_turn"] for r in rows)


def test_same_engine_behind_http_or_in_process_gives_the_same_greedy_run(runs):
    def greedy(rows):
        return sorted((r["item_id"], r["assistant_prompt"], r["assistant_response"], r["user_turn_prompt"],
                       r["user_turn"]) for r in rows if r["temperature"] == 0)

    assert greedy(runs["openai"]) == greedy(runs["llamacpp"])


def test_run_against_a_dead_url_is_one_line(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = userturn("run", "--backend", "openai", "--base-url", f"http://127.0.0.1:{port}/v1", "--limit", "1",
                    "--out", str(tmp_path / "x"), cwd=tmp_path)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot reach" in errors[0] and "Traceback" not in proc.stderr, proc.stderr
