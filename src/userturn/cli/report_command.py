"""``userturn report`` and ``userturn export``: turn finished run directories into tables, plots, HTML and files
for data frames."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from userturn.cli.app import app
from userturn.errors import ConfigError


def _emit(result: dict, *, as_json: bool, quiet: bool, line: str) -> None:
    if as_json:
        typer.echo(json.dumps(result))
    elif not quiet:
        typer.echo(line)


@app.command("report")
def report(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR...", show_default=False,
                                          help="One or more finished run directories (each with summary.json and "
                                               "samples.jsonl); several are reported together."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Folder for tables/, plots/ and report.html "
                                    "(default: RUN_DIR/report for a single run; required for several)."),
    title: str | None = typer.Option(None, "--title", help="Heading of report.html (default: the run names)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing on success."),
    as_json: bool = typer.Option(False, "--json", help="Print the written files as one JSON object."),
) -> None:
    """Write Markdown and LaTeX tables, PNG/SVG plots and a self-contained report.html with a transcript viewer."""
    from userturn.report.build import write_report
    from userturn.report.run_data import load_runs

    if out is None:
        if len(run_dirs) > 1:
            raise ConfigError("--out is required when reporting several run directories together")
        out = run_dirs[0] / "report"
    runs = load_runs(run_dirs)
    files = write_report(runs, out, title=title)
    result = {"out": str(out), "html": str(files.html), "tables": [str(p) for p in files.tables],
              "plots": [str(p) for p in files.plots], "user_turns": sum(len(r.samples) for r in runs)}
    _emit(result, as_json=as_json, quiet=quiet,
          line=f"wrote {files.html} ({result['user_turns']:,} user turns), {len(files.tables)} table files and "
               f"{len(files.plots)} plot files under {out}")


@app.command("export")
def export(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", show_default=False,
                                   help="A finished run directory (with summary.json and samples.jsonl)."),
    fmt: str = typer.Option("parquet", "--format", "-f", help="File format: csv or parquet."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Folder for the files (default: RUN_DIR/export)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing on success."),
    as_json: bool = typer.Option(False, "--json", help="Print the written files as one JSON object."),
) -> None:
    """Export samples, summary rows, effects and decoupling as CSV or Parquet (one file each)."""
    from userturn.report.export import FORMATS, export_run
    from userturn.report.run_data import load_run

    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ConfigError(f"--format: unknown format '{fmt}'; choose from: {', '.join(FORMATS)}")
    run = load_run(run_dir)
    out = out if out is not None else run_dir / "export"
    written = export_run(run, out, fmt)  # type: ignore[arg-type]
    _emit({"out": str(out), "files": [str(p) for p in written]}, as_json=as_json, quiet=quiet,
          line=f"wrote {', '.join(p.name for p in written)} to {out}")
