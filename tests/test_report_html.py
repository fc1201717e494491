"""report.html without a browser: one file, no network, data escaped, entries grouped."""

from __future__ import annotations

import json
import re

from synthetic_run import build_samples, write_run

from userturn.report.build import write_report
from userturn.report.html import json_for_script, viewer_data
from userturn.report.run_data import load_run


def test_json_for_script_cannot_close_the_script_block():
    text = json_for_script({"x": "</script><script>alert(1)</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"x": "</script><script>alert(1)</script><!-- & \u2028"}


def test_entries_group_the_user_turns_of_one_assistant_turn(tmp_path):
    run = load_run(write_run(tmp_path / "run", items=2, k=2, temperatures=(0.0, 1.0)))
    data = viewer_data([run])
    # 2 models x 2 datasets x 2 items x 2 perturbations, each with 1 greedy + 2 sampled user turns.
    assert len(data["e"]) == 16 and len(data["t"]) == len(run.samples) == 48
    assert len({e["k"] for e in data["e"]}) == 16
    for index in range(len(data["e"])):
        assert sum(t["e"] == index for t in data["t"]) == 3
    first = data["t"][0]
    sample = next(s for s in run.samples if data["s"][first["u"]] == s["user_turn"])
    assert data["s"][first["p"]] == sample["user_turn_prompt"]


def test_report_html_is_self_contained(tmp_path):
    samples = build_samples(items=1, payloads={"user_turn": "</script><script>window.__pwned=1</script>"})
    run = load_run(write_run(tmp_path / "run", samples))
    files = write_report([run], tmp_path / "out")
    text = files.html.read_text(encoding="utf-8")
    assert text.count("</script>") == 2  # the data block and the viewer script; none from the payload
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", text)
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    assert text.count('<img class="plot"') == 4
    assert (tmp_path / "out" / "tables" / "results.tex").exists()


def test_run_without_rows_or_samples_still_reports(tmp_path):
    run_dir = tmp_path / "empty"
    run_dir.mkdir()
    (run_dir / "summary.json").write_text(json.dumps({"userturn_version": "0.1.0", "config": {}, "rows": []}))
    (run_dir / "samples.jsonl").write_text("")
    files = write_report([load_run(run_dir)], tmp_path / "out")
    assert files.plots == []
    text = files.html.read_text(encoding="utf-8")
    assert "No plots for these runs." in text and '"e":[]' in text
