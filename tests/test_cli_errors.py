"""Bad input gives one clear line on stderr and a non-zero exit, before any model loads."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def userturn(*args, cwd):
    return subprocess.run([sys.executable, "-m", "userturn", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--temperatures", "0,hot"], "--temperatures: 'hot' is not a number"),
        (["run", "--temperatures", "-1"], "--temperatures: -1 must be a finite number >= 0"),
        (["run", "--limit", "-2"], "field 'limit'"),
        (["run", "--samples", "0"], "field 'samples'"),
        (["run", "--dataset", "nosuch"], "unknown dataset 'nosuch'"),
        (["run", "--perturb", "nosuch"], "unknown perturbation 'nosuch'"),
        (["run", "--classifier", "nosuch"], "unknown classifier 'nosuch'"),
        (["run", "--config", "missing.toml"], "config file not found: missing.toml"),
        (["run", "--top-p", "0"], "field 'top_p'"),
        (["run", "--model", "no-such-model-name", "--limit", "1"], "unknown model 'no-such-model-name'"),
        (["render", "--messages", "nope.json"], "nope.json: file not found"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(tmp_path, args, message):
    proc = userturn(*args, cwd=tmp_path)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.strip().splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert message in errors[0]
    assert proc.stderr.strip().splitlines()[-1] == errors[0]
    assert "Traceback" not in proc.stderr


def test_malformed_messages_file_names_the_file(tmp_path):
    (tmp_path / "m.json").write_text('[{"role": "user", "content": "hi"},')
    proc = userturn("render", "--messages", "m.json", cwd=tmp_path)
    assert proc.returncode != 0 and "m.json" in proc.stderr and "not valid JSON" in proc.stderr


def test_debug_shows_the_traceback(tmp_path):
    proc = userturn("run", "--dataset", "nosuch", "--debug", cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" in proc.stderr


@pytest.mark.slow
def test_render_prints_the_user_opened_prompt_for_smollm2(tmp_path):
    (tmp_path / "m.json").write_text(json.dumps([{"role": "user", "content": "What is 2+3?"},
                                                 {"role": "assistant", "content": "5"}]))
    proc = userturn("render", "--messages", "m.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("<|im_start|>assistant\n5<|im_end|>\n<|im_start|>user\n")


def test_help_explains_every_command(tmp_path):
    for command in (["--help"], ["run", "--help"], ["render", "--help"], ["list", "--help"]):
        proc = userturn(*command, cwd=tmp_path)
        assert proc.returncode == 0 and "Usage" in proc.stdout
