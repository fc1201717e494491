"""``userturn classify`` and ``userturn validate-classifier`` through the real CLI entry point."""

import json
from pathlib import Path

import pytest

import userturn.cli.app as cli_app

GOLD = Path(__file__).parent / "data" / "gold_user_turns.jsonl"


@pytest.fixture
def run_cli(monkeypatch, capsys):
    # only this module's commands: the test does not depend on other command modules being importable
    monkeypatch.setattr(cli_app, "COMMAND_MODULES", ["userturn.cli.classify_command"])

    def run(*args: str) -> tuple[int, str, str]:
        try:
            cli_app.main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_classify_writes_each_line_back_with_label_and_reason(run_cli, tmp_path):
    source = tmp_path / "turns.jsonl"
    source.write_text(
        json.dumps({"query": "What is 2 + 3?", "response": "2 + 3 = 5", "user_turn": "Why is it 5?", "id": 7}) + "\n"
        + json.dumps({"query": "What is 2 + 3?", "response": "2 + 3 = 5", "user_turn": "Thanks!"}) + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "labels.jsonl"
    code, stdout, _ = run_cli("classify", "--input", str(source), "--out", str(out))
    assert code == 0 and "labelled 2 turns" in stdout
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [line["label"] for line in lines] == ["follow_up", "acknowledgement"]
    assert lines[0]["id"] == 7 and lines[0]["reason"].startswith("follow_up:")


def test_validate_classifier_prints_figures_and_writes_disagreements(run_cli, tmp_path):
    disagreements = tmp_path / "wrong.jsonl"
    code, stdout, _ = run_cli("validate-classifier", "--gold", str(GOLD), "--split", "dev",
                              "--disagreements", str(disagreements))
    assert code == 0
    for text in ("accuracy=", "macro-F1=", "kappa=", "precision", "confusion", "follow_up"):
        assert text in stdout
    wrong = [json.loads(line) for line in disagreements.read_text(encoding="utf-8").splitlines()]
    assert wrong and all(w["gold_label"] != w["predicted"] for w in wrong)
    assert all(w["split"] == "dev" and w["file"] == str(GOLD) for w in wrong)


def test_validate_classifier_joins_gold_files_and_selects_the_split(run_cli, tmp_path):
    heldout = tmp_path / "heldout.jsonl"
    rows = [{"query": "What is 2 + 3?", "response": "2 + 3 = 5", "user_turn": "Thanks!", "label": "acknowledgement",
             "split": "heldout"},
            {"query": "What is 2 + 3?", "response": "2 + 3 = 5", "user_turn": "Thanks!", "label": "meta",
             "split": "heldout"}]
    heldout.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    wrong_file = tmp_path / "wrong.jsonl"
    code, stdout, _ = run_cli("validate-classifier", "--gold", str(GOLD), "--gold", str(heldout), "--split",
                              "heldout", "--disagreements", str(wrong_file))
    assert code == 0 and "n=2  accuracy=0.500" in stdout
    (wrong,) = [json.loads(line) for line in wrong_file.read_text(encoding="utf-8").splitlines()]
    assert wrong["file"] == str(heldout) and wrong["line"] == 2 and wrong["gold_label"] == "meta"


def test_validate_classifier_split_without_lines_is_an_error(run_cli):
    code, _, stderr = run_cli("validate-classifier", "--gold", str(GOLD), "--split", "heldout")
    assert code == 2 and "no gold lines in split 'heldout'" in stderr


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"query": "q", "response": "r", "user_turn": "u", "label": "followup"}', ":1: field 'label': unknown label"),
        ('{"query": "q", "response": "r", "label": "meta"}', ":1: field 'user_turn': missing"),
        ('{"query": "q", "response": 3, "user_turn": "u", "label": "meta"}', ":1: field 'response': must be a string"),
        ('{"query": "q", "response": "r", "user_turn": "u", "label": "meta", "split": "test"}',
         ":1: field 'split': unknown split"),
        ("{broken", ":1: not valid JSON"),
    ],
)
def test_bad_gold_line_is_one_error_line_naming_file_line_and_field(run_cli, tmp_path, line, message):
    gold = tmp_path / "gold.jsonl"
    gold.write_text(line + "\n", encoding="utf-8")
    code, _, stderr = run_cli("validate-classifier", "--gold", str(gold))
    assert code == 2
    assert stderr.startswith("error: ") and str(gold) + message in stderr
    assert len(stderr.strip().splitlines()) == 1


def test_missing_input_file_and_bad_flags_are_clear_errors(run_cli, tmp_path):
    code, _, stderr = run_cli("classify", "--input", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o"))
    assert code == 2 and "nope.jsonl: file not found" in stderr
    code, _, stderr = run_cli("validate-classifier", "--gold", str(GOLD), "--split", "test")
    assert code == 2 and "--split must be one of" in stderr
    source = tmp_path / "t.jsonl"
    source.write_text('{"query": "q", "response": "r", "user_turn": "u"}\n', encoding="utf-8")
    code, _, stderr = run_cli("classify", "--input", str(source), "--out", str(tmp_path / "o"),
                              "--judge-only-uncertain")
    assert code == 2 and "needs --judge" in stderr
