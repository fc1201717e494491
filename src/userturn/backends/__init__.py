"""Backend registry: each engine lives in its own module and registers a factory here.

Adding an engine is one new file that calls :func:`register_backend` plus one line in
``_BUILTIN_MODULES`` so that it is imported lazily (heavy engines import only when chosen).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from userturn.backends.base import Backend, ModelIdentity, ProgressCallback
from userturn.errors import ConfigError

BackendFactory = Callable[..., Backend]

_FACTORIES: dict[str, BackendFactory] = {}
_BUILTIN_MODULES: dict[str, str] = {
    "transformers": "userturn.backends.transformers_backend",
    "vllm": "userturn.backends.vllm_backend",
    "openai": "userturn.backends.openai_backend",
    "llamacpp": "userturn.backends.llamacpp_backend",
}


def register_backend(name: str) -> Callable[[BackendFactory], BackendFactory]:
    """Decorator: register ``factory(model: str, **options) -> Backend`` under ``name``."""

    def decorate(factory: BackendFactory) -> BackendFactory:
        _FACTORIES[name] = factory
        return factory

    return decorate


def backend_names() -> list[str]:
    return sorted(set(_FACTORIES) | set(_BUILTIN_MODULES))


def load_backend(name: str, model: str, **options: Any) -> Backend:
    """Instantiate backend ``name`` for ``model``; options are backend-specific keyword arguments."""
    if name not in _FACTORIES and name in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[name])
    if name not in _FACTORIES:
        raise ConfigError(f"unknown backend '{name}'; choose one of: {', '.join(backend_names())}")
    return _FACTORIES[name](model, **options)


__all__ = ["Backend", "ModelIdentity", "ProgressCallback", "backend_names", "load_backend", "register_backend"]
