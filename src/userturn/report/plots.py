"""Plots of a run's summary, written as PNG and SVG with matplotlib's Agg canvas (no pyplot, no display).

Every plot must read in grayscale: series differ by marker, line style and hatch, not by colour
alone; axes carry labels and units; rates carry their interval bars. SVG output is deterministic
(fixed hash salt, no date) so that re-running a report does not change the files.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from userturn.report.run_data import RunData, confidence_level
from userturn.report.stats import pearson, wilson_interval
from userturn.report.tables import CONTROL, format_temperature, label_names, row_sort_key, tagged_rows

FORMATS: tuple[str, ...] = ("png", "svg")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
LINESTYLES = ("-", "--", "-.", ":")
HATCHES = ("", "///", "...", "xx", "\\\\", "++", "oo", "--", "**", "||")
GRAYS = ("#1a1a1a", "#555555", "#8c8c8c", "#b5b5b5", "#d9d9d9", "#f2f2f2", "#707070", "#a0a0a0", "#3a3a3a", "#c8c8c8")

_RC = {
    "svg.hashsalt": "userturn",
    "svg.fonttype": "none",  # text stays text: smaller files, searchable, selectable
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "hatch.linewidth": 0.6,
    "text.usetex": False,
}


def plain(text: Any) -> str:
    """Text for a matplotlib label, shown literally (``$`` would otherwise start mathtext)."""
    return str(text).replace("$", r"\$")


def series_name(row: dict[str, Any]) -> str:
    """A model's name, with the user model when another model writes the user turns."""
    if row.get("user_model") not in (None, row["model"]):
        return f"{row['model']} (user turns: {row['user_model']})"
    return str(row["model"])


def control_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of the control perturbation (``none``), or of the most common perturbation when there is no control."""
    perturbations = [r["perturbation"] for r in rows]
    if not perturbations:
        return []
    chosen = CONTROL if CONTROL in perturbations else max(set(perturbations), key=perturbations.count)
    return [r for r in rows if r["perturbation"] == chosen]


def _save(figure: Figure, out_dir: Path, stem: str) -> list[Path]:
    FigureCanvasAgg(figure)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in FORMATS:
        path = out_dir / f"{stem}.{fmt}"
        metadata = {"Date": None} if fmt == "svg" else {"Software": "userturn"}
        with matplotlib.rc_context(_RC):
            figure.savefig(path, format=fmt, dpi=150, bbox_inches="tight", metadata=metadata)
        paths.append(path)
    return paths


def _figure(width: float, height: float) -> Figure:
    with matplotlib.rc_context(_RC):
        return Figure(figsize=(width, height), layout="constrained")


# ----------------------------------------------------------------------------------------- plots


def followup_vs_temperature(runs: Sequence[RunData], out_dir: Path) -> list[Path]:
    """Follow-up rate (with interval bars) against user-turn temperature, one line per model, one panel per dataset."""
    rows = control_rows(sorted(tagged_rows(runs), key=row_sort_key))
    if not rows:
        return []
    datasets = sorted({r["dataset"] for r in rows})
    series = list(dict.fromkeys(series_name(r) for r in rows))
    pct = f"{100 * confidence_level(runs):g}%"
    with matplotlib.rc_context(_RC):
        figure = _figure(min(4.2 * len(datasets), 14), 3.6)
        axes = figure.subplots(1, len(datasets), sharey=True, squeeze=False)[0]
        for ax, dataset in zip(axes, datasets, strict=False):
            for index, name in enumerate(series):
                points = sorted((r for r in rows if r["dataset"] == dataset and series_name(r) == name),
                                key=lambda r: r["temperature"])
                if not points:
                    continue
                x = [r["temperature"] for r in points]
                y = [100 * r["follow_up_rate"] for r in points]
                low = [100 * (r["follow_up_rate"] - r["ci_low"]) for r in points]
                high = [100 * (r["ci_high"] - r["follow_up_rate"]) for r in points]
                # Offset overlapping series a little so their interval bars stay readable.
                shift = (index - (len(series) - 1) / 2) * 0.012
                ax.errorbar([v + shift for v in x], y, yerr=[low, high], label=plain(name), color=GRAYS[index % 4],
                            marker=MARKERS[index % len(MARKERS)], linestyle=LINESTYLES[index % len(LINESTYLES)],
                            capsize=3, markersize=5, markerfacecolor="white" if index % 2 else GRAYS[index % 4])
            ax.set_title(plain(f"dataset: {dataset}"))
            ax.set_xlabel("user-turn temperature")
            ax.set_ylim(-2, 102)
        axes[0].set_ylabel(f"follow-up rate (% of user turns, {pct} CI)")
        handles, labels = axes[0].get_legend_handles_labels()
        for ax in axes[1:]:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                if label not in labels:
                    handles.append(handle)
                    labels.append(label)
        figure.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 3), frameon=False)
        perturbation = rows[0]["perturbation"]
        figure.suptitle(plain(f"Follow-up rate vs. temperature (perturbation: {perturbation})"))
    return _save(figure, out_dir, "followup_vs_temperature")


def label_distribution(runs: Sequence[RunData], out_dir: Path) -> list[Path]:
    """Stacked horizontal bars: the label mix per model and temperature, pooled over datasets (control only)."""
    rows = control_rows(tagged_rows(runs))
    if not rows:
        return []
    labels = label_names(runs)
    pooled: dict[tuple[str, float], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows:
        counts = pooled[(series_name(row), float(row["temperature"]))]
        for label, count in row["labels"].items():
            counts[str(label)] += count
    keys = sorted(pooled, key=lambda k: (k[0], k[1]))
    with matplotlib.rc_context(_RC):
        figure = _figure(8, 1.2 + 0.38 * len(keys))
        ax = figure.subplots()
        y_positions = list(range(len(keys)))[::-1]
        lefts = [0.0] * len(keys)
        for index, label in enumerate(labels):
            widths = []
            for key in keys:
                total = sum(pooled[key].values())
                widths.append(100 * pooled[key].get(label, 0) / total if total else 0)
            if not any(widths):
                continue
            ax.barh(y_positions, widths, left=lefts, height=0.7, label=plain(label), color=GRAYS[index % len(GRAYS)],
                    hatch=HATCHES[index % len(HATCHES)], edgecolor="black", linewidth=0.5)
            lefts = [a + b for a, b in zip(lefts, widths, strict=True)]
        ax.set_yticks(y_positions, [plain(f"{name}, T={format_temperature(t)}") for name, t in keys])
        ax.set_xlim(0, 100)
        ax.set_xlabel("share of user turns (%)")
        ax.grid(axis="y", visible=False)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, title="label")
        ax.set_title(plain(f"Label distribution per model and temperature (perturbation: {rows[0]['perturbation']})"))
    return _save(figure, out_dir, "label_distribution")


def decoupling_points(runs: Sequence[RunData]) -> list[dict[str, Any]]:
    """One point per model x dataset (control perturbation, temperatures pooled) with accuracy and follow-up rate.

    Points without a scored accuracy are left out. Intervals are Wilson intervals of the pooled counts.
    """
    level = confidence_level(runs)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in control_rows(tagged_rows(runs)):
        if row.get("accuracy") is not None:
            groups[(series_name(row), row["dataset"])].append(row)
    points = []
    for (name, dataset), group in sorted(groups.items()):
        n = sum(r["n"] for r in group)
        follow_up = sum(r["follow_up"] for r in group)
        scored = max((r.get("accuracy_n") or 0) for r in group)
        weights = sum((r.get("accuracy_n") or 1) for r in group)
        accuracy = sum(r["accuracy"] * (r.get("accuracy_n") or 1) for r in group) / weights
        acc_low, acc_high = wilson_interval(accuracy * scored, scored, level) if scored else (accuracy, accuracy)
        low, high = wilson_interval(follow_up, n, level)
        points.append({"series": name, "dataset": dataset, "accuracy": accuracy, "accuracy_low": acc_low,
                       "accuracy_high": acc_high, "follow_up_rate": follow_up / n if n else 0.0, "ci_low": low,
                       "ci_high": high})
    return points


def accuracy_vs_followup(runs: Sequence[RunData], out_dir: Path) -> list[Path]:
    """The decoupling plot: accuracy against follow-up rate per model x dataset, Pearson r in the title."""
    points = decoupling_points(runs)
    if not points:
        return []
    r = pearson([p["accuracy"] for p in points], [p["follow_up_rate"] for p in points])
    datasets = sorted({p["dataset"] for p in points})
    with matplotlib.rc_context(_RC):
        figure = _figure(6.2, 4.6)
        ax = figure.subplots()
        for index, dataset in enumerate(datasets):
            chosen = [p for p in points if p["dataset"] == dataset]
            x = [100 * p["accuracy"] for p in chosen]
            y = [100 * p["follow_up_rate"] for p in chosen]
            ax.errorbar(x, y,
                        xerr=[[100 * (p["accuracy"] - p["accuracy_low"]) for p in chosen],
                              [100 * (p["accuracy_high"] - p["accuracy"]) for p in chosen]],
                        yerr=[[100 * (p["follow_up_rate"] - p["ci_low"]) for p in chosen],
                              [100 * (p["ci_high"] - p["follow_up_rate"]) for p in chosen]],
                        fmt=MARKERS[index % len(MARKERS)], color=GRAYS[index % 3], ecolor="#888888", capsize=2,
                        markersize=6, label=plain(dataset), linestyle="none")
            for p, px, py in zip(chosen, x, y, strict=True):
                ax.annotate(plain(p["series"]), (px, py), textcoords="offset points", xytext=(5, 4), fontsize=7)
        ax.set_xlim(-2, 102)
        ax.set_ylim(-2, 102)
        ax.set_xlabel("assistant accuracy (%)")
        ax.set_ylabel("follow-up rate (% of user turns)")
        ax.legend(title="dataset", frameon=False, loc="best")
        correlation = "undefined" if r is None else f"{r:+.2f}"
        ax.set_title(f"Accuracy vs. follow-up rate: Pearson r = {correlation} (n = {len(points)} points)")
    return _save(figure, out_dir, "accuracy_vs_followup")


VERDICT_STYLE = {
    "expected": ("o", "black", "expected direction"),
    "opposite": ("X", "black", "opposite direction"),
    "not significant": ("o", "white", "not significant"),
}


def verdict_style(verdict: str) -> tuple[str, str, str]:
    """Marker, face colour and legend text for a verdict; unknown verdicts get a diamond."""
    return VERDICT_STYLE.get(str(verdict).strip().lower().replace("_", " "), ("D", "#999999", str(verdict) or "unknown"))


def perturbation_effects(runs: Sequence[RunData], out_dir: Path) -> list[Path]:
    """A forest plot of perturbation effects with intervals, markers telling expected / opposite / not significant."""
    effects = sorted(tagged_rows(runs, "effects"), key=row_sort_key)
    if not effects:
        return []
    pct = f"{100 * confidence_level(runs):g}%"
    with matplotlib.rc_context(_RC):
        longest = max(len(f"{e['model']}{e['dataset']}{e['perturbation']}") for e in effects)
        figure = _figure(min(6 + 0.07 * longest, 14), 1.3 + 0.3 * len(effects))
        ax = figure.subplots()
        y_positions = list(range(len(effects)))[::-1]
        used: dict[str, Any] = {}
        for y, effect in zip(y_positions, effects, strict=True):
            marker, face, text = verdict_style(effect.get("verdict", ""))
            value = 100 * effect["effect"]
            ax.plot([100 * effect["ci_low"], 100 * effect["ci_high"]], [y, y], color="black", linewidth=1.2)
            handle = ax.plot([value], [y], marker=marker, markerfacecolor=face, markeredgecolor="black",
                             markersize=7, linestyle="none")[0]
            used.setdefault(text, handle)
        ax.axvline(0, color="#555555", linewidth=0.8, linestyle="--")
        ax.set_yticks(y_positions, [
            plain(f"{e['model']} / {e['dataset']} / {e['perturbation']} (expect {e.get('expected', '?')}), "
                  f"T={format_temperature(e['temperature'])}") for e in effects])
        ax.grid(axis="y", visible=False)
        ax.set_xlabel(f"effect on follow-up rate (percentage points, {pct} CI)")
        ax.legend(list(used.values()), [plain(t) for t in used], loc="upper left", bbox_to_anchor=(1.01, 1),
                  frameon=False, title="verdict")
        ax.set_title("Perturbation effects vs. the unperturbed control")
    return _save(figure, out_dir, "perturbation_effects")


PLOTS = (followup_vs_temperature, label_distribution, accuracy_vs_followup, perturbation_effects)


def write_plots(runs: Sequence[RunData], out_dir: Path) -> list[Path]:
    """Write every plot the runs support (PNG and SVG each) into ``out_dir``; returns the written files."""
    return [path for plot in PLOTS for path in plot(runs, out_dir)]
