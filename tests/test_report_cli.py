"""``userturn report`` and ``userturn export`` through the CLI's error boundary."""

from __future__ import annotations

import json

import pytest
from synthetic_run import write_run

import userturn.cli.app as cli
from userturn.cli.app import main


@pytest.fixture(autouse=True)
def report_commands_only(monkeypatch):
    # Exercise these commands through the real error boundary without depending on other command modules.
    monkeypatch.setattr(cli, "COMMAND_MODULES", ["userturn.cli.report_command"])


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("cli") / "run", items=2)


def test_report_writes_tables_plots_and_html(run_dir, tmp_path, capsys):
    code, out, err = run_cli(capsys, "report", str(run_dir), "--out", str(tmp_path / "rep"), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["html"] == str(tmp_path / "rep" / "report.html")
    names = {p.split("/")[-1] for p in result["tables"]}
    assert {"tables.md", "results.md", "results.tex", "effects.tex", "labels.md"} <= names
    assert len(result["plots"]) == 8
    assert (tmp_path / "rep" / "report.html").stat().st_size > 10_000


def test_report_defaults_to_a_folder_inside_the_run(run_dir, capsys):
    code, out, err = run_cli(capsys, "report", str(run_dir))
    assert code == 0, err
    assert (run_dir / "report" / "report.html").exists() and "report.html" in out


def test_several_runs_need_an_out_folder(run_dir, capsys):
    code, _, err = run_cli(capsys, "report", str(run_dir), str(run_dir))
    assert code == 2 and err.strip() == "error: --out is required when reporting several run directories together"


def test_missing_run_directory_is_one_line(tmp_path, capsys):
    code, _, err = run_cli(capsys, "report", str(tmp_path / "missing"), "--out", str(tmp_path / "o"))
    assert code == 2
    assert err.count("\n") == 1 and "missing: no such run directory" in err


def test_malformed_summary_is_one_line(tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "summary.json").write_text('{"rows": [}')
    (broken / "samples.jsonl").write_text("")
    code, _, err = run_cli(capsys, "export", str(broken), "--format", "csv")
    assert code == 2 and err.count("\n") == 1 and "summary.json:1: not valid JSON" in err


def test_export_parquet_and_csv(run_dir, tmp_path, capsys):
    code, out, err = run_cli(capsys, "export", str(run_dir), "--format", "parquet", "--out", str(tmp_path / "pq"))
    assert code == 0, err
    assert (tmp_path / "pq" / "samples.parquet").exists() and (tmp_path / "pq" / "summary.parquet").exists()
    code, out, err = run_cli(capsys, "export", str(run_dir), "--format", "CSV", "--quiet")
    assert code == 0 and out == "" and (run_dir / "export" / "samples.csv").exists()
    code, _, err = run_cli(capsys, "export", str(run_dir), "--format", "xlsx")
    assert code == 2 and "unknown format 'xlsx'" in err
