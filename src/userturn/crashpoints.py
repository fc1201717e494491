"""Named crash points, so the reliability tests can kill a real run at an exact place.

The pipeline calls :func:`reached` at a few places (after each committed chunk of generations, between
writing the output files). Outside the tests nothing is set and a call costs one environment lookup.

``USERTURN_TEST_CRASH_AT="user_turn:3"`` kills the process with SIGKILL the 3rd time this process
reaches the point ``user_turn``; ``"user_turn:3:INT"`` sends SIGINT instead (a Ctrl-C at that spot).
``USERTURN_TEST_TRACE=FILE`` appends one line ``<point> <count> <pid>`` per point reached, so a test can
count the completions that killed processes generated and committed.

Points: ``assistant`` and ``user_turn`` (a chunk of completions committed to the store; ``count`` is the
number of completions), ``assistant.uncommitted`` and ``user_turn.uncommitted`` (a chunk generated but not
yet committed), ``classify`` (every turn labelled, nothing written yet), ``samples.jsonl`` and
``summary.json`` (that output file written, the later ones not yet).
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "USERTURN_TEST_CRASH_AT"
TRACE_ENV = "USERTURN_TEST_TRACE"

_seen: dict[str, int] = {}


def reached(point: str, count: int = 1) -> None:
    """Record that ``point`` was reached (``count`` completions at once); crash here if a test asked to."""
    trace = os.environ.get(TRACE_ENV)
    crash = os.environ.get(CRASH_ENV)
    if not trace and not crash:
        return
    if trace:
        with open(trace, "a", encoding="utf-8") as handle:
            handle.write(f"{point} {count} {os.getpid()}\n")
            handle.flush()
            os.fsync(handle.fileno())
    _seen[point] = _seen.get(point, 0) + 1
    if crash:
        name, _, rest = crash.partition(":")
        nth, _, how = rest.partition(":")
        if name == point and str(_seen[point]) == nth:
            os.kill(os.getpid(), signal.SIGINT if how.upper() == "INT" else signal.SIGKILL)
