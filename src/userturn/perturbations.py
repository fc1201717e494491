"""Perturbations of the ``[query, response]`` context before the user-turn stage.

Each perturbation is registered by name with the direction it is *expected* to move the
follow-up rate, so that the probe is checked rather than assumed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from userturn.errors import ConfigError
from userturn.records import Message, ScoredTurn

Direction = Literal["up", "down", "none"]


@dataclass(frozen=True)
class Perturbation:
    """A named, deterministic transformation of the user-turn context.

    ``apply(scored, population)`` returns the messages the user model sees; ``population`` is
    every scored turn of the same dataset (for perturbations that borrow from other items).
    """

    name: str
    expected: Direction
    description: str
    apply: Callable[[ScoredTurn, Sequence[ScoredTurn]], tuple[Message, ...]]


_REGISTRY: dict[str, Perturbation] = {}


def register_perturbation(p: Perturbation) -> Perturbation:
    _REGISTRY[p.name] = p
    return p


def get_perturbation(name: str) -> Perturbation:
    if name not in _REGISTRY:
        raise ConfigError(f"unknown perturbation '{name}'; choose from: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def perturbation_names() -> list[str]:
    return sorted(_REGISTRY)


def _control(scored: ScoredTurn, population: Sequence[ScoredTurn]) -> tuple[Message, ...]:
    return scored.turn.context


register_perturbation(Perturbation("none", "none", "control: the context as the assistant wrote it", _control))
