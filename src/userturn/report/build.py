"""Write a whole report directory: ``tables/``, ``plots/`` and ``report.html``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from userturn.errors import ConfigError
from userturn.report.html import write_html
from userturn.report.run_data import RunData
from userturn.report.tables import all_tables, to_latex, to_markdown


@dataclass(frozen=True)
class ReportFiles:
    """What :func:`write_report` wrote."""

    html: Path
    tables: list[Path] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)

    def all(self) -> list[Path]:
        return [self.html, *self.tables, *self.plots]


def write_report(runs: Sequence[RunData], out_dir: Path, *, title: str | None = None) -> ReportFiles:
    """Write tables (``tables/NAME.md``, ``tables/NAME.tex``, and all Markdown tables in ``tables.md``),
    plots (``plots/NAME.png`` and ``.svg``) and ``report.html`` into ``out_dir``.

    Args:
        runs: one or more loaded runs; several runs are reported together (a Run column appears in the
            tables when their rows would otherwise be indistinguishable).
        out_dir: created when missing; existing files of the same names are replaced.
        title: the HTML page title; defaults to the run names.
    """
    try:
        from userturn.report.plots import write_plots
    except ImportError:
        raise ConfigError("reports need matplotlib: pip install 'userturn[report]'") from None
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = all_tables(runs)
    table_dir = out_dir / "tables"
    table_dir.mkdir(exist_ok=True)
    written: list[Path] = []
    for table in tables:
        for suffix, render in ((".md", to_markdown), (".tex", to_latex)):
            path = table_dir / f"{table.name}{suffix}"
            path.write_text(render(table), encoding="utf-8")
            written.append(path)
    combined = out_dir / "tables.md"
    combined.write_text("\n".join(to_markdown(t) for t in tables), encoding="utf-8")
    written.insert(0, combined)
    plots = write_plots(runs, out_dir / "plots")
    html_path = write_html(runs, tables, plots, out_dir / "report.html", title=title)
    return ReportFiles(html=html_path, tables=written, plots=plots)
