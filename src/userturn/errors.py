"""One exception type per kind of user mistake.

The CLI prints ``str(error)`` as a single line and exits non-zero; ``--debug`` shows the
traceback. Messages name the file, line and field where that makes sense, and say how to fix it.
"""

from __future__ import annotations


class UserturnError(Exception):
    """Base class: an error the user can fix. Carries an exit code for the CLI."""

    exit_code = 2


class ConfigError(UserturnError):
    """A bad flag or config-file value (wrong type, out of range, unknown key)."""


class DataError(UserturnError):
    """A dataset or input file that cannot be read: missing file, malformed line, missing field."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        where = ""
        if path is not None:
            where = f"{path}"
            if line is not None:
                where += f":{line}"
            if field is not None:
                where += f": field '{field}'"
            where += ": "
        super().__init__(where + message)
        self.path, self.line, self.field = path, line, field


class ModelError(UserturnError):
    """A model that cannot be loaded or used: unknown name, no chat template, no EOS."""


class TemplateError(ModelError):
    """A chat template that cannot open a user turn the way the probe needs."""


class StoreError(UserturnError):
    """A store file that is corrupt, locked or from an incompatible version."""


class BackendError(UserturnError):
    """A backend that failed permanently (bad URL, auth, unknown model on the server)."""


class OutputError(UserturnError):
    """An output directory or file that cannot be written (read-only folder, full disk)."""


class RunInterrupted(BaseException):
    """Ctrl-C (or SIGTERM) during a run, carrying the run directory so the CLI can say how to resume.

    A ``BaseException`` like ``KeyboardInterrupt``, so that no ``except Exception`` swallows it, but not a
    ``KeyboardInterrupt``: Typer would turn that into a bare exit code and lose the directory.
    """

    def __init__(self, out: object) -> None:
        super().__init__(str(out))
        self.out = out
