"""``userturn report`` and ``export`` on a real tiny run of the embedded SmolLM2, through ``python -m userturn``."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import userturn
from userturn.report.html import viewer_data
from userturn.report.run_data import load_run

pytestmark = pytest.mark.slow

TINY = ["--limit", "1", "--temperatures", "0,1.0", "--samples", "1", "--assistant-max-new-tokens", "24",
        "--user-max-new-tokens", "12", "--threads", "2", "--quiet"]


# The subprocess runs elsewhere: point it at the source tree under test, not whatever is installed.
SOURCE_ROOT = str(Path(userturn.__file__).resolve().parents[1])


def run_userturn(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    path = os.pathsep.join(p for p in (SOURCE_ROOT, os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-m", "userturn", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900, env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path})
    assert proc.returncode == 0, f"userturn {' '.join(args)} failed:\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("real")
    run_userturn("run", *TINY, "--out", str(work / "run"), cwd=work)
    return work / "run"


def test_report_of_a_real_run_shows_every_generated_user_turn(real_run):
    result = json.loads(run_userturn("report", str(real_run), "--json", cwd=real_run.parent).stdout)
    html = Path(result["html"])
    assert html == real_run / "report" / "report.html" and result["user_turns"] == 1 * (1 + 1)
    assert (real_run / "report" / "tables" / "results.tex").exists()
    assert {Path(p).name for p in result["plots"]} >= {"followup_vs_temperature.svg", "label_distribution.png"}
    run = load_run(real_run)
    data = viewer_data([run])
    assert sorted(data["s"][t["u"]] for t in data["t"]) == sorted(s["user_turn"] for s in run.samples)
    assert "SmolLM2" in html.read_text(encoding="utf-8")


def test_csv_export_of_a_real_run_matches_its_samples(real_run, tmp_path):
    run_userturn("export", str(real_run), "--format", "csv", "--out", str(tmp_path), "--quiet", cwd=real_run.parent)
    with (tmp_path / "samples.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    run = load_run(real_run)
    assert [r["user_turn"] for r in rows] == [s["user_turn"] for s in run.samples]
    assert [r["user_turn_prompt"] for r in rows] == [s["user_turn_prompt"] for s in run.samples]
