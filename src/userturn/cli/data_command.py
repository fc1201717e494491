"""``userturn data list|show`` and ``userturn verify``: look at datasets and score existing responses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from userturn.cli.app import app
from userturn.datasets import LoadOptions, dataset_names, get_dataset, load_items
from userturn.errors import ConfigError, DataError
from userturn.records import Item

data_app = typer.Typer(help="List the datasets and show their items as the model sees them.", no_args_is_help=True)
app.add_typer(data_app, name="data")

DATA_DIR_HELP = "Folder with local copies in each dataset's original format (default: $USERTURN_DATA_DIR; " \
    "without either, the Hugging Face hub)."


def _options(data_dir: Path | None, dataset_path: Path | None, cut: str | None) -> LoadOptions:
    return LoadOptions(data_dir=data_dir, path=dataset_path, extra={"cut": cut} if cut else {})


@data_app.command("list")
def data_list() -> None:
    """List the datasets with their sizes and verifiers."""
    rows = []
    for name in dataset_names():
        spec = get_dataset(name)
        rows.append((name, str(spec.size) if spec.size is not None else "-", spec.verifier_description,
                     spec.description))
    width = max(len(r[0]) for r in rows)
    typer.echo(f"{'name':<{width}}  {'size':>5}  verifier / description")
    for name, size, verifier, description in rows:
        typer.echo(f"{name:<{width}}  {size:>5}  {description}")
        typer.echo(f"{'':<{width}}  {'':>5}  verifier: {verifier}")


def _show_item(item: Item) -> None:
    typer.echo(f"── {item.dataset} item {item.id} " + "─" * 20)
    for message in item.messages:
        typer.echo(f"[{message.role}]\n{message.content}\n")
    if item.given_response is not None:
        typer.echo(f"[assistant, given by the dataset]\n{item.given_response}\n")
    if item.answer is not None:
        typer.echo(f"gold answer: {item.answer.rsplit('####', 1)[-1].strip() if item.dataset == 'gsm8k' else item.answer}")
    if item.reference_user_turn is not None:
        typer.echo(f"reference next user turn: {item.reference_user_turn}")
    shown = {k: v for k, v in item.meta.items() if k not in ("source", "line", "turns", "reference_user_turns")}
    if shown:
        typer.echo("meta: " + json.dumps(shown, ensure_ascii=False)[:400])
    typer.echo("")


@data_app.command("show")
def data_show(
    name: str = typer.Argument(..., help="Dataset name (see `userturn data list`)."),
    limit: int = typer.Option(3, "--limit", min=1, help="How many items to print."),
    data_dir: Path | None = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
    dataset_path: Path | None = typer.Option(None, "--dataset-path", help="Read the items from your own JSONL file."),
    cut: str | None = typer.Option(None, "--cut", help="Conversations: cut after the first, last or all assistant turns."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per item instead of text."),
) -> None:
    """Print the first items of a dataset as the model will see them."""
    for item in load_items(name, _options(data_dir, dataset_path, cut), limit=limit):
        if as_json:
            typer.echo(json.dumps(item.to_dict(), ensure_ascii=False))
        else:
            _show_item(item)


def _read_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    from userturn.datasets.jsonl import read_jsonl

    return list(read_jsonl(path))


@app.command("verify")
def verify_command(
    dataset: str = typer.Option(..., "--dataset", help="Dataset whose verifier scores the responses."),
    responses: Path = typer.Option(..., "--responses", help="JSONL: each line has `response` and an item `id` "
                                   "or the gold fields (answer; ifeval: instruction_id_list, kwargs, prompt)."),
    out: Path | None = typer.Option(None, "--out", help="Write every line back with `correct` (and details) here."),
    data_dir: Path | None = typer.Option(None, "--data-dir", help=DATA_DIR_HELP + " Only read for lines with an id."),
    dataset_path: Path | None = typer.Option(None, "--dataset-path", help="Look ids up in your own JSONL file."),
) -> None:
    """Score existing responses with a dataset's verifier, without running a model."""
    from userturn.verifiers.responses import summarize, verify_row

    spec = get_dataset(dataset)
    if spec.verify is None:
        raise ConfigError(f"dataset '{dataset}' has no verifier; choose one of: "
                          + ", ".join(n for n in dataset_names() if get_dataset(n).verify is not None))
    items: dict[str, Item] | None = None

    def lookup(item_id: str) -> Item | None:
        nonlocal items
        if items is None:
            items = {i.id: i for i in load_items(dataset, _options(data_dir, dataset_path, None))}
        return items.get(item_id)

    rows = _read_rows(responses)
    if not rows:
        raise DataError("no responses in the file", path=str(responses))
    scored = [verify_row(dataset, row, (str(responses), number), lookup) for number, row in rows]
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", encoding="utf-8") as handle:
            for row in scored:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    summary = summarize(dataset, scored)
    correct = sum(1 for r in scored if r["correct"])
    typer.echo(f"{dataset}: accuracy {summary['accuracy']:.4f} ({correct}/{summary['n']})")
    for key in ("prompt_level_strict", "prompt_level_loose", "instruction_level_strict", "instruction_level_loose"):
        if key in summary:
            typer.echo(f"  {key}: {summary[key]:.4f}")
    if out is not None:
        typer.echo(f"scored lines written to {out}")
