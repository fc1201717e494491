"""Classifier registry: a classifier labels generated user turns with one of ``records.LABELS``.

Each classifier lives in its own module and registers a factory with :func:`register_classifier`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from userturn.errors import ConfigError
from userturn.records import Label


@dataclass(frozen=True)
class ClassifyInput:
    """What a classifier sees of one user turn.

    Args:
        query: the original user query the assistant answered.
        response: the assistant response shown to the user model (after any perturbation).
        user_turn: the generated next user turn (raw text, stop token excluded).
        finish_reason: ``"length"`` means the turn was cut by the token budget.
        special_tokens: the model's special token strings, so leaked role markers can be spotted.
    """

    query: str
    response: str
    user_turn: str
    finish_reason: str = "stop"
    special_tokens: tuple[str, ...] = ()


@runtime_checkable
class Classifier(Protocol):
    name: str

    def classify(self, inputs: Sequence[ClassifyInput]) -> list[Label]:
        """Label each input, in order. Never returns a silent default: failures are labelled as such."""
        ...


ClassifierFactory = Callable[..., Classifier]
_FACTORIES: dict[str, ClassifierFactory] = {}
_BUILTIN_MODULES: dict[str, str] = {
    "rules": "userturn.classifiers.rules",
    "judge": "userturn.classifiers.judge",
}


def register_classifier(name: str) -> Callable[[ClassifierFactory], ClassifierFactory]:
    def decorate(factory: ClassifierFactory) -> ClassifierFactory:
        _FACTORIES[name] = factory
        return factory

    return decorate


def classifier_names() -> list[str]:
    return sorted(set(_FACTORIES) | set(_BUILTIN_MODULES))


def load_classifier(name: str, **options: Any) -> Classifier:
    if name not in _FACTORIES and name in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[name])
    if name not in _FACTORIES:
        raise ConfigError(f"unknown classifier '{name}'; choose one of: {', '.join(classifier_names())}")
    return _FACTORIES[name](**options)
