"""Plots: every plot is written as PNG and SVG, readable text, deterministic SVG, literal model names."""

from __future__ import annotations

import pytest
from synthetic_run import build_samples, write_run

from userturn.report.plots import decoupling_points, write_plots
from userturn.report.run_data import load_run
from userturn.report.stats import pearson

STEMS = {"followup_vs_temperature", "label_distribution", "accuracy_vs_followup", "perturbation_effects"}


@pytest.fixture(scope="module")
def plotted(tmp_path_factory):
    base = tmp_path_factory.mktemp("plots")
    run = load_run(write_run(base / "run"))
    return run, write_plots([run], base / "plots"), base


def test_every_plot_is_written_as_png_and_svg(plotted):
    _, paths, _ = plotted
    assert {(p.stem, p.suffix) for p in paths} == {(s, x) for s in STEMS for x in (".png", ".svg")}
    for path in paths:
        head = path.read_bytes()[:8]
        assert head.startswith(b"\x89PNG") if path.suffix == ".png" else b"<?xml" in head


def test_axes_are_labelled_with_units(plotted):
    _, paths, _ = plotted
    svg = {p.stem: p.read_text() for p in paths if p.suffix == ".svg"}
    assert "user-turn temperature" in svg["followup_vs_temperature"]
    assert "follow-up rate (% of user turns" in svg["followup_vs_temperature"]
    assert "share of user turns (%)" in svg["label_distribution"]
    assert "percentage points" in svg["perturbation_effects"]
    assert "not significant" in svg["perturbation_effects"]


def test_scatter_title_carries_the_correlation_of_its_points(plotted):
    run, paths, _ = plotted
    points = decoupling_points([run])
    r = pearson([p["accuracy"] for p in points], [p["follow_up_rate"] for p in points])
    svg = next(p for p in paths if p.name == "accuracy_vs_followup.svg").read_text()
    assert f"Pearson r = {r:+.2f} (n = {len(points)} points)" in svg


def test_svg_is_identical_when_written_twice(plotted):
    run, paths, base = plotted
    again = write_plots([run], base / "again")
    for first, second in zip(sorted(p for p in paths if p.suffix == ".svg"),
                             sorted(p for p in again if p.suffix == ".svg"), strict=True):
        assert first.read_bytes() == second.read_bytes(), first.name


def test_dollar_signs_in_model_names_do_not_become_mathtext(tmp_path):
    samples = build_samples(items=1, payloads={"model": "cost$5$-model_<b>"})
    run = load_run(write_run(tmp_path / "run", samples))
    paths = write_plots([run], tmp_path / "plots")
    svg = next(p for p in paths if p.name == "followup_vs_temperature.svg").read_text()
    assert "cost$5$-model_&lt;b&gt;" in svg
