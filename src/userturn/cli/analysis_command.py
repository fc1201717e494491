"""``userturn sweep`` (a grid of models, and the decoupling table) and ``userturn compare`` (two runs)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import typer

from userturn.cli.app import app
from userturn.cli.run_command import parse_floats, parse_key_values, parse_list, parse_perturbation_options
from userturn.errors import ConfigError, DataError


def read_samples(path: Path) -> list[dict[str, Any]]:
    """The samples of a run: ``path`` is a run directory (its ``samples.jsonl``) or a samples file.

    Raises:
        DataError: no such file, a line that is not a JSON object, or a sample without the fields the
            analysis needs (naming the file, line and field).
    """
    file = path / "samples.jsonl" if path.is_dir() else path
    if not file.is_file():
        raise DataError("no samples.jsonl here (give a run directory or a samples file)", path=str(path))
    samples = []
    with file.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"not valid JSON ({exc.msg})", path=str(file), line=number) from None
            if not isinstance(row, dict):
                raise DataError("expected a JSON object per line", path=str(file), line=number)
            for name in ("item_id", "dataset", "model", "perturbation", "temperature", "label"):
                if name not in row:
                    raise DataError("missing (not a userturn samples file?)", path=str(file), line=number,
                                    field=name)
            samples.append(row)
    return samples


def parse_model_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``"embedded@dtype=bfloat16+thinking=on"`` → ``("embedded", {"dtype": "bfloat16", "thinking": "on"})``.

    Settings are run-configuration fields (as in a config file); values are parsed as JSON when they parse.
    """
    name, _, settings = spec.partition("@")
    if not name.strip():
        raise ConfigError(f"--models: '{spec}' has no model name before '@'")
    options = parse_key_values([s for s in settings.split("+") if s] if settings else [], f"--models {spec}")
    for key in options:
        if key in ("model", "out", "datasets"):
            raise ConfigError(f"--models {spec}: '{key}' cannot be set per model")
    return name.strip(), {k.replace("-", "_"): v for k, v in options.items()}


def slug(spec: str) -> str:
    """A folder name for a model spec (``org/model@dtype=bfloat16`` → ``org_model@dtype=bfloat16``)."""
    return re.sub(r"[^A-Za-z0-9@=+._-]", "_", spec).strip("._") or "model"


@app.command()
def sweep(
    models: str = typer.Option(..., "--models", help="Models, comma-separated. A model may carry run settings "
                               "after '@', joined by '+': embedded,embedded@dtype=bfloat16,"
                               "embedded@thinking=on+seed=1. Each becomes its own run (and label)."),
    dataset: str = typer.Option(None, "--datasets", "--dataset", "-d", help="Dataset name(s), comma-separated. "
                                "Default: demo."),
    temperatures: str = typer.Option(None, "--temperatures", "-t", help="User-turn temperatures, comma-separated."),
    samples: int = typer.Option(None, "--samples", "-k", help="Samples per non-zero temperature."),
    limit: int = typer.Option(None, "--limit", "-n", help="At most this many items per dataset."),
    perturb: str = typer.Option(None, "--perturb", help="Perturbation(s), comma-separated (the decoupling table "
                                "uses the control 'none')."),
    perturb_option: list[str] = typer.Option(None, "--perturb-option", help="NAME.KEY=VALUE (repeatable)."),
    user_model: str = typer.Option(None, "--user-model", help="One model that writes every user turn (default: "
                                   "each model writes its own)."),
    data_dir: Path = typer.Option(None, "--data-dir", help="Folder with local dataset copies (also "
                                  "$USERTURN_DATA_DIR)."),
    assistant_max_new_tokens: int = typer.Option(None, "--assistant-max-new-tokens", help="Assistant token budget."),
    user_max_new_tokens: int = typer.Option(None, "--user-max-new-tokens", help="User-turn token budget."),
    seed: int = typer.Option(None, "--seed", help="Run seed (shared by all models)."),
    threads: int = typer.Option(None, "--threads", help="CPU threads for torch; 0 = torch's default."),
    batch_size: int = typer.Option(None, "--batch-size", "-b", help="Rows per forward pass; 0 = automatic."),
    config: Path = typer.Option(None, "--config", "-c", help="A TOML/YAML file of run settings shared by all "
                                "models; flags and per-model settings override it."),
    out: Path = typer.Option(Path("runs/sweep"), "--out", "-o", help="Root folder: one run directory per model "
                             "below it. Running the same sweep again reuses every stored generation."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    json_output: bool = typer.Option(False, "--json", help="Print the decoupling tables as JSON."),
) -> None:
    """Run the probe for every model on the same datasets and temperatures, then test decoupling:
    the correlation across models of task accuracy with follow-up rate, per dataset and temperature,
    and each pair of models' paired differences in both."""
    from userturn.analysis import comparison_table, decoupling_rows, decoupling_table, model_pair_rows
    from userturn.config import build_config
    from userturn.output import write_json
    from userturn.pipeline import run_probe
    from userturn.progress import Reporter

    specs = parse_list(models, "--models") or []
    if len(set(specs)) != len(specs):
        raise ConfigError(f"--models: a model is listed twice in '{models}'")
    shared: dict[str, Any] = {
        "datasets": parse_list(dataset, "--datasets"), "temperatures": parse_floats(temperatures, "--temperatures"),
        "samples": samples, "limit": limit, "perturbations": parse_list(perturb, "--perturb"),
        "perturbation_options": parse_perturbation_options(perturb_option) or None, "user_model": user_model,
        "data_dir": data_dir, "assistant_max_new_tokens": assistant_max_new_tokens,
        "user_max_new_tokens": user_max_new_tokens, "seed": seed, "threads": threads, "batch_size": batch_size,
    }
    plans = []
    for spec in specs:  # validate every configuration before running any
        name, settings = parse_model_spec(spec)
        plans.append((spec, build_config(config, {**shared, **settings, "model": name, "out": out / slug(spec)})))
    reporter = Reporter(quiet=quiet or json_output)
    runs: dict[str, list[dict[str, Any]]] = {}
    for spec, run_config in plans:
        reporter.info(f"[bold]{spec}[/bold] → {run_config.out}")
        result = run_probe(run_config, reporter)
        runs[spec] = read_samples(result.out)
    decoupling = decoupling_rows(runs, seed=plans[0][1].seed)
    pairs = model_pair_rows(runs, seed=plans[0][1].seed)
    write_json(out / "decoupling.json", {"models": specs, "runs": {s: str(c.out) for s, c in plans},
                                         "decoupling": decoupling, "pairs": pairs})
    if json_output:
        sys.stdout.write(json.dumps({"decoupling": decoupling, "pairs": pairs}, indent=2) + "\n")
        return
    typer.echo("Decoupling: accuracy vs follow-up rate across models (control, shared items)")
    typer.echo(decoupling_table(decoupling) if decoupling else "(no dataset with a verifier in the sweep)")
    if len(specs) < 3:
        typer.echo("(with fewer than 3 models a correlation is ±1 or undefined and has no interval; "
                   "see the paired differences below)")
    if pairs:
        typer.echo("\nPaired differences between models (B − A, item bootstrap):")
        typer.echo(comparison_table(pairs, with_models=True))
    typer.echo(f"\nruns in {out}/; tables in {out / 'decoupling.json'}")


@app.command()
def compare(
    run_a: Path = typer.Argument(..., help="First run directory (or its samples.jsonl)."),
    run_b: Path = typer.Argument(..., help="Second run directory (or its samples.jsonl)."),
    json_output: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
) -> None:
    """Compare two runs on their shared items: follow-up rate and accuracy of each, and the
    differences (B − A) with paired item-bootstrap intervals, per dataset × perturbation × temperature."""
    from userturn.analysis import comparison_table, paired_run_rows

    first, second = read_samples(run_a), read_samples(run_b)
    rows = paired_run_rows(first, second, seed=seed)
    if json_output:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    if not rows:
        raise DataError("the two runs share no dataset × perturbation × temperature with common items",
                        path=str(run_b))
    label_a = ",".join(sorted({s["model"] for s in first}))
    label_b = ",".join(sorted({s["model"] for s in second}))
    typer.echo(f"A = {run_a} ({label_a})\nB = {run_b} ({label_b})")
    typer.echo(comparison_table(rows))
