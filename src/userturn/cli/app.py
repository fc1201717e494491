"""The Typer application and the error boundary of the command line.

Command modules import ``app`` (or create a sub-Typer and add it) and are listed in
``COMMAND_MODULES``; adding a command is one new module plus one line here.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer

from userturn.errors import UserturnError

app = typer.Typer(
    name="userturn",
    help="Probe the interaction awareness of chat LLMs: after the assistant answers, can the model write "
    "the next *user* turn?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMAND_MODULES = [
    "userturn.cli.run_command",
    "userturn.cli.classify_command",
    "userturn.cli.report_command",
    "userturn.cli.data_command",
    "userturn.cli.train_command",
]


def _load_commands() -> None:
    for module in COMMAND_MODULES:
        importlib.import_module(module)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app; a :class:`UserturnError` becomes one line on stderr and a non-zero exit."""
    _load_commands()
    debug = "--debug" in (argv if argv is not None else sys.argv[1:]) or os.environ.get("USERTURN_DEBUG") == "1"
    args = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--debug"]
    try:
        app(args=args, standalone_mode=False)
    except UserturnError as exc:
        if debug:
            raise
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("interrupted: finished work is stored; run the same command again to resume", err=True)
        raise SystemExit(130) from None
    except SystemExit:
        raise
    except Exception as exc:  # click usage errors and friends
        import click

        if isinstance(exc, click.exceptions.Exit):
            raise SystemExit(exc.exit_code) from None
        if isinstance(exc, click.ClickException):
            exc.show()
            raise SystemExit(exc.exit_code) from None
        if isinstance(exc, click.exceptions.Abort):
            typer.echo("aborted", err=True)
            raise SystemExit(130) from None
        if debug:
            raise
        typer.echo(f"error: {type(exc).__name__}: {exc} (run with --debug for the traceback)", err=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    # Run as a script, this file is __main__ and not userturn.cli.app, where the commands register.
    from userturn.cli.app import main as _main

    _main()
