"""CSV and Parquet exports of a run's samples and summary, for pandas, polars and DuckDB.

Files: ``samples``, ``summary`` (one line per summary row; label counts become ``label_<name>``
columns), and ``effects`` / ``decoupling`` when the run has them. Parquet keeps types (``correct``
is a nullable boolean, ``context`` a list of ``{role, content}``); CSV writes ``context`` as JSON.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from userturn.errors import ConfigError
from userturn.report.run_data import SAMPLE_FIELDS, RunData
from userturn.report.tables import label_names

Format = Literal["csv", "parquet"]
FORMATS: tuple[str, ...] = ("csv", "parquet")

SUMMARY_FIELDS: tuple[str, ...] = ("model", "user_model", "dataset", "perturbation", "temperature", "n", "follow_up",
                                   "follow_up_rate", "ci_low", "ci_high", "accuracy", "accuracy_n")


def summary_records(run: RunData) -> list[dict[str, Any]]:
    """Summary rows flattened: the fixed fields, then ``label_<name>`` counts for every label (0 when absent)."""
    labels = label_names([run])
    records = []
    for row in run.rows:
        record = {key: row.get(key) for key in SUMMARY_FIELDS}
        record.update({f"label_{label}": int(row["labels"].get(label, 0)) for label in labels})
        records.append(record)
    return records


def _columns(records: Sequence[dict[str, Any]], preferred: Sequence[str] = ()) -> list[str]:
    columns = list(preferred)
    for record in records:
        columns += [key for key in record if key not in columns]
    return columns


def tables_of(run: RunData) -> dict[str, tuple[list[str], list[dict[str, Any]]]]:
    """The exported tables by name, each as (columns, records); empty effects/decoupling are left out."""
    summary = summary_records(run)
    tables = {
        "samples": (list(SAMPLE_FIELDS) + [k for k in _columns(run.samples) if k not in SAMPLE_FIELDS], run.samples),
        "summary": (_columns(summary, SUMMARY_FIELDS), summary),
    }
    for name in ("effects", "decoupling"):
        records = getattr(run, name)
        if records:
            tables[name] = (_columns(records), records)
    return tables


def _csv_value(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else value


def write_csv(path: Path, columns: Sequence[str], records: Sequence[dict[str, Any]]) -> Path:
    """One CSV file with a header; None becomes an empty cell, booleans ``true``/``false``, lists/dicts JSON."""
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for record in records:
            writer.writerow([_csv_value(record.get(column)) for column in columns])
    return path


def _samples_schema(columns: Sequence[str]):  # -> pyarrow.Schema
    import pyarrow as pa

    types = {"temperature": pa.float64(), "sample_index": pa.int64(), "seed": pa.int64(), "correct": pa.bool_(),
             "context": pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))}
    return pa.schema([(column, types.get(column, pa.string())) for column in columns])


def write_parquet(path: Path, columns: Sequence[str], records: Sequence[dict[str, Any]], *,
                  samples: bool = False) -> Path:
    """One Parquet file. Samples get a fixed schema (ids and texts as strings, ``context`` as a list of structs);
    other tables let pyarrow infer column types."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("Parquet export needs pyarrow: pip install 'userturn[report]'") from None
    if samples:
        schema = _samples_schema(columns)
        text_columns = {f.name for f in schema if pa.types.is_string(f.type)}
        rows = [{c: (str(r.get(c)) if c in text_columns and r.get(c) is not None else r.get(c)) for c in columns}
                for r in records]
        table = pa.Table.from_pylist(rows, schema=schema)
    else:
        table = pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in records])
        if not records:
            table = pa.table({c: pa.array([], pa.string()) for c in columns})
    pq.write_table(table, path)
    return path


def export_run(run: RunData, out_dir: Path, fmt: Format) -> list[Path]:
    """Write every table of :func:`tables_of` into ``out_dir`` as ``NAME.csv`` or ``NAME.parquet``.

    Args:
        fmt: ``csv`` or ``parquet`` (any other value is a ConfigError).
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format '{fmt}'; choose from: {', '.join(FORMATS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (columns, records) in tables_of(run).items():
        path = out_dir / f"{name}.{fmt}"
        if fmt == "csv":
            written.append(write_csv(path, columns, records))
        else:
            written.append(write_parquet(path, columns, records, samples=name == "samples"))
    return written
