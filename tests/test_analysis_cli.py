"""``userturn compare`` on real files, and the errors of the new flags (no model is loaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from userturn.cli.analysis_command import parse_model_spec, slug
from userturn.cli.run_command import parse_perturbation_options
from userturn.errors import ConfigError

SRC = Path(__file__).resolve().parents[1] / "src"


def userturn(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI of this checkout (not whatever copy is installed), run in ``cwd``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "userturn", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


def write_run(folder: Path, model: str, follow: dict[str, int], correct: dict[str, bool]) -> Path:
    folder.mkdir()
    rows = []
    for item, count in follow.items():
        for i in range(2):
            rows.append({"item_id": item, "dataset": "demo", "model": model, "user_model": model,
                         "perturbation": "none", "temperature": 1.0, "sample_index": i,
                         "label": "follow_up" if i < count else "new_query", "correct": correct[item]})
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_compare_prints_paired_differences_of_two_runs(tmp_path):
    a = write_run(tmp_path / "a", "small", {"x": 0, "y": 0, "z": 1}, {"x": False, "y": False, "z": True})
    b = write_run(tmp_path / "b", "big", {"x": 2, "y": 2, "z": 2}, {"x": True, "y": True, "z": True})
    proc = userturn("compare", str(a), str(b), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "(small)" in proc.stdout and "(big)" in proc.stdout
    assert "0.167 → 1.000" in proc.stdout and "+0.833" in proc.stdout
    rows = json.loads(userturn("compare", str(a), str(b), "--json", cwd=tmp_path).stdout)
    assert rows[0]["accuracy_difference"] == pytest.approx(2 / 3)


def test_compare_names_the_bad_line(tmp_path):
    a = write_run(tmp_path / "a", "m", {"x": 0}, {"x": True})
    (tmp_path / "bad.jsonl").write_text('{"item_id": "x"}\n')
    proc = userturn("compare", str(a), str(tmp_path / "bad.jsonl"), cwd=tmp_path)
    assert proc.returncode != 0
    assert "bad.jsonl:1: field 'dataset'" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--perturb", "none,truncate", "--perturb-option", "truncate.fraction=2"], "between 0 and 1"),
        (["--perturb", "none", "--perturb-option", "truncate.fraction=0.3"], "not in --perturb"),
        (["--perturb-option", "fraction=0.3"], "NAME.KEY=VALUE"),
        (["--responses", "missing.jsonl"], "missing.jsonl: file not found"),
    ],
)
def test_bad_perturbation_flags_fail_in_one_line_before_loading_a_model(tmp_path, args, message):
    proc = userturn("run", *args, "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode != 0
    assert message in proc.stderr and proc.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_perturbation_options_parse_to_nested_values():
    assert parse_perturbation_options(["truncate.fraction=0.3", "system_prompt.text=Be curious."]) == {
        "truncate": {"fraction": 0.3}, "system_prompt": {"text": "Be curious."}}


def test_model_specs_carry_run_settings():
    assert parse_model_spec("embedded") == ("embedded", {})
    assert parse_model_spec("embedded@dtype=bfloat16+thinking=on") == ("embedded", {"dtype": "bfloat16",
                                                                                    "thinking": "on"})
    assert slug("org/model@dtype=bfloat16") == "org_model@dtype=bfloat16"
    with pytest.raises(ConfigError):
        parse_model_spec("embedded@out=x")


def test_sweep_validates_every_model_before_running(tmp_path):
    proc = userturn("sweep", "--models", "embedded,embedded@samples=0", "--out", str(tmp_path / "s"), cwd=tmp_path)
    assert proc.returncode != 0 and "samples" in proc.stderr
    assert not (tmp_path / "s").exists()
