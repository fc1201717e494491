"""Reading run directories: good runs load, broken ones fail with one line naming file, line and field."""

from __future__ import annotations

import json

import pytest
from synthetic_run import write_run

from userturn.errors import DataError
from userturn.report.run_data import SAMPLE_FIELDS, load_run, load_runs


def test_synthetic_run_loads_with_every_sample_field(tmp_path):
    run = load_run(write_run(tmp_path / "run"))
    assert run.name == "run"
    assert run.samples and set(SAMPLE_FIELDS) <= set(run.samples[0])
    assert run.rows and all(row["labels"] for row in run.rows)
    assert run.effects and run.version == "0.1.0"


def test_missing_run_directory_names_the_path(tmp_path):
    with pytest.raises(DataError, match="no such run directory"):
        load_run(tmp_path / "nope")


def test_directory_without_summary_says_so(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"summary\.json.*no summary\.json here"):
        load_run(tmp_path / "empty")


def test_malformed_sample_line_names_file_and_line(tmp_path):
    run_dir = write_run(tmp_path / "run")
    lines = (run_dir / "samples.jsonl").read_text().splitlines()
    lines[2] = lines[2][:-5]
    (run_dir / "samples.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"samples\.jsonl:3: not valid JSON"):
        load_run(run_dir)


def test_sample_without_label_names_the_field(tmp_path):
    run_dir = write_run(tmp_path / "run")
    lines = (run_dir / "samples.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    del record["label"]
    lines[0] = json.dumps(record)
    (run_dir / "samples.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"samples\.jsonl:1: field 'label'"):
        load_run(run_dir)


def test_summary_row_with_text_rate_is_rejected(tmp_path):
    run_dir = write_run(tmp_path / "run")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["rows"][1]["follow_up_rate"] = "high"
    (run_dir / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(DataError, match=r"field 'follow_up_rate'"):
        load_run(run_dir)


def test_summary_without_effects_reads_as_empty(tmp_path):
    run_dir = write_run(tmp_path / "run")
    summary = json.loads((run_dir / "summary.json").read_text())
    del summary["effects"], summary["decoupling"]
    (run_dir / "summary.json").write_text(json.dumps(summary))
    run = load_run(run_dir)
    assert run.effects == [] and run.decoupling == []


def test_runs_with_the_same_folder_name_get_unique_names(tmp_path):
    first = write_run(tmp_path / "a" / "run", items=1)
    second = write_run(tmp_path / "b" / "run", items=1)
    assert [r.name for r in load_runs([first, second])] == ["run", "run-2"]
