"""Reading a finished run directory (``samples.jsonl`` + ``summary.json``) for reports and exports.

The run directory is written by the pipeline; this module only reads it, checks the fields the
reports rely on, and fills the optional ones with ``None`` so that older or partial runs still
render. Every problem becomes a :class:`~userturn.errors.DataError` naming the file, line and field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from userturn.errors import DataError
from userturn.jsonl_io import read_jsonl

SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"

# The keys of LabeledTurn.to_sample(); the first group must be present, the rest may be missing.
SAMPLE_REQUIRED: tuple[str, ...] = ("item_id", "dataset", "model", "perturbation", "temperature", "user_turn", "label")
SAMPLE_OPTIONAL: tuple[str, ...] = (
    "user_model", "sample_index", "seed", "query", "assistant_prompt", "assistant_response",
    "assistant_finish_reason", "correct", "extracted_answer", "context", "user_turn_prompt",
    "finish_reason", "label_reason", "classifier", "reference_user_turn",
)
SAMPLE_FIELDS: tuple[str, ...] = SAMPLE_REQUIRED + SAMPLE_OPTIONAL

ROW_REQUIRED: tuple[str, ...] = ("model", "dataset", "perturbation", "temperature", "n", "follow_up_rate", "ci_low",
                                 "ci_high")
EFFECT_REQUIRED: tuple[str, ...] = ("model", "dataset", "temperature", "perturbation", "effect", "ci_low", "ci_high")


@dataclass(frozen=True)
class RunData:
    """One run directory, read and checked.

    Args:
        name: the directory's name, used to tell runs apart when several are reported together.
        path: the run directory.
        version: ``userturn_version`` from the summary (``"unknown"`` when absent).
        config: the run's configuration as written by the pipeline (free-form).
        rows: summary rows; ``user_model`` defaults to ``model``, ``labels`` to ``{}``,
            ``accuracy`` to ``None``.
        effects: perturbation effects (empty when the run has none).
        decoupling: the summary's decoupling records, passed through unchanged (empty when absent).
        samples: one dict per generated user turn, every key of ``SAMPLE_FIELDS`` present.
    """

    name: str
    path: Path
    version: str
    config: dict[str, Any]
    rows: list[dict[str, Any]]
    effects: list[dict[str, Any]] = field(default_factory=list)
    decoupling: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_fields(record: Any, required: Sequence[str], numeric: Sequence[str], *, path: Path,
                  line: int | None, what: str) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise DataError(f"expected a JSON object for {what}, got {type(record).__name__}", path=str(path), line=line)
    for key in required:
        if key not in record:
            raise DataError(f"{what} lacks this field", path=str(path), line=line, field=key)
    for key in numeric:
        if key in record and record[key] is not None and not _is_number(record[key]):
            raise DataError(f"{what} has a non-numeric value {record[key]!r}", path=str(path), line=line, field=key)
    return record


def read_summary(path: Path) -> dict[str, Any]:
    """Read and check ``summary.json``.

    Args:
        path: the summary file. ``effects`` and ``decoupling`` may be absent (read as empty lists);
            ``rows`` must be a list (it may be empty).
    """
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"no {SUMMARY_FILE} here; is this a finished run directory?", path=str(path)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise DataError(f"not valid JSON ({exc})", path=str(path), line=line) from None
    if not isinstance(summary, dict):
        raise DataError("expected a JSON object at the top level", path=str(path))
    rows = summary.get("rows")
    if not isinstance(rows, list):
        raise DataError("missing or not a list", path=str(path), field="rows")
    numeric = ("temperature", "n", "follow_up", "follow_up_rate", "ci_low", "ci_high", "accuracy", "accuracy_n")
    for index, row in enumerate(rows):
        _check_fields(row, ROW_REQUIRED, numeric, path=path, line=None, what=f"rows[{index}]")
        row.setdefault("user_model", row["model"])
        row.setdefault("follow_up", round(row["follow_up_rate"] * row["n"]))
        row.setdefault("accuracy", None)
        row.setdefault("accuracy_n", 0)
        labels = row.setdefault("labels", {})
        if not isinstance(labels, dict) or not all(_is_number(v) for v in labels.values()):
            raise DataError(f"rows[{index}] labels must map label names to counts", path=str(path), field="labels")
    for key in ("effects", "decoupling"):
        value = summary.get(key) or []
        if not isinstance(value, list):
            raise DataError("not a list", path=str(path), field=key)
        summary[key] = value
    for index, effect in enumerate(summary["effects"]):
        _check_fields(effect, EFFECT_REQUIRED, ("temperature", "effect", "ci_low", "ci_high"), path=path, line=None,
                      what=f"effects[{index}]")
        effect.setdefault("expected", "none")
        effect.setdefault("verdict", "")
    return summary


def read_samples(path: Path) -> list[dict[str, Any]]:
    """Read and check ``samples.jsonl``; blank lines are skipped, missing optional keys become ``None``."""
    samples: list[dict[str, Any]] = []
    if not path.is_file():
        raise DataError(f"no {SAMPLES_FILE} here; is this a finished run directory?", path=str(path))
    for line_no, record in read_jsonl(path):
        _check_fields(record, SAMPLE_REQUIRED, ("temperature", "sample_index", "seed"), path=path,
                      line=line_no, what="sample")
        for key in SAMPLE_OPTIONAL:
            record.setdefault(key, None)
        if record["user_model"] is None:
            record["user_model"] = record["model"]
        samples.append(record)
    return samples


def load_run(run_dir: Path | str, *, with_samples: bool = True) -> RunData:
    """Read one run directory.

    Args:
        run_dir: a directory holding ``summary.json`` and ``samples.jsonl``.
        with_samples: False skips reading ``samples.jsonl`` (tables and plots need only the summary).
    """
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise DataError("no such run directory", path=str(run_dir))
    if not run_dir.is_dir():
        raise DataError("not a directory; pass the run directory that holds summary.json", path=str(run_dir))
    summary = read_summary(run_dir / SUMMARY_FILE)
    samples = read_samples(run_dir / SAMPLES_FILE) if with_samples else []
    config = summary.get("config")
    return RunData(
        name=run_dir.resolve().name,
        path=run_dir,
        version=str(summary.get("userturn_version", "unknown")),
        config=config if isinstance(config, dict) else {},
        rows=summary["rows"],
        effects=summary["effects"],
        decoupling=summary["decoupling"],
        samples=samples,
    )


def load_runs(run_dirs: Sequence[Path | str], *, with_samples: bool = True) -> list[RunData]:
    """Read several run directories; names are made unique by suffixing ``-2``, ``-3``, ... when they clash."""
    runs = [load_run(d, with_samples=with_samples) for d in run_dirs]
    seen: dict[str, int] = {}
    unique: list[RunData] = []
    for run in runs:
        count = seen.get(run.name, 0) + 1
        seen[run.name] = count
        if count > 1:
            run = RunData(**{**run.__dict__, "name": f"{run.name}-{count}"})
        unique.append(run)
    return unique


def confidence_level(runs: Sequence[RunData]) -> float:
    """The interval level the runs were summarised with (``config["confidence"]``), 0.95 when unstated."""
    for run in runs:
        value = run.config.get("confidence")
        if _is_number(value) and 0 < value < 1:
            return float(value)
    return 0.95
