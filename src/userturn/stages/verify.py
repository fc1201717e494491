"""Verify stage: score each assistant response with its dataset's verifier."""

from __future__ import annotations

from collections.abc import Sequence

from userturn.datasets import verify
from userturn.records import AssistantTurn, ScoredTurn


def run_verify_stage(turns: Sequence[AssistantTurn]) -> list[ScoredTurn]:
    """Attach a Verdict to every turn; items without a verifier get ``correct=None``, never False.

    The verifier sees the visible response (reasoning blocks removed), as a user would.
    """
    return [ScoredTurn(turn=t, verdict=verify(t.item, t.response_visible)) for t in turns]
