"""Real training on the embedded SmolLM2 on CPU, CI-sized: SFT with LoRA through the CLI (then the
before/after probe on one held-out item), and a few GRPO steps with the classifier as the reward."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CONVERSATIONS = [
    [("user", "My sourdough is flat. What am I doing wrong?"),
     ("assistant", "A flat loaf usually means a weak starter or over-proofing."),
     ("user", "How can I tell if my starter is strong enough?")],
    [("user", "Which planet is the largest?"),
     ("assistant", "Jupiter is the largest planet in the solar system."),
     ("user", "How much bigger than Earth is Jupiter?")],
    [("user", "What does HTTP stand for?"),
     ("assistant", "HTTP stands for HyperText Transfer Protocol."),
     ("user", "What is the difference between HTTP and HTTPS?")],
    [("user", "Give me a synonym for happy."),
     ("assistant", "Joyful is a synonym for happy."),
     ("user", "Can you use joyful in a sentence?")],
]


def _write(path: Path, conversations, source=None) -> Path:
    rows = [{"messages": [{"role": r, "content": c} for r, c in convo], **({"source": source} if source else {})}
            for convo in conversations]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory) -> Path:
    """`userturn train sft` on four short conversations, with a one-item before/after probe."""
    work = tmp_path_factory.mktemp("sft")
    from userturn.datasets import load_items

    first_demo = load_items("demo", limit=1)[0].id  # mark it as used: the probe must skip it
    data = _write(work / "data.jsonl", CONVERSATIONS, {"kind": "run", "dataset": "demo", "item_ids": [first_demo]})
    out = work / "model"
    import userturn

    # The subprocess runs in a temporary folder: point it at the package under test, not an installed one.
    src = str(Path(userturn.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run(
        [sys.executable, "-m", "userturn", "train", "sft", "--data", str(data), "--out", str(out),
         "--max-steps", "8", "--batch-size", "2", "--learning-rate", "2e-3", "--threads", "1",
         "--eval-limit", "1", "--eval-temperatures", "0", "--eval-assistant-max-new-tokens", "8",
         "--eval-user-max-new-tokens", "8"],
        cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (work / "stdout.txt").write_text(proc.stdout)
    return out


def test_sft_loss_falls_on_the_user_turns(sft_run):
    record = json.loads((sft_run / "training.json").read_text())
    losses = [e["loss"] for e in record["log_history"] if "loss" in e]
    assert len(losses) == 8
    assert sum(losses[-2:]) / 2 < 0.7 * sum(losses[:2]) / 2
    assert record["kind"] == "sft" and record["examples"] == 4
    assert (sft_run / "learning_curves.png").read_bytes()[:4] == b"\x89PNG"


def test_merged_model_loads_with_the_transformers_backend_and_generates(sft_run):
    from userturn.backends import load_backend
    from userturn.records import GenerationRequest, SamplingParams

    backend = load_backend("transformers", str(sft_run), threads=1)
    try:
        [completions] = backend.generate([GenerationRequest("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                                                            SamplingParams(max_tokens=6))])
        assert completions[0].token_ids
    finally:
        backend.close()


def test_adapter_applied_to_the_base_equals_the_merged_weights(sft_run):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from userturn.models import resolve_model

    base_source = resolve_model("embedded").source
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_source), str(sft_run / "adapter"))
    merged_here = adapted.merge_and_unload().state_dict()
    saved = AutoModelForCausalLM.from_pretrained(str(sft_run)).state_dict()
    base = AutoModelForCausalLM.from_pretrained(base_source).state_dict()
    name = "model.layers.0.self_attn.q_proj.weight"
    assert torch.allclose(merged_here[name], saved[name], atol=1e-6)
    assert not torch.allclose(base[name], saved[name])


def test_before_after_probe_runs_on_items_never_used_for_training(sft_run):
    summary = json.loads((sft_run / "eval" / "evaluation.json").read_text())
    record = json.loads((sft_run / "training.json").read_text())
    used = {i for d, i in record["used_items"] if d == "demo"}
    assert len(used) == 1 and not used & set(summary["items"]) and len(summary["items"]) == 1
    assert set(summary["pooled"]) == {"base", "trained"}
    for rows in summary["results"].values():
        assert rows[0]["n"] == 1 and rows[0]["accuracy_n"] == 1
    stdout = (sft_run.parent / "stdout.txt").read_text()
    assert "| base | all |" in stdout and "| trained | all |" in stdout


def test_grpo_steps_complete_and_log_rewards(tmp_path):
    from userturn.training.rl import RLOptions, train_rl

    prompts = _write(tmp_path / "prompts.jsonl", [c[:2] for c in CONVERSATIONS])
    record = train_rl(RLOptions(prompts=prompts, out=tmp_path / "rl", max_steps=2, batch_size=2, num_generations=2,
                                max_completion_length=8, beta=0.04, threads=1))
    steps = [e for e in record["log_history"] if "reward" in e]
    assert [e["step"] for e in steps] == [1, 2]
    assert all(-1.0 <= e["reward"] <= 1.0 and "kl" in e and "follow_up_rate" in e for e in steps)
    assert (tmp_path / "rl" / "adapter" / "adapter_config.json").is_file()
    assert (tmp_path / "rl" / "model.safetensors").is_file()


def test_grpo_rejects_a_batch_that_cannot_be_grouped(tmp_path):
    from userturn.errors import ConfigError
    from userturn.training.rl import RLOptions, train_rl

    with pytest.raises(ConfigError, match="multiple of --num-generations"):
        train_rl(RLOptions(prompts=tmp_path / "none.jsonl", batch_size=3, num_generations=2))


def test_train_help_lists_the_commands():
    proc = subprocess.run([sys.executable, "-m", "userturn", "train", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0
    for command in ("make-data", "sft", "rl", "evaluate"):
        assert command in proc.stdout
    sft_help = subprocess.run([sys.executable, "-m", "userturn", "train", "sft", "--help"], capture_output=True,
                              text=True, timeout=120).stdout
    assert "--loss-on" in sft_help and "--full" in sft_help


def test_evaluate_without_a_training_record_is_one_line_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "userturn", "train", "evaluate", "--trained", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {tmp_path}: no training.json: not the output folder of `userturn train sft|rl`"]
