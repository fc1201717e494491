"""``userturn classify`` and ``userturn validate-classifier``: label turns offline, check a classifier on gold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from userturn.classifiers import Classifier, ClassifyInput, load_classifier
from userturn.classifiers.validation import agreement_report, format_report
from userturn.cli.app import app
from userturn.errors import ConfigError, DataError
from userturn.jsonl_io import read_jsonl
from userturn.records import LABELS, Label

_TEXT_FIELDS = ("query", "response", "user_turn")
_SPLITS = ("dev", "heldout", "all")


def read_turns(path: Path, *, gold: bool = False) -> list[dict[str, Any]]:
    """Read a JSONL file of turns; each line needs string ``query``, ``response`` and ``user_turn``.

    Args:
        gold: also require ``label`` (one of ``records.LABELS``); ``split``, when present, must be
            ``dev`` or ``heldout``.

    Raises:
        DataError: missing/unreadable file, a line that is not a JSON object, a missing or non-string
            field, an unknown label or split; the message names the file, line and field.
    """
    rows = []
    for number, row in read_jsonl(path):
        for name in _TEXT_FIELDS + (("label",) if gold else ()):
            if name not in row:
                raise DataError("missing", path=str(path), line=number, field=name)
            if not isinstance(row[name], str):
                raise DataError(f"must be a string, got {type(row[name]).__name__}", path=str(path), line=number,
                                field=name)
        if gold and row["label"] not in LABELS:
            raise DataError(f"unknown label '{row['label']}'; use one of: {', '.join(LABELS)}", path=str(path),
                            line=number, field="label")
        if gold and "split" in row and row["split"] not in ("dev", "heldout"):
            raise DataError(f"unknown split '{row['split']}'; use dev or heldout", path=str(path), line=number,
                            field="split")
        row["_line"] = number
        rows.append(row)
    return rows


def build_classifier(classifier: str, judge: str | None, judges: str | None, only_uncertain: bool,
                     retries: int = 1, store: Path | None = None) -> Classifier:
    """The classifier the flags ask for: rules, one judge, or rules + judges (ensemble)."""
    models = [m.strip() for m in judges.split(",")] if judges else []
    if judge:
        models.insert(0, judge)
    if any(not m for m in models):
        raise ConfigError("--judges: empty model name in the list")
    if classifier not in ("rules", "judge"):
        raise ConfigError(f"--classifier must be rules or judge, got '{classifier}'")
    if classifier == "judge" and not models:
        models = ["embedded"]
    if not models:
        if only_uncertain:
            raise ConfigError("--judge-only-uncertain needs --judge MODEL or --judges A,B")
        return load_classifier("rules")
    from userturn.classifiers.judge import EnsembleClassifier

    cache = None
    if store is not None:
        from userturn.store import Store

        cache = Store(store)
    built = [load_classifier("judge", model=m, retries=retries, store=cache) for m in models]
    if classifier == "judge" and len(built) == 1 and not only_uncertain:
        return built[0]
    return EnsembleClassifier(built, only_uncertain=only_uncertain)


def _inputs(rows: list[dict[str, Any]]) -> list[ClassifyInput]:
    return [ClassifyInput(r["query"], r["response"], r["user_turn"], str(r.get("finish_reason", "stop")))
            for r in rows]


def _label_fields(label: Label) -> dict[str, Any]:
    return {"label": label.label, "reason": label.reason, "classifier": label.classifier,
            "confidence": round(label.confidence, 4), "label_details": label.details}


_JUDGE_HELP = "Judge model: 'embedded', a local path/hub id for transformers, or BACKEND:MODEL (e.g. openai:gpt-4o)."


@app.command("classify")
def classify_command(
    input: Path = typer.Option(..., "--input", help="JSONL with query, response and user_turn on every line."),
    out: Path = typer.Option(..., "--out", help="Where to write the lines back with label, reason and confidence."),
    classifier: str = typer.Option("rules", "--classifier", help="rules (default, offline) or judge."),
    judge: str | None = typer.Option(None, "--judge", help=_JUDGE_HELP),
    judges: str | None = typer.Option(None, "--judges", help="Comma-separated judge models; majority vote, ties recorded."),
    judge_only_uncertain: bool = typer.Option(False, "--judge-only-uncertain",
                                              help="Send only turns the rules label with low confidence to the judges."),
    retries: int = typer.Option(1, "--judge-retries", min=0, help="Extra judge attempts for unparseable replies."),
    store: Path | None = typer.Option(None, "--store", help="SQLite store that caches judge generations "
                                      "(e.g. a run's store file); reruns regenerate nothing."),
) -> None:
    """Label any JSONL of (query, response, user_turn) without running a probe."""
    rows = read_turns(input)
    chosen = build_classifier(classifier, judge, judges, judge_only_uncertain, retries, store)
    labels = chosen.classify(_inputs(rows))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for row, label in zip(rows, labels, strict=True):
            line = {k: v for k, v in row.items() if k != "_line"}
            line.update(_label_fields(label))
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
    counts: dict[str, int] = {}
    for label in labels:
        counts[label.label] = counts.get(label.label, 0) + 1
    summary = ", ".join(f"{k}={counts[k]}" for k in (*LABELS, "judge_error") if k in counts)
    typer.echo(f"labelled {len(labels)} turns -> {out} ({summary})")


@app.command("validate-classifier")
def validate_classifier_command(
    gold: list[Path] = typer.Option(..., "--gold", help="Gold JSONL: query, response, user_turn, label (split "
                                    "optional). Repeat to join files, e.g. the tuning set and a held-out file."),
    split: str = typer.Option("all", "--split", help="dev, heldout or all (lines without a split count as dev)."),
    classifier: str = typer.Option("rules", "--classifier", help="rules (default) or judge."),
    judge: str | None = typer.Option(None, "--judge", help=_JUDGE_HELP + " Validates the judge (or the ensemble)."),
    judges: str | None = typer.Option(None, "--judges", help="Comma-separated judge models; majority vote."),
    judge_only_uncertain: bool = typer.Option(False, "--judge-only-uncertain",
                                              help="Judges see only low-confidence rules labels."),
    disagreements: Path | None = typer.Option(None, "--disagreements",
                                              help="Write the gold lines the classifier got wrong to this JSONL."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only the first N gold lines of the split."),
    store: Path | None = typer.Option(None, "--store", help="SQLite store that caches judge generations "
                                      "(e.g. a run's store file); reruns regenerate nothing."),
) -> None:
    """Print accuracy, macro-F1, Cohen's kappa, per-label precision/recall and the confusion matrix."""
    if split not in _SPLITS:
        raise ConfigError(f"--split must be one of {', '.join(_SPLITS)}, got '{split}'")
    rows = []
    for path in gold:
        for row in read_turns(path, gold=True):
            row["_file"] = str(path)
            rows.append(row)
    if split != "all":
        rows = [r for r in rows if r.get("split", "dev") == split]
    if limit is not None:
        rows = rows[:limit]
    if not rows:
        raise DataError(f"no gold lines in split '{split}'", path=", ".join(str(p) for p in gold))
    chosen = build_classifier(classifier, judge, judges, judge_only_uncertain, store=store)
    labels = chosen.classify(_inputs(rows))
    report = agreement_report([r["label"] for r in rows], [label.label for label in labels])
    name = getattr(chosen, "name", classifier)
    typer.echo(format_report(report, title=f"{name} on {', '.join(str(p) for p in gold)} (split: {split})"))
    if disagreements is not None:
        disagreements.parent.mkdir(parents=True, exist_ok=True)
        wrong = 0
        with disagreements.open("w", encoding="utf-8") as handle:
            for row, label in zip(rows, labels, strict=True):
                if label.label == row["label"]:
                    continue
                wrong += 1
                line = {k: v for k, v in row.items() if k not in ("_line", "_file")}
                line.update({"file": row["_file"], "line": row["_line"], "gold_label": row["label"], "predicted": label.label,
                             "reason": label.reason, "confidence": round(label.confidence, 4),
                             "label_details": label.details})
                line.pop("label", None)
                handle.write(json.dumps(line, ensure_ascii=False) + "\n")
        typer.echo(f"{wrong} disagreements -> {disagreements}")
