"""``userturn train make-data | sft | rl | evaluate``: collaboration-oriented post-training, measured by the probe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from userturn.cli.app import app
from userturn.cli.run_command import parse_floats, parse_key_values, parse_list
from userturn.errors import ConfigError

train_app = typer.Typer(
    help="Post-train a model to write better next user turns (SFT and GRPO with TRL + PEFT), then measure "
    "the follow-up rate before and after on held-out items. Multi-GPU: `accelerate launch -m userturn train ...` "
    "(see docs/training.md).",
    no_args_is_help=True,
)
app.add_typer(train_app, name="train")

_EVAL_HELP = "After training, run the probe on held-out items for the base and the trained model."


def _lora(full: bool, r: int, alpha: int, dropout: float) -> Any:
    from userturn.training.checkpoint import LoraOptions

    if full and (r, alpha) != (16, 32):
        raise ConfigError("--lora-r/--lora-alpha have no effect with --full")
    return LoraOptions(r=r, alpha=alpha, dropout=dropout)


def _finish(record: dict[str, Any], out: Path, base_model: str, evaluate: bool, eval_options: dict[str, Any],
            title: str) -> None:
    """Plot the learning curves and, if asked, run the before/after probe; print where everything is."""
    from userturn.progress import Reporter
    from userturn.training.evaluate import EvalOptions, plot_learning_curves
    from userturn.training.evaluate import evaluate as run_evaluation

    if not record:  # not the main process under accelerate launch
        return
    curves = plot_learning_curves(record["log_history"], out / "learning_curves.png", title)
    history = record["log_history"]
    steps = max((e.get("step", 0) for e in history), default=0)
    line = f"{record['kind']}: {steps} steps ({record['examples']} records in the data)"
    for key, name in (("loss", "loss"), ("reward", "mean reward")):
        values = [e[key] for e in history if key in e]
        if values:
            line += f"; {name} {values[0]:.3f} → {values[-1]:.3f}"
    typer.echo(line)
    typer.echo(f"model: {out}/ (merged; `userturn run --model {out}`), adapter: {out}/adapter/"
               + (f", curves: {curves}" if curves else ""))
    if not evaluate:
        return
    exclude = {(d, i) for d, i in record["used_items"]}
    options = EvalOptions(base_model=base_model, trained_model=str(out), out=out / "eval", exclude=exclude,
                          **eval_options)
    summary = run_evaluation(options, Reporter(quiet=False))
    typer.echo(f"\nfollow-up rate before/after on {len(summary['items'])} held-out {options.dataset} items:\n")
    typer.echo(summary["table"])


def _eval_options(dataset: str, limit: int, temperatures: str, samples: int, assistant_tokens: int,
                  user_tokens: int, data_dir: Path | None, config: Path | None, threads: int) -> dict[str, Any]:
    return {"dataset": dataset, "limit": limit if limit > 0 else None,
            "temperatures": parse_floats(temperatures, "--eval-temperatures"), "samples": samples,
            "assistant_max_new_tokens": assistant_tokens, "user_max_new_tokens": user_tokens,
            "data_dir": data_dir, "config": config, "threads": threads}


# Shared option declarations: the same flags on sft, rl and evaluate.
EVAL_DATASET = typer.Option("demo", "--eval-dataset", help="Dataset of the before/after probe; items used for "
                            "training are excluded.")
EVAL_LIMIT = typer.Option(18, "--eval-limit", help="Held-out items to probe (the first N not used for training; "
                          "0 = all).")
EVAL_TEMPS = typer.Option("0,1.0", "--eval-temperatures", help="User-turn temperature grid of the probe.")
EVAL_SAMPLES = typer.Option(4, "--eval-samples", help="Samples per non-zero temperature.")
EVAL_ATOK = typer.Option(192, "--eval-assistant-max-new-tokens", help="Token budget of the assistant turn.")
EVAL_UTOK = typer.Option(48, "--eval-user-max-new-tokens", help="Token budget of each user turn.")
EVAL_DATA_DIR = typer.Option(None, "--data-dir", help="Folder with local dataset copies (also $USERTURN_DATA_DIR).")
EVAL_CONFIG = typer.Option(None, "--eval-config", help="A run config file (TOML/YAML, as for `userturn run "
                           "--config`) for every other probe setting.")


@train_app.command("make-data")
def make_data_command(
    out: Path = typer.Option(..., "--out", "-o", help="JSONL file to write."),
    data_format: str = typer.Option("sft", "--format", help="sft: conversations ending with a user turn that "
                                    "follows an assistant turn (for `train sft`); prompts: conversations ending "
                                    "with an assistant turn (for `train rl`)."),
    conversations: list[Path] = typer.Option(None, "--conversations", help="JSONL of real multi-turn "
                                             "conversations with `messages` (e.g. oasst1_en/conversations.jsonl). "
                                             "Repeatable."),
    mt_bench: list[Path] = typer.Option(None, "--mt-bench", help="MT-Bench question.jsonl: [turn 1, reference "
                                        "answer, turn 2] for the questions with a reference. Repeatable."),
    run: list[Path] = typer.Option(None, "--run", help="A probe run directory (its samples.jsonl): sft keeps "
                                   "user turns labelled --keep-labels (rejection sampling) and real reference "
                                   "turns; prompts keeps every context. Repeatable."),
    keep_labels: str = typer.Option("follow_up", "--keep-labels", help="Labels of generated turns kept from runs."),
    reference_turns: bool = typer.Option(True, "--reference-turns/--no-reference-turns", help="Also keep a run "
                                         "item's human-written next user turn where the dataset has one."),
    holdout: float = typer.Option(50.0, "--holdout", help="Percent of items (stable hash of dataset and id) left "
                                  "out of the data so the before/after probe has unseen items; 0 keeps all."),
    holdout_only: str = typer.Option(None, "--holdout-only", help="Apply --holdout only to these datasets "
                                     "(comma-separated, e.g. demo,gsm8k); default: all."),
    max_examples: int = typer.Option(None, "--max-examples", help="Keep at most this many records (seeded "
                                     "shuffle)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the shuffle."),
) -> None:
    """Build a training JSONL of `messages` from conversation corpora, MT-Bench and probe runs."""
    from userturn.training.data import make_data

    stats = make_data(out, data_format=data_format, conversations=conversations or [], mt_bench=mt_bench or [],
                      runs=run or [], labels=parse_list(keep_labels, "--keep-labels") or [],
                      reference_turns=reference_turns, holdout_percent=holdout,
                      holdout_datasets=parse_list(holdout_only, "--holdout-only"), max_examples=max_examples,
                      seed=seed)
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(stats["by_kind"].items()))
    typer.echo(f"wrote {stats['records']} {data_format} records to {out} ({kinds}); "
               f"{stats['held_out']} held out")


@train_app.command("sft")
def sft_command(
    model: str = typer.Option("embedded", "--model", "-m", help="Model to fine-tune: 'embedded', a local folder "
                              "or a hub id."),
    data: Path = typer.Option(..., "--data", help="JSONL of {\"messages\": [...]} (see `train make-data`)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder: merged model, adapter/, training.json, "
                             "learning_curves.png, eval/."),
    loss_on: str = typer.Option("user", "--loss-on", help="Which turns carry the loss: user (user turns that "
                                "follow an assistant turn, default), assistant, or all (every token)."),
    full: bool = typer.Option(False, "--full", help="Full fine-tuning instead of LoRA."),
    lora_r: int = typer.Option(16, "--lora-r", help="LoRA rank."),
    lora_alpha: int = typer.Option(32, "--lora-alpha", help="LoRA alpha."),
    lora_dropout: float = typer.Option(0.05, "--lora-dropout", help="LoRA dropout."),
    learning_rate: float = typer.Option(None, "--learning-rate", "--lr", help="Default 2e-4 (LoRA), 1e-5 (full)."),
    epochs: float = typer.Option(1.0, "--epochs", help="Passes over the data (ignored when --max-steps > 0)."),
    max_steps: int = typer.Option(-1, "--max-steps", help="Stop after this many optimizer steps (-1: epochs)."),
    batch_size: int = typer.Option(4, "--batch-size", "-b", help="Examples per device per step."),
    gradient_accumulation: int = typer.Option(1, "--gradient-accumulation", help="Steps accumulated per update."),
    max_length: int = typer.Option(1024, "--max-length", help="Tokens per example (the start is kept)."),
    skip_longer: bool = typer.Option(False, "--skip-longer", help="Drop examples longer than --max-length "
                                     "instead of truncating them."),
    warmup: float = typer.Option(0.0, "--warmup", help="Warm-up steps (an int) or share of steps (< 1)."),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing/--no-gradient-checkpointing",
                                                help="Recompute activations in the backward pass: less memory "
                                                "for large models, ~30% slower."),
    seed: int = typer.Option(0, "--seed", help="Training seed."),
    threads: int = typer.Option(0, "--threads", help="CPU threads for torch; 0 = torch's default."),
    evaluate: bool = typer.Option(True, "--eval/--no-eval", help=_EVAL_HELP),
    eval_dataset: str = EVAL_DATASET, eval_limit: int = EVAL_LIMIT, eval_temperatures: str = EVAL_TEMPS,
    eval_samples: int = EVAL_SAMPLES, eval_assistant_max_new_tokens: int = EVAL_ATOK,
    eval_user_max_new_tokens: int = EVAL_UTOK, data_dir: Path = EVAL_DATA_DIR, eval_config: Path = EVAL_CONFIG,
) -> None:
    """Supervised fine-tuning (TRL SFTTrainer + PEFT LoRA) with the loss on the next user turns."""
    from userturn.training.sft import SFTOptions, train_sft

    options = SFTOptions(model=model, data=data, out=out, loss_on=loss_on, full=full,
                         lora=_lora(full, lora_r, lora_alpha, lora_dropout), learning_rate=learning_rate,
                         epochs=epochs, max_steps=max_steps, batch_size=batch_size,
                         gradient_accumulation=gradient_accumulation, max_length=max_length,
                         skip_longer=skip_longer, warmup=warmup,
                         seed=seed, threads=threads, gradient_checkpointing=gradient_checkpointing)
    record = train_sft(options)
    _finish(record, out, model, evaluate,
            _eval_options(eval_dataset, eval_limit, eval_temperatures, eval_samples, eval_assistant_max_new_tokens,
                          eval_user_max_new_tokens, data_dir, eval_config, threads), f"SFT of {model}")


@train_app.command("rl")
def rl_command(
    model: str = typer.Option("embedded", "--model", "-m", help="Model to train: 'embedded', a local folder "
                              "(e.g. the output of `train sft`) or a hub id."),
    prompts: Path = typer.Option(..., "--prompts", help="JSONL of conversations ending with an assistant turn "
                                 "(`train make-data --format prompts`)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder (as for `train sft`)."),
    full: bool = typer.Option(False, "--full", help="Full fine-tuning instead of LoRA."),
    lora_r: int = typer.Option(16, "--lora-r", help="LoRA rank."),
    lora_alpha: int = typer.Option(32, "--lora-alpha", help="LoRA alpha."),
    lora_dropout: float = typer.Option(0.05, "--lora-dropout", help="LoRA dropout."),
    learning_rate: float = typer.Option(None, "--learning-rate", "--lr", help="Default 1e-5 (LoRA), 1e-6 (full)."),
    epochs: float = typer.Option(1.0, "--epochs", help="Passes over the prompts (ignored when --max-steps > 0)."),
    max_steps: int = typer.Option(-1, "--max-steps", help="Stop after this many optimizer steps (-1: epochs)."),
    batch_size: int = typer.Option(8, "--batch-size", "-b", help="Completions per device per step; a multiple "
                                   "of --num-generations."),
    gradient_accumulation: int = typer.Option(1, "--gradient-accumulation", help="Steps accumulated per update."),
    num_generations: int = typer.Option(4, "--num-generations", "-g", help="User turns sampled per prompt (the "
                                        "GRPO group)."),
    max_completion_length: int = typer.Option(48, "--max-completion-length", help="Token budget of a user turn."),
    max_prompt_tokens: int = typer.Option(768, "--max-prompt-tokens", help="Drop prompts longer than this."),
    temperature: float = typer.Option(1.0, "--temperature", help="Sampling temperature of the rollouts."),
    beta: float = typer.Option(0.04, "--beta", help="KL penalty to the starting model (0: none, no reference)."),
    weight: list[str] = typer.Option(None, "--weight", help="Reward of a label, label=value (repeatable), e.g. "
                                     "--weight acknowledgement=0.2. Defaults: follow_up 1, meta/assistant_drift "
                                     "-0.5, empty -1, others 0."),
    length_penalty: float = typer.Option(0.0, "--length-penalty", help="Reward subtracted for long turns, in "
                                         "full at twice --max-words."),
    max_words: int = typer.Option(60, "--max-words", help="Words a user turn may have without penalty."),
    classifier: str = typer.Option("rules", "--classifier", help="Classifier that computes the reward."),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing/--no-gradient-checkpointing",
                                                help="Recompute activations in the backward pass: less memory "
                                                "for large models, ~30% slower."),
    seed: int = typer.Option(0, "--seed", help="Training seed."),
    threads: int = typer.Option(0, "--threads", help="CPU threads for torch; 0 = torch's default."),
    evaluate: bool = typer.Option(True, "--eval/--no-eval", help=_EVAL_HELP),
    eval_dataset: str = EVAL_DATASET, eval_limit: int = EVAL_LIMIT, eval_temperatures: str = EVAL_TEMPS,
    eval_samples: int = EVAL_SAMPLES, eval_assistant_max_new_tokens: int = EVAL_ATOK,
    eval_user_max_new_tokens: int = EVAL_UTOK, data_dir: Path = EVAL_DATA_DIR, eval_config: Path = EVAL_CONFIG,
) -> None:
    """RL (TRL GRPOTrainer): the model writes the next user turn; userturn's classifier is the reward."""
    from userturn.training.rl import RLOptions, train_rl

    weights = {k: float(v) for k, v in parse_key_values(weight, "--weight").items()}
    options = RLOptions(model=model, prompts=prompts, out=out, full=full,
                        lora=_lora(full, lora_r, lora_alpha, lora_dropout), learning_rate=learning_rate,
                        epochs=epochs, max_steps=max_steps, batch_size=batch_size,
                        gradient_accumulation=gradient_accumulation, num_generations=num_generations,
                        max_completion_length=max_completion_length, max_prompt_tokens=max_prompt_tokens,
                        temperature=temperature, beta=beta, weights=weights, length_penalty=length_penalty,
                        max_words=max_words, classifier=classifier, seed=seed, threads=threads,
                        gradient_checkpointing=gradient_checkpointing)
    record = train_rl(options)
    _finish(record, out, model, evaluate,
            _eval_options(eval_dataset, eval_limit, eval_temperatures, eval_samples, eval_assistant_max_new_tokens,
                          eval_user_max_new_tokens, data_dir, eval_config, threads), f"GRPO of {model}")


@train_app.command("evaluate")
def evaluate_command(
    trained: Path = typer.Option(..., "--trained", help="Output folder of `train sft` or `train rl`."),
    base: str = typer.Option(None, "--base", help="Model to compare with (default: the base recorded in "
                             "training.json)."),
    out: Path = typer.Option(None, "--out", "-o", help="Where the two probe runs go (default: TRAINED/eval)."),
    threads: int = typer.Option(0, "--threads", help="CPU threads for torch; 0 = torch's default."),
    eval_dataset: str = EVAL_DATASET, eval_limit: int = EVAL_LIMIT, eval_temperatures: str = EVAL_TEMPS,
    eval_samples: int = EVAL_SAMPLES, eval_assistant_max_new_tokens: int = EVAL_ATOK,
    eval_user_max_new_tokens: int = EVAL_UTOK, data_dir: Path = EVAL_DATA_DIR, eval_config: Path = EVAL_CONFIG,
) -> None:
    """Run the before/after probe on held-out items for a trained model and its base."""
    from userturn.errors import DataError
    from userturn.progress import Reporter
    from userturn.training.checkpoint import TRAINING_RECORD
    from userturn.training.evaluate import EvalOptions, evaluate

    record_path = trained / TRAINING_RECORD
    if not record_path.is_file():
        raise DataError(f"no {TRAINING_RECORD}: not the output folder of `userturn train sft|rl`", path=str(trained))
    record = json.loads(record_path.read_text(encoding="utf-8"))
    options = EvalOptions(base_model=base or record["base_model"], trained_model=str(trained),
                          out=out or trained / "eval", exclude={(d, i) for d, i in record.get("used_items", [])},
                          **_eval_options(eval_dataset, eval_limit, eval_temperatures, eval_samples,
                                          eval_assistant_max_new_tokens, eval_user_max_new_tokens, data_dir,
                                          eval_config, threads))
    summary = evaluate(options, Reporter(quiet=False))
    typer.echo(f"follow-up rate before/after on {len(summary['items'])} held-out {options.dataset} items:\n")
    typer.echo(summary["table"])
