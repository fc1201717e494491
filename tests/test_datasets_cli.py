"""``userturn data list|show`` and ``userturn verify`` through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shared_data import SHARED_DATA, needs_shared_data

import userturn.cli.app as cli


def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """Run ``userturn ARGS`` with only the data commands loaded; return (exit code, stdout, stderr)."""
    monkeypatch.setattr(cli, "COMMAND_MODULES", ["userturn.cli.data_command"])
    code = 0
    try:
        cli.main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_data_list_shows_sizes_and_verifiers(monkeypatch, capsys) -> None:
    code, out, _ = run_cli(monkeypatch, capsys, "data", "list")
    assert code == 0
    gsm8k_line = next(line for line in out.splitlines() if line.startswith("gsm8k"))
    assert "1319" in gsm8k_line
    assert "verifier: none (accuracy null)" in out and "mtbench101" in out


@needs_shared_data
def test_data_show_prints_items_as_the_model_sees_them(monkeypatch, capsys) -> None:
    code, out, _ = run_cli(monkeypatch, capsys, "data", "show", "mtbench", "--limit", "2", "--data-dir", str(SHARED_DATA))
    assert code == 0 and out.count("── mtbench item") == 2
    assert "[user]\nCompose an engaging travel blog post" in out
    assert "reference next user turn: Rewrite your previous response" in out
    code, out, _ = run_cli(monkeypatch, capsys, "data", "show", "conversations", "--limit", "1", "--json",
                           "--cut", "first", "--data-dir", str(SHARED_DATA))
    row = json.loads(out)
    assert row["given_response"] and row["reference_user_turn"] and row["messages"][-1]["role"] == "user"


def test_verify_with_gold_fields_writes_scored_lines(monkeypatch, capsys, tmp_path: Path) -> None:
    responses = tmp_path / "responses.jsonl"
    responses.write_text(
        json.dumps({"response": "The answer is $1,800.", "answer": "#### 1800"}) + "\n"
        + json.dumps({"response": "I think 17.", "answer": "#### 1800"}) + "\n"
        + json.dumps({"response": "No idea", "answer": "5"}) + "\n",
        encoding="utf-8",
    )
    out_file = tmp_path / "scored.jsonl"
    code, out, _ = run_cli(monkeypatch, capsys, "verify", "--dataset", "gsm8k", "--responses", str(responses),
                           "--out", str(out_file))
    assert code == 0 and "accuracy 0.3333 (1/3)" in out
    scored = [json.loads(line) for line in out_file.open()]
    assert [s["correct"] for s in scored] == [True, False, False]
    assert scored[0]["extracted_answer"] == "1800" and scored[2]["extracted_answer"] is None


def test_verify_ifeval_reports_strict_and_loose_levels(monkeypatch, capsys, tmp_path: Path) -> None:
    row = {"prompt": "Answer without commas, in quotes.", "instruction_id_list": ["punctuation:no_comma",
           "startend:quotation"], "kwargs": [{}, {}], "response": "Here:\n\"no commas at all\""}
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps(row) + "\n", encoding="utf-8")
    out_file = tmp_path / "scored.jsonl"
    code, out, _ = run_cli(monkeypatch, capsys, "verify", "--dataset", "ifeval", "--responses", str(responses),
                           "--out", str(out_file))
    assert code == 0
    assert "prompt_level_strict: 0.0000" in out and "prompt_level_loose: 1.0000" in out
    assert "instruction_level_strict: 0.5000" in out
    scored = json.loads(out_file.read_text())
    assert scored["instruction_results"][1] == {"id": "startend:quotation", "strict": False, "loose": True}


@needs_shared_data
def test_verify_by_item_id_looks_the_gold_up_in_the_dataset(monkeypatch, capsys, tmp_path: Path) -> None:
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"id": "0", "response": "#### 18"}) + "\n"
                         + json.dumps({"item_id": "1", "assistant_response": "It takes 3 bolts."}) + "\n")
    code, out, _ = run_cli(monkeypatch, capsys, "verify", "--dataset", "gsm8k", "--responses", str(responses),
                           "--data-dir", str(SHARED_DATA))
    assert code == 0 and "accuracy 1.0000 (2/2)" in out


def test_verify_bad_input_is_one_line_and_nonzero(monkeypatch, capsys, tmp_path: Path) -> None:
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"response": "#### 18"}) + "\n")
    code, _, err = run_cli(monkeypatch, capsys, "verify", "--dataset", "gsm8k", "--responses", str(responses))
    assert code == 2 and err.strip().count("\n") == 0
    assert "r.jsonl:1: field 'id': needs 'id' of a gsm8k item or the gold fields (answer)" in err
    code, _, err = run_cli(monkeypatch, capsys, "verify", "--dataset", "mtbench", "--responses", str(responses))
    assert code == 2 and "has no verifier" in err
    responses.write_text(json.dumps({"answer": "1"}) + "\n")
    code, _, err = run_cli(monkeypatch, capsys, "verify", "--dataset", "gsm8k", "--responses", str(responses))
    assert code == 2 and "field 'response'" in err
