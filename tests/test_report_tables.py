"""Tables: numbers with intervals, label shares, and escaping in Markdown, LaTeX and HTML."""

from __future__ import annotations

import pytest
from synthetic_run import build_samples, write_run

from userturn.records import LABELS
from userturn.report.run_data import load_run, load_runs
from userturn.report.stats import pearson, wilson_interval
from userturn.report.tables import (
    Column,
    Table,
    effects_table,
    labels_table,
    latex_escape,
    results_table,
    to_html,
    to_latex,
    to_markdown,
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return load_run(write_run(tmp_path_factory.mktemp("tables") / "run"))


def test_wilson_interval_contains_the_rate_and_shrinks_with_n():
    low, high = wilson_interval(3, 10)
    assert low < 0.3 < high
    wide = high - low
    low, high = wilson_interval(300, 1000)
    assert low < 0.3 < high and high - low < wide / 5
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_pearson_of_a_line_and_of_constants():
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert pearson([1, 1], [2, 3]) is None and pearson([1], [1]) is None


def test_results_table_has_one_row_per_summary_row_with_intervals(run):
    table = results_table([run])
    assert len(table.rows) == len(run.rows)
    headers = [c.header for c in table.columns]
    rate = headers.index("Follow-up rate, % [95% CI]")
    row = next(r for r in run.rows if r["model"] == "tiny-chat-b" and r["temperature"] == 0.7
               and r["perturbation"] == "none" and r["dataset"] == "demo")
    cells = next(c for c in table.rows if c[:4] == ("tiny-chat-b", "demo", "none", "0.7"))
    assert cells[rate] == f"{100 * row['follow_up_rate']:.1f} [{100 * row['ci_low']:.1f}, {100 * row['ci_high']:.1f}]"
    assert "User model" not in headers and "Run" not in headers


def test_control_perturbation_sorts_first_and_temperatures_ascend(run):
    table = results_table([run])
    first = [c for c in table.rows if c[0] == "tiny-chat-a" and c[1] == "demo"]
    assert [c[2] for c in first[:3]] == ["none"] * 3
    assert [c[3] for c in first[:3]] == ["0", "0.7", "1"]


def test_label_shares_add_up_to_one_hundred(run):
    table = labels_table([run])
    start = [c.header for c in table.columns].index(LABELS[0])
    for cells in table.rows:
        assert sum(float(v) for v in cells[start:start + len(LABELS)]) == pytest.approx(100, abs=0.5)


def test_effects_table_shows_signed_points_and_verdicts(run):
    table = effects_table([run])
    assert table is not None and len(table.rows) == len(run.effects)
    verdicts = {cells[-1] for cells in table.rows}
    assert verdicts <= {"expected", "opposite", "not significant"}
    assert all(cells[5][0] in "+-" for cells in table.rows)


def test_same_model_in_two_runs_gets_a_run_column(tmp_path):
    runs = load_runs([write_run(tmp_path / "a", items=1), write_run(tmp_path / "b", items=1, seed=3)])
    table = results_table(runs)
    assert table.columns[-1].header == "Run"
    assert {cells[-1] for cells in table.rows} == {"a", "b"}


def test_markdown_escapes_pipes_and_line_breaks():
    table = Table("t", "Title", "Caption", (Column("Model"), Column("n", "r")), (("a|b\nc", "3"),))
    text = to_markdown(table)
    assert "| a\\|b c | 3 |" in text
    assert "|:---|---:|" in text


def test_latex_is_booktabs_and_escapes_specials():
    assert latex_escape("50% of $x_1 & {y}#~^\\") == (
        r"50\% of \$x\_1 \& \{y\}\#\textasciitilde{}\textasciicircum{}\textbackslash{}")
    table = Table("t", "Title", "Caption", (Column("Model"), Column("n", "r")), (("m_1", "3"),))
    text = to_latex(table)
    for command in ("\\toprule", "\\midrule", "\\bottomrule", "\\begin{tabular}{lr}", "m\\_1 & 3 \\\\"):
        assert command in text


def test_html_table_escapes_model_names(tmp_path):
    samples = build_samples(items=1, payloads={"model": "<img src=x onerror=alert(1)>"})
    runs = load_runs([write_run(tmp_path / "run", samples)])
    text = to_html(results_table(runs))
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
