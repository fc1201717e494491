"""Tables for papers and READMEs: one :class:`Table` model, rendered as Markdown, LaTeX (booktabs) or HTML.

Cells are plain text; each renderer escapes them for its own format, so model names such as
``my_model|v2`` or ``<b>`` survive every format literally. Rates are shown in percent with the
interval in brackets (``42.0 [35.1, 49.2]``); effects in percentage points.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from userturn.records import LABELS
from userturn.report.run_data import RunData, confidence_level
from userturn.report.stats import wilson_interval

CONTROL = "none"
Align = Literal["l", "r"]


@dataclass(frozen=True)
class Column:
    header: str
    align: Align = "l"


@dataclass(frozen=True)
class Table:
    """A rectangular table of plain-text cells.

    Args:
        name: file stem (``results`` -> ``results.md``, ``results.tex``) and HTML id.
        title: a short heading.
        caption: one or two sentences saying what the numbers are.
        columns: headers and alignment.
        rows: cells, one tuple per row, as long as ``columns``.
    """

    name: str
    title: str
    caption: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]


# ----------------------------------------------------------------------------------------- ordering


def tagged_rows(runs: Sequence[RunData], attribute: str = "rows") -> list[dict[str, Any]]:
    """The summary records (``rows``, ``effects`` or ``decoupling``) of all runs, each tagged with ``run``."""
    return [{**record, "run": run.name} for run in runs for record in getattr(run, attribute)]


def row_sort_key(row: dict[str, Any]) -> tuple:
    """Model, user model, dataset, the control perturbation first, then temperature ascending."""
    return (str(row.get("model")), str(row.get("user_model", row.get("model"))), str(row.get("dataset")),
            row.get("perturbation") != CONTROL, str(row.get("perturbation")), float(row.get("temperature", 0.0)),
            str(row.get("run", "")))


def _needs_run_column(records: Sequence[dict[str, Any]], keys: Sequence[str]) -> bool:
    seen = set()
    for record in records:
        key = tuple(str(record.get(k)) for k in keys)
        if key in seen:
            return True
        seen.add(key)
    return False


def _needs_user_model_column(records: Sequence[dict[str, Any]]) -> bool:
    return any(r.get("user_model", r.get("model")) != r.get("model") for r in records)


# ----------------------------------------------------------------------------------------- formatting


def format_temperature(value: Any) -> str:
    """``0`` -> ``0``, ``0.7`` -> ``0.7``, ``1.25`` -> ``1.25``."""
    return f"{float(value):g}"


def format_rate(rate: float | None, low: float | None = None, high: float | None = None) -> str:
    """A proportion in percent with one decimal and, when given, its interval: ``42.0 [35.1, 49.2]``."""
    if rate is None:
        return "n/a"
    text = f"{100 * rate:.1f}"
    if low is not None and high is not None:
        text += f" [{100 * low:.1f}, {100 * high:.1f}]"
    return text


def format_effect(effect: float, low: float, high: float) -> str:
    """A difference of proportions in percentage points with a sign: ``+5.2 [-1.0, 11.3]``."""
    return f"{100 * effect:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"


def accuracy_interval(row: dict[str, Any], confidence: float) -> tuple[float | None, float | None, float | None]:
    """The row's accuracy with a Wilson interval over ``accuracy_n`` scored responses (None when unscored)."""
    accuracy = row.get("accuracy")
    n = row.get("accuracy_n") or 0
    if accuracy is None:
        return None, None, None
    if not n:
        return float(accuracy), None, None
    low, high = wilson_interval(accuracy * n, n, confidence)
    return float(accuracy), low, high


# ----------------------------------------------------------------------------------------- tables


def results_table(runs: Sequence[RunData]) -> Table:
    """Accuracy and follow-up rate with intervals per model x dataset x perturbation x temperature."""
    level = confidence_level(runs)
    pct = f"{100 * level:g}%"
    rows = sorted(tagged_rows(runs), key=row_sort_key)
    with_run = _needs_run_column(rows, ("model", "user_model", "dataset", "perturbation", "temperature"))
    with_user = _needs_user_model_column(rows)
    columns = [Column("Model")]
    columns += [Column("User model")] if with_user else []
    columns += [Column("Dataset"), Column("Perturbation"), Column("T", "r"), Column("n", "r"),
                Column(f"Accuracy, % [{pct} CI]", "r"), Column(f"Follow-up rate, % [{pct} CI]", "r")]
    columns += [Column("Run")] if with_run else []
    body = []
    for row in rows:
        accuracy, acc_low, acc_high = accuracy_interval(row, level)
        cells = [str(row["model"])]
        cells += [str(row["user_model"])] if with_user else []
        cells += [str(row["dataset"]), str(row["perturbation"]), format_temperature(row["temperature"]),
                  str(int(row["n"])), format_rate(accuracy, acc_low, acc_high),
                  format_rate(row["follow_up_rate"], row["ci_low"], row["ci_high"])]
        cells += [row["run"]] if with_run else []
        body.append(tuple(cells))
    caption = (f"Assistant accuracy (verifier) and the rate of generated user turns labelled follow-up, "
               f"with {pct} intervals (accuracy: Wilson over the scored responses). "
               f"T is the user-turn sampling temperature; n counts user turns.")
    return Table("results", "Accuracy and follow-up rate", caption, tuple(columns), tuple(body))


def effects_table(runs: Sequence[RunData]) -> Table | None:
    """Perturbation effects on the follow-up rate, or None when no run has any."""
    effects = sorted(tagged_rows(runs, "effects"), key=row_sort_key)
    if not effects:
        return None
    pct = f"{100 * confidence_level(runs):g}%"
    with_run = _needs_run_column(effects, ("model", "dataset", "perturbation", "temperature"))
    columns = [Column("Model"), Column("Dataset"), Column("Perturbation"), Column("T", "r"), Column("Expected"),
               Column(f"Effect, pp [{pct} CI]", "r"), Column("Verdict")]
    columns += [Column("Run")] if with_run else []
    body = []
    for effect in effects:
        cells = [str(effect["model"]), str(effect["dataset"]), str(effect["perturbation"]),
                 format_temperature(effect["temperature"]), str(effect.get("expected", "")),
                 format_effect(effect["effect"], effect["ci_low"], effect["ci_high"]), str(effect.get("verdict", ""))]
        cells += [effect["run"]] if with_run else []
        body.append(tuple(cells))
    caption = (f"Change in follow-up rate caused by each perturbation relative to the unperturbed control, "
               f"in percentage points with {pct} intervals; Expected is the registered direction.")
    return Table("effects", "Perturbation effects", caption, tuple(columns), tuple(body))


def label_names(runs: Sequence[RunData]) -> list[str]:
    """Every canonical label in its canonical order, then any other label the runs used, sorted."""
    seen = {str(label) for run in runs for row in run.rows for label in row["labels"]}
    seen |= {str(s["label"]) for run in runs for s in run.samples}
    return list(LABELS) + sorted(seen - set(LABELS))


def labels_table(runs: Sequence[RunData]) -> Table:
    """Label distribution (percent of user turns) per model x dataset x perturbation x temperature."""
    rows = sorted(tagged_rows(runs), key=row_sort_key)
    labels = label_names(runs)
    with_run = _needs_run_column(rows, ("model", "user_model", "dataset", "perturbation", "temperature"))
    columns = [Column("Model"), Column("Dataset"), Column("Perturbation"), Column("T", "r"), Column("n", "r")]
    columns += [Column(label, "r") for label in labels]
    columns += [Column("Run")] if with_run else []
    body = []
    for row in rows:
        total = sum(row["labels"].values()) or row["n"] or 0
        cells = [str(row["model"]), str(row["dataset"]), str(row["perturbation"]),
                 format_temperature(row["temperature"]), str(int(row["n"]))]
        cells += [f"{100 * row['labels'].get(label, 0) / total:.1f}" if total else "n/a" for label in labels]
        cells += [row["run"]] if with_run else []
        body.append(tuple(cells))
    caption = "Share of generated user turns per label, in percent of the row's user turns (n)."
    return Table("labels", "Label distribution", caption, tuple(columns), tuple(body))


def decoupling_table(runs: Sequence[RunData]) -> Table | None:
    """The summary's decoupling records as they are (columns: the union of their keys), or None."""
    records = tagged_rows(runs, "decoupling")
    if not records:
        return None
    keys: list[str] = []
    for record in records:
        keys += [k for k in record if k not in keys and (k != "run" or len(runs) > 1)]

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.3f}"
        return "" if value is None else str(value)

    columns = tuple(Column(k, "r" if all(isinstance(r.get(k), (int, float)) for r in records) else "l") for k in keys)
    body = tuple(tuple(cell(record.get(k)) for k in keys) for record in records)
    return Table("decoupling", "Accuracy vs. follow-up decoupling", "As computed by the run's summary.", columns, body)


def all_tables(runs: Sequence[RunData]) -> list[Table]:
    """Every table the runs support, in report order."""
    tables = [results_table(runs), effects_table(runs), labels_table(runs), decoupling_table(runs)]
    return [t for t in tables if t is not None]


# ----------------------------------------------------------------------------------------- rendering


def _markdown_cell(text: str) -> str:
    return " ".join(text.split()).replace("\\", "\\\\").replace("|", "\\|") or " "


def to_markdown(table: Table) -> str:
    """A GitHub-flavoured pipe table with a ``###`` heading and the caption in italics below."""
    lines = [f"### {_markdown_cell(table.title)}", ""]
    lines.append("| " + " | ".join(_markdown_cell(c.header) for c in table.columns) + " |")
    lines.append("|" + "|".join("---:" if c.align == "r" else ":---" for c in table.columns) + "|")
    for row in table.rows:
        lines.append("| " + " | ".join(_markdown_cell(cell) for cell in row) + " |")
    lines += ["", f"*{_markdown_cell(table.caption)}*", ""]
    return "\n".join(lines)


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
    "|": r"\textbar{}",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters and fold whitespace (line breaks included) into single spaces."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in " ".join(text.split()))


def to_latex(table: Table) -> str:
    """A ``table`` float with a booktabs ``tabular`` (needs ``\\usepackage{booktabs}``)."""
    spec = "".join(c.align for c in table.columns)
    lines = [
        "% Generated by userturn report; requires \\usepackage{booktabs}",
        "\\begin{table}[t]",
        "\\centering",
        "\\small",
        f"\\caption{{{latex_escape(table.title)}. {latex_escape(table.caption)}}}",
        f"\\label{{tab:userturn-{table.name}}}",
        f"\\begin{{tabular}}{{{spec}}}",
        "\\toprule",
        " & ".join(latex_escape(c.header) for c in table.columns) + " \\\\",
        "\\midrule",
    ]
    lines += [" & ".join(latex_escape(cell) for cell in row) + " \\\\" for row in table.rows]
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]
    return "\n".join(lines)


def to_html(table: Table) -> str:
    """An HTML ``<table>`` with every cell escaped; numeric columns get ``class="num"``."""
    esc = html.escape
    parts = [f'<table class="summary" id="table-{esc(table.name)}">',
             f"<caption><strong>{esc(table.title)}.</strong> {esc(table.caption)}</caption>", "<thead><tr>"]
    parts += [f'<th scope="col"{" class=num" if c.align == "r" else ""}>{esc(c.header)}</th>' for c in table.columns]
    parts.append("</tr></thead><tbody>")
    for row in table.rows:
        cells = "".join(f'<td{" class=num" if c.align == "r" else ""}>{esc(cell)}</td>'
                        for c, cell in zip(table.columns, row, strict=True))
        parts.append(f"<tr>{cells}</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)
