"""The self-contained ``report.html``: summary tables, plots and a transcript viewer in one file.

Nothing is fetched: CSS and JavaScript are inlined, plots are ``data:`` images, and a
Content-Security-Policy allows only the report's own script (by hash) and ``data:`` images.
Transcripts travel as JSON inside ``<script type="application/json">`` with ``<``, ``>`` and ``&``
escaped as ``\\u003c``-style sequences, so no model or dataset text can close the block; the viewer
puts every string into the page with ``textContent`` only.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import userturn
from userturn.report.run_data import RunData
from userturn.report.tables import CONTROL, Table, to_html

PLOT_CAPTIONS = {
    "followup_vs_temperature": "Follow-up rate against the user-turn sampling temperature, one line per model, "
                               "with interval bars (control perturbation).",
    "label_distribution": "Label mix of the generated user turns per model and temperature, pooled over datasets "
                          "(control perturbation).",
    "accuracy_vs_followup": "Assistant accuracy against follow-up rate per model and dataset (the decoupling plot); "
                            "the title gives Pearson's r across the points.",
    "perturbation_effects": "Effect of each perturbation on the follow-up rate with its interval; filled circles "
                            "moved in the expected direction, crosses in the opposite one, open circles are not "
                            "significant.",
}


# ----------------------------------------------------------------------------------------- data


class _Pool:
    """Interns values so that a prompt or response shared by many user turns is stored once."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._index: dict[Any, int] = {}

    def add(self, value: Any) -> int:
        index = self._index.get(value)
        if index is None:
            index = self._index[value] = len(self.values)
            self.values.append(value)
        return index


def entry_key(run: str, sample: dict[str, Any]) -> str:
    """A short stable id for an entry (run, dataset, item, model, user model, perturbation): 12 hex digits."""
    parts = [run, sample["dataset"], sample["item_id"], sample["model"], sample["user_model"], sample["perturbation"]]
    return hashlib.sha1(json.dumps([str(p) for p in parts]).encode("utf-8")).hexdigest()[:12]


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def viewer_data(runs: Sequence[RunData]) -> dict[str, Any]:
    """The transcript viewer's data: entries (one per assistant turn and perturbation) and their user turns.

    Args:
        runs: the runs to show; samples that share run, dataset, item, model, user model and
            perturbation form one entry, whose user turns are sorted by temperature and sample index.

    Returns a dict with ``s`` (interned strings), ``v`` (value tables for the filters), ``e``
    (entries) and ``t`` (user turns); fields hold indices into ``s`` or ``v`` (see viewer.js).
    """
    strings = _Pool()
    values = {name: _Pool() for name in ("run", "model", "user_model", "dataset", "perturbation", "label",
                                          "classifier", "finish")}
    entries: dict[str, dict[str, Any]] = {}
    turns: list[tuple[str, dict[str, Any]]] = []
    for run in runs:
        values["run"].add(run.name)
        for sample in run.samples:
            key = entry_key(run.name, sample)
            if key not in entries:
                entry: dict[str, Any] = {
                    "k": key,
                    "r": values["run"].add(run.name),
                    "d": values["dataset"].add(_text(sample["dataset"])),
                    "i": _text(sample["item_id"]),
                    "m": values["model"].add(_text(sample["model"])),
                    "um": values["user_model"].add(_text(sample["user_model"])),
                    "p": values["perturbation"].add(_text(sample["perturbation"])),
                    "q": strings.add(_text(sample["query"])),
                    "a": strings.add(_text(sample["assistant_response"])),
                    "ap": strings.add(_text(sample["assistant_prompt"])),
                    "c": sample["correct"] if isinstance(sample["correct"], bool) else None,
                }
                if sample["assistant_finish_reason"] is not None:
                    entry["af"] = values["finish"].add(_text(sample["assistant_finish_reason"]))
                if sample["extracted_answer"] is not None:
                    entry["x"] = strings.add(_text(sample["extracted_answer"]))
                if sample["reference_user_turn"] is not None:
                    entry["ref"] = strings.add(_text(sample["reference_user_turn"]))
                if isinstance(sample["context"], list):
                    entry["ctx"] = [[_text(m.get("role")) if isinstance(m, dict) else "",
                                     strings.add(_text(m.get("content")) if isinstance(m, dict) else _text(m))]
                                    for m in sample["context"]]
                entries[key] = entry
            turn: dict[str, Any] = {
                "t": float(sample["temperature"]),
                "n": int(sample["sample_index"] or 0),
                "u": strings.add(_text(sample["user_turn"])),
                "l": values["label"].add(_text(sample["label"])),
                "r": strings.add(_text(sample["label_reason"])),
                "cl": values["classifier"].add(_text(sample["classifier"] or "")),
                "p": strings.add(_text(sample["user_turn_prompt"])),
            }
            if sample["seed"] is not None:
                turn["sd"] = str(sample["seed"])  # seeds can exceed 2**53, the largest exact JS integer
            if sample["finish_reason"] is not None:
                turn["f"] = values["finish"].add(_text(sample["finish_reason"]))
            turns.append((key, turn))

    def entry_order(entry: dict[str, Any]) -> tuple:
        perturbation = values["perturbation"].values[entry["p"]]
        return (values["dataset"].values[entry["d"]], entry["i"], values["model"].values[entry["m"]],
                values["user_model"].values[entry["um"]], perturbation != CONTROL, perturbation,
                values["run"].values[entry["r"]])

    ordered = sorted(entries.values(), key=entry_order)
    position = {entry["k"]: index for index, entry in enumerate(ordered)}
    for key, turn in turns:
        turn["e"] = position[key]
    turn_list = sorted((turn for _, turn in turns), key=lambda t: (t["e"], t["t"], t["n"]))
    return {"s": strings.values, "v": {name: pool.values for name, pool in values.items()}, "e": ordered,
            "t": turn_list}


def json_for_script(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&`` or line separators."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                         ("\u2029", "\\u2029")):
        text = text.replace(raw, escaped)
    return text


# ----------------------------------------------------------------------------------------- page


def _asset(name: str) -> str:
    return resources.files("userturn.report").joinpath("assets", name).read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _plot_figure(path: Path) -> str:
    mime = {"svg": "image/svg+xml", "png": "image/png"}[path.suffix.lstrip(".")]
    encoded = base64.b64encode(path.read_bytes()).decode("ascii")
    caption = PLOT_CAPTIONS.get(path.stem, path.stem)
    return (f'<figure class="plot" id="plot-{html.escape(path.stem)}"><img class="plot" alt="{html.escape(caption)}" '
            f'src="data:{mime};base64,{encoded}"><figcaption>{html.escape(caption)}</figcaption></figure>')


def render_report(runs: Sequence[RunData], tables: Sequence[Table], plot_files: Sequence[Path], *,
                  title: str | None = None) -> str:
    """The whole ``report.html`` as a string.

    Args:
        runs: the runs (their samples feed the transcript viewer; no samples gives an empty viewer).
        tables: summary tables to show, in order.
        plot_files: plot images; of each stem the SVG is embedded when present, else the PNG.
        title: page heading; defaults to the run names.
    """
    title = title or "userturn report: " + ", ".join(run.name for run in runs)
    css, script = _asset("viewer.css"), _asset("viewer.js")
    # Built from constants and base64 hashes only, so it goes into the attribute unescaped.
    csp = (f"default-src 'none'; script-src {_csp_hash(script)}; style-src {_csp_hash(css)}; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    chosen: dict[str, Path] = {}
    for path in plot_files:
        if path.suffix in (".svg", ".png") and (path.stem not in chosen or path.suffix == ".svg"):
            chosen[path.stem] = path
    figures = "".join(_plot_figure(path) for path in chosen.values()) or "<p>No plots for these runs.</p>"
    table_html = "".join(f'<div class="table-wrap">{to_html(t)}</div>' for t in tables)
    config = {run.name: {"userturn_version": run.version, "config": run.config} for run in runs}
    config_text = html.escape(json.dumps(config, indent=2, ensure_ascii=False, default=str))
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    run_list = ", ".join(f"{html.escape(run.name)} ({len(run.samples):,} user turns)" for run in runs)
    esc = html.escape
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="referrer" content="no-referrer">
<title>{esc(title)}</title>
<link rel="icon" href="data:,">
<style>{css}</style>
</head>
<body>
<header class="page-head">
<h1>{esc(title)}</h1>
<p class="meta">Runs: {run_list}. Generated {generated} by userturn {esc(userturn.__version__)}.</p>
<nav><a href="#summary">Tables</a> <a href="#plots">Plots</a> <a href="#viewer">Transcripts</a> <a href="#config">Configuration</a></nav>
</header>
<main>
<section id="summary"><h2>Summary tables</h2>{table_html}</section>
<section id="plots"><h2>Plots</h2><div class="plots">{figures}</div></section>
<section id="viewer"><h2>Transcripts</h2>
<noscript><p>The transcript viewer needs JavaScript; the tables and plots above work without it.</p></noscript>
<div id="filters" class="filters"></div>
<div id="status" class="status" aria-live="polite"></div>
<div class="pager" id="pager-top"></div>
<div id="entries"></div>
<div class="pager" id="pager-bottom"></div>
</section>
<section id="config"><h2>Configuration</h2><pre class="config">{config_text}</pre></section>
</main>
<script type="application/json" id="userturn-data">{json_for_script(viewer_data(runs))}</script>
<script>{script}</script>
</body>
</html>
"""


def write_html(runs: Sequence[RunData], tables: Sequence[Table], plot_files: Sequence[Path], path: Path, *,
               title: str | None = None) -> Path:
    """Write :func:`render_report` to ``path`` as UTF-8 (unpaired surrogates in model text become ``?``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(render_report(runs, tables, plot_files, title=title).encode("utf-8", errors="replace"))
    return path
