"""Bad input: each case ends in one clear ``error: ...`` line, an exit code ≠ 0, and no traceback.

The cases run the real command line in-process (``userturn.cli.app.main``), which is what the
``userturn`` script calls; a few run as real subprocesses to check the entry point and ``--debug``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli, userturn
from tiny_models import variant

from userturn.datasets import dataset_names

JSONL = "jsonl" in dataset_names()
needs_jsonl = pytest.mark.skipif(not JSONL, reason="the jsonl dataset (branch datasets) is not merged yet")

RAISING_TEMPLATE = (
    "{% for m in messages %}{% if loop.index0 > 1 and m.role == 'user' %}"
    "{{ raise_exception('this template allows one exchange only') }}{% endif %}"
    "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CONTENT_ONLY_TEMPLATE = "{% for m in messages %}{{ m.content }}{% endfor %}"


def jsonl(*rows: object) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


GOOD = {"id": "a", "query": "What is 2+2?", "answer": "4"}

# (case id, files to create: name -> text or bytes, arguments, fragments the error line must contain)
CASES: list[tuple[str, dict[str, str | bytes], list[str], list[str]]] = [
    # dataset files (--dataset jsonl --dataset-path)
    ("jsonl-malformed-line", {"d.jsonl": jsonl(GOOD, '{"id": "b", "query": "x"')},
     ["--dataset", "jsonl", "--dataset-path", "d.jsonl"], ["d.jsonl:2", "not valid JSON"]),
    ("jsonl-missing-field", {"d.jsonl": jsonl(GOOD, {"id": "b", "answer": "3"})},
     ["--dataset", "jsonl", "--dataset-path", "d.jsonl"], ["d.jsonl:2", "'query'", "missing"]),
    ("jsonl-wrong-type", {"d.jsonl": jsonl({"id": "a", "query": 42})},
     ["--dataset", "jsonl", "--dataset-path", "d.jsonl"], ["d.jsonl:1", "'query'", "expected str"]),
    ("jsonl-empty-query", {"d.jsonl": jsonl({"id": "a", "query": "   "})},
     ["--dataset", "jsonl", "--dataset-path", "d.jsonl"], ["d.jsonl:1", "'query'", "empty"]),
    ("jsonl-empty-file", {"d.jsonl": ""},
     ["--dataset", "jsonl", "--dataset-path", "d.jsonl"], ["no items"]),
    ("jsonl-not-utf8", {"d.jsonl": jsonl(GOOD).encode() + b'{"id": "b", "query": "caf\xe9"}\n'},
     ["--dataset", "jsonl", "--dataset-path", "d.jsonl"], ["d.jsonl:2", "UTF-8"]),
    ("jsonl-10mb-malformed-line", {"d.jsonl": '{"id": "a", "query": "' + "x" * 10_000_000 + "\n"},
     ["--dataset", "jsonl", "--dataset-path", "d.jsonl"], ["d.jsonl:1", "not valid JSON"]),
    ("jsonl-duplicate-ids", {"d.jsonl": jsonl(GOOD, {**GOOD, "query": "What is 3+3?"})},
     ["--dataset", "jsonl", "--dataset-path", "d.jsonl"], ["duplicate item id 'a'"]),
    ("jsonl-array-not-object", {"d.jsonl": jsonl(GOOD, [1, 2])},
     ["--dataset", "jsonl", "--dataset-path", "d.jsonl"], ["d.jsonl:2", "JSON object"]),
    ("jsonl-unknown-role", {"d.jsonl": jsonl({"id": "a", "messages": [{"role": "wizard", "content": "hi"}]})},
     ["--dataset", "jsonl", "--dataset-path", "d.jsonl"], ["d.jsonl:1", "unknown role"]),
    ("jsonl-missing-file", {}, ["--dataset", "jsonl", "--dataset-path", "nope.jsonl"], ["nope.jsonl", "not found"]),
    ("jsonl-path-is-a-folder", {"folder.jsonl/x": "x"}, ["--dataset", "jsonl", "--dataset-path", "folder.jsonl"],
     ["folder.jsonl", "not found"]),
    # config files
    ("config-unknown-key", {"c.toml": "temperatur = [0.5]\n"}, ["--config", "c.toml"],
     ["c.toml", "'temperatur'", "unknown key"]),
    ("config-wrong-type", {"c.toml": 'samples = "many"\n'}, ["--config", "c.toml"], ["c.toml", "'samples'"]),
    ("config-negative-temperature", {"c.toml": "temperatures = [0, -0.5]\n"}, ["--config", "c.toml"],
     ["c.toml", "'temperatures'", ">= 0"]),
    ("config-nan-temperature", {"c.toml": "temperatures = [nan]\n"}, ["--config", "c.toml"],
     ["c.toml", "'temperatures'", "finite"]),
    ("config-k-zero", {"c.yaml": "samples: 0\n"}, ["--config", "c.yaml"], ["c.yaml", "'samples'", ">= 1"]),
    ("config-top-p-above-one", {"c.yaml": "top_p: 1.5\n"}, ["--config", "c.yaml"], ["c.yaml", "'top_p'"]),
    ("config-max-tokens-zero", {"c.toml": "user-max-new-tokens = 0\n"}, ["--config", "c.toml"],
     ["c.toml", "'user_max_new_tokens'", ">= 1"]),
    ("config-toml-syntax", {"c.toml": "temperatures = [0, 1\n"}, ["--config", "c.toml"], ["c.toml", "cannot parse"]),
    ("config-yaml-top-level-list", {"c.yaml": "- 1\n- 2\n"}, ["--config", "c.yaml"], ["c.yaml", "top level"]),
    ("config-wrong-extension", {"c.json": "{}"}, ["--config", "c.json"], ["c.json", ".toml"]),
    ("config-not-utf8", {"c.toml": b"model = \"caf\xe9\"\n"}, ["--config", "c.toml"], ["c.toml", "UTF-8"]),
    # flags
    ("flag-top-p-above-one", {}, ["--top-p", "1.5"], ["'top_p'"]),
    ("flag-max-tokens-zero", {}, ["--user-max-new-tokens", "0"], ["'user_max_new_tokens'"]),
    ("flag-assistant-max-tokens-negative", {}, ["--assistant-max-new-tokens", "-3"], ["'assistant_max_new_tokens'"]),
    ("flag-nan-temperature", {}, ["--temperatures", "0,nan"], ["--temperatures", "finite"]),
    ("flag-empty-temperature", {}, ["--temperatures", "0,,1"], ["--temperatures", "empty entry"]),
    ("flag-infinite-assistant-temperature", {}, ["--assistant-temperature", "inf"], ["'assistant_temperature'"]),
    ("flag-k-not-a-number", {}, ["--samples", "many"], ["--samples"]),
    ("flag-negative-batch-size", {}, ["--batch-size", "-1"], ["'batch_size'"]),
    ("flag-bad-cut", {}, ["--cut", "sideways"], ["'cut'"]),
    ("flag-bad-thinking", {}, ["--thinking", "maybe"], ["'thinking'"]),
    ("flag-engine-arg-without-equals", {}, ["--engine-arg", "threads"], ["--engine-arg", "key=value"]),
    ("flag-unknown-engine-arg", {}, ["--engine-arg", "warp=9", "--limit", "1"], ["does not take", "warp"]),
    ("flag-unknown-backend", {}, ["--backend", "abacus"], ["unknown backend 'abacus'"]),
    ("flag-unknown-dtype", {}, ["--dtype", "float7", "--limit", "1"], ["unknown dtype 'float7'"]),
    ("flag-limit-zero", {}, ["--limit", "0"], ["no items"]),
    ("flag-unknown-option", {}, ["--frobnicate"], ["No such option", "--frobnicate"]),
    ("flag-unknown-perturbation-in-list", {}, ["--perturb", "none,shuffle_everything"],
     ["unknown perturbation 'shuffle_everything'"]),
    ("flag-unknown-classifier", {}, ["--classifier", "oracle"], ["unknown classifier 'oracle'"]),
    ("flags-dataset-path-with-two-datasets", {"d.jsonl": jsonl(GOOD)},
     ["--dataset", "demo,jsonl", "--dataset-path", "d.jsonl"], ["--dataset-path needs exactly one --dataset"]),
    # models
    ("model-unknown-name", {}, ["--model", "definitely-not-a-model", "--limit", "1"], ["unknown model"]),
    ("model-missing-path", {}, ["--model", "./models/none-here", "--limit", "1"], ["unknown model"]),
    ("model-folder-without-config", {"empty-model/readme.txt": "x"}, ["--model", "empty-model", "--limit", "1"],
     ["no config.json"]),
    ("model-garbage-gguf", {"m.gguf": b"GGUF" + b"\x00" * 64}, ["--model", "m.gguf", "--limit", "1"],
     ["cannot load", "m.gguf"]),
]
GOLD = {"query": "What is 2+2?", "response": "4.", "user_turn": "Why 4?", "label": "follow_up", "split": "dev"}
# (case id, files, arguments after the command, fragments) for `userturn validate-classifier`/`classify`
GOLD_CASES: list[tuple[str, dict[str, str | bytes], list[str], list[str]]] = [
    ("gold-unknown-label", {"g.jsonl": jsonl(GOLD, {**GOLD, "label": "sarcasm"})},
     ["validate-classifier", "--gold", "g.jsonl"], ["g.jsonl:2", "sarcasm"]),
    ("gold-missing-label", {"g.jsonl": jsonl({k: v for k, v in GOLD.items() if k != "label"})},
     ["validate-classifier", "--gold", "g.jsonl"], ["g.jsonl:1", "label"]),
    ("gold-unknown-split", {"g.jsonl": jsonl({**GOLD, "split": "train"})},
     ["validate-classifier", "--gold", "g.jsonl"], ["g.jsonl:1", "train"]),
    ("gold-malformed-line", {"g.jsonl": jsonl(GOLD) + "{not json\n"},
     ["validate-classifier", "--gold", "g.jsonl"], ["g.jsonl:2", "not valid JSON"]),
    ("gold-not-utf8", {"g.jsonl": b'{"query": "caf\xe9"}\n'},
     ["validate-classifier", "--gold", "g.jsonl"], ["g.jsonl:1", "UTF-8"]),
    ("gold-missing-file", {}, ["validate-classifier", "--gold", "none.jsonl"], ["none.jsonl", "not found"]),
    ("classify-input-wrong-type", {"i.jsonl": jsonl({"query": "q", "response": "r", "user_turn": 5})},
     ["classify", "--input", "i.jsonl", "--out", "o.jsonl"], ["i.jsonl:1", "user_turn"]),
]
MODEL_CASES: list[tuple[str, dict, list[str]]] = [
    ("model-without-chat-template", {"template": None}, ["no chat template"]),
    ("model-template-cannot-open-user-turn", {"template": RAISING_TEMPLATE},
     ["cannot open a user turn", "one exchange only"]),
    ("model-tokenizer-without-eos", {"template": CONTENT_ONLY_TEMPLATE, "eos": False}, ["no EOS"]),
]


def _write(folder: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


@pytest.mark.parametrize(("files", "args", "fragments"), [
    pytest.param(files, args, fragments, id=case,
                 marks=[needs_jsonl] if "jsonl" in args else [])
    for case, files, args, fragments in CASES
])
def test_bad_input_stops_with_one_clear_line(capsys, tmp_path, monkeypatch, files, args, fragments):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, files)
    result = run_cli(capsys, "run", *args, "--quiet")
    assert_one_line_error(result, *fragments)
    assert not list(tmp_path.rglob("store.sqlite"))  # stopped before anything was generated


@pytest.mark.parametrize(("files", "args", "fragments"), [pytest.param(f, a, x, id=c) for c, f, a, x in GOLD_CASES])
def test_bad_gold_or_classify_file_stops_with_one_clear_line(capsys, tmp_path, monkeypatch, files, args, fragments):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, files)
    assert_one_line_error(run_cli(capsys, *args), *fragments)
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("change", "fragments"), [pytest.param(c, f, id=i) for i, c, f in MODEL_CASES])
def test_unusable_model_stops_before_any_generation(capsys, tmp_path, monkeypatch, tiny_base, change, fragments):
    monkeypatch.chdir(tmp_path)
    model = variant(tiny_base, tmp_path / "model", **change)
    result = run_cli(capsys, "run", "--model", str(model), "--limit", "1", "--temperatures", "0", "--out", "out")
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "out" / "store.sqlite").exists()  # refused before the first generation


def test_render_with_a_bad_role_and_a_bad_stage(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.json").write_text(json.dumps([{"role": "narrator", "content": "hi"}]))
    assert_one_line_error(run_cli(capsys, "render", "--messages", "m.json"), "m.json", "message 0")
    (tmp_path / "m.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    assert_one_line_error(run_cli(capsys, "render", "--messages", "m.json", "--stage", "narrator"), "--stage")


def test_unknown_command_is_one_line(capsys):
    assert_one_line_error(run_cli(capsys, "frobnicate"), "No such command")


def test_the_real_entry_point_prints_one_line_and_debug_shows_the_traceback(tmp_path):
    (tmp_path / "c.toml").write_text("samples = 0\n")
    plain = userturn("run", "--config", "c.toml", cwd=tmp_path)
    assert_one_line_error(plain, "c.toml", "'samples'")
    debug = userturn("run", "--config", "c.toml", "--debug", cwd=tmp_path)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "ConfigError" in debug.stderr


def count_cases() -> int:
    """How many bad inputs this file tries (reported in the issue's closing note)."""
    return len(CASES) + len(GOLD_CASES) + len(MODEL_CASES) + 3 + 2
