"""Progress bars per stage (rich), or silence for ``--quiet``/``--json``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from userturn.stages.generation import ProgressHook


class _RateColumn(ProgressColumn):
    """Items/s and generated tokens/s of a stage."""

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0.0
        if elapsed <= 0:
            return Text("")
        tokens = task.fields.get("tokens", 0)
        rate = f"{task.completed / elapsed:.1f}/s"
        if tokens:
            rate += f" {tokens / elapsed:.0f} tok/s"
        return Text(rate, style="cyan")


class Reporter:
    """Shows one progress bar per stage and remembers each stage's wall time and token count."""

    def __init__(self, *, quiet: bool = False, console: Console | None = None) -> None:
        self.quiet = quiet
        self.console = console or Console(stderr=True)
        self.timings: dict[str, dict[str, float]] = {}

    def info(self, message: str) -> None:
        if not self.quiet:
            self.console.print(message)

    @contextmanager
    def stage(self, name: str, total: int, unit: str = "items") -> Iterator[ProgressHook]:
        start = time.perf_counter()
        counts = {"done": 0, "tokens": 0}
        if self.quiet:
            def hook(done: int, tokens: int) -> None:
                counts["done"] += done
                counts["tokens"] += tokens

            yield hook
        else:
            columns = [TextColumn(f"[bold]{name:<12}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                       _RateColumn(), TimeElapsedColumn(), TimeRemainingColumn()]
            with Progress(*columns, console=self.console, transient=False) as bar:
                task = bar.add_task(name, total=total, tokens=0)

                def hook(done: int, tokens: int) -> None:
                    counts["done"] += done
                    counts["tokens"] += tokens
                    bar.update(task, advance=done, tokens=counts["tokens"])

                yield hook
        elapsed = time.perf_counter() - start
        self.timings[name] = {"seconds": round(elapsed, 3), "new_tokens": counts["tokens"],
                              "tokens_per_second": round(counts["tokens"] / elapsed, 2) if elapsed > 0 else 0.0}
