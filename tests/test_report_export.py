"""CSV and Parquet exports read back with the same rows and sensible types."""

from __future__ import annotations

import csv
import json

import pyarrow.parquet as pq
import pytest
from synthetic_run import write_run

from userturn.errors import ConfigError
from userturn.report.export import export_run
from userturn.report.run_data import load_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return load_run(write_run(tmp_path_factory.mktemp("export") / "run", items=2))


def test_csv_export_round_trips_samples_and_summary(run, tmp_path):
    paths = export_run(run, tmp_path, "csv")
    assert sorted(p.name for p in paths) == ["decoupling.csv", "effects.csv", "samples.csv", "summary.csv"]
    with (tmp_path / "samples.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(run.samples)
    assert rows[0]["user_turn"] == run.samples[0]["user_turn"]
    assert json.loads(rows[0]["context"]) == run.samples[0]["context"]
    assert rows[0]["correct"] in ("true", "false")
    with (tmp_path / "summary.csv").open(newline="", encoding="utf-8") as handle:
        summary = list(csv.DictReader(handle))
    assert len(summary) == len(run.rows)
    assert int(summary[0]["label_follow_up"]) == run.rows[0]["labels"].get("follow_up", 0)


def test_parquet_export_keeps_types(run, tmp_path):
    export_run(run, tmp_path, "parquet")
    samples = pq.read_table(tmp_path / "samples.parquet")
    assert samples.num_rows == len(run.samples)
    assert str(samples.schema.field("correct").type) == "bool"
    assert str(samples.schema.field("temperature").type) == "double"
    assert samples.column("context")[0].as_py() == run.samples[0]["context"]
    summary = pq.read_table(tmp_path / "summary.parquet").to_pylist()
    assert summary[0]["follow_up_rate"] == pytest.approx(run.rows[0]["follow_up_rate"])
    assert pq.read_table(tmp_path / "effects.parquet").num_rows == len(run.effects)


def test_unknown_format_is_a_config_error(run, tmp_path):
    with pytest.raises(ConfigError, match="unknown export format 'xlsx'"):
        export_run(run, tmp_path, "xlsx")  # type: ignore[arg-type]
