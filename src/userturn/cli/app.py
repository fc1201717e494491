"""The Typer application and the error boundary of the command line.

Command modules import ``app`` (or create a sub-Typer and add it) and are listed in
``COMMAND_MODULES``; adding a command is one new module plus one line here.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from typing import NoReturn

import typer

from userturn.errors import RunInterrupted, UserturnError

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
    "userturn.cli.analysis_command",
]


def _load_commands() -> None:
    for module in COMMAND_MODULES:
        importlib.import_module(module)


_signals: list[int] = []


class _Stopped(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, raised by userturn's own handler. A subclass on purpose: CPython remembers a bare
    KeyboardInterrupt that escaped code run through its C API (some imports do) and then ends the process by
    SIGINT at exit, even after userturn caught it, so the exit status would not be 130/143."""


def _on_signal(signum: int, frame: object) -> None:
    # Ctrl-C, or SIGTERM for a preempted job: stop, so what is finished is committed and the run says so.
    _signals.append(signum)
    raise _Stopped


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app; a :class:`UserturnError` becomes one line on stderr and a non-zero exit.

    Ctrl-C exits 130 and SIGTERM 143, after saying where the finished work is and how to resume.
    """
    _load_commands()
    try:
        signal.signal(signal.SIGTERM, _on_signal)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_signal)
    except ValueError:  # not the main thread (embedded use): keep the default
        pass
    debug = "--debug" in (argv if argv is not None else sys.argv[1:]) or os.environ.get("USERTURN_DEBUG") == "1"
    args = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--debug"]
    try:
        result = app(args=args, standalone_mode=False)
    except RunInterrupted as exc:
        _interrupted(exc.out)
    except UserturnError as exc:
        if debug:
            raise
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:
        _interrupted(None)
    except SystemExit:
        raise
    except Exception as exc:  # click usage errors and friends
        # Typer ships its own copy of click, so match click's exception classes by name.
        kinds = {cls.__name__ for cls in type(exc).__mro__}
        if "Exit" in kinds:
            raise SystemExit(getattr(exc, "exit_code", 0)) from None
        if "ClickException" in kinds:
            # One line, like every other error: what is wrong, and where the help is.
            ctx = getattr(exc, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if "UsageError" in kinds and ctx is not None else ""
            typer.echo(f"error: {exc.format_message()}{hint}", err=True)  # type: ignore[attr-defined]
            raise SystemExit(getattr(exc, "exit_code", 2)) from None
        if "Abort" in kinds:
            typer.echo("aborted", err=True)
            raise SystemExit(130) from None
        if debug:
            raise
        typer.echo(f"error: {type(exc).__name__}: {exc} (run with --debug for the traceback)", err=True)
        raise SystemExit(1) from None
    if isinstance(result, int) and not isinstance(result, bool) and result != 0:
        if result == 130:  # Typer's answer to a KeyboardInterrupt outside a run (loading, parsing)
            _interrupted(None)
        raise SystemExit(result)


def _interrupted(out: object | None) -> NoReturn:
    where = f" in {out}/store.sqlite" if out is not None else ""
    typer.echo(f"interrupted: finished generations are stored{where}; run the same command again to resume",
               err=True)
    raise SystemExit(143 if _signals and _signals[-1] == signal.SIGTERM else 130)


if __name__ == "__main__":
    # Run as a script, this file is __main__ and not userturn.cli.app, where the commands register.
    from userturn.cli.app import main as _main

    _main()
