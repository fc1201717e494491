"""Dataset registry: a dataset is a loader of :class:`~userturn.records.Item` plus an optional verifier.

Each dataset lives in its own module and registers a :class:`DatasetSpec`. Loaders take
:class:`LoadOptions`, so that real use can read the Hugging Face hub while tests and offline
users point ``data_dir`` at local files in the dataset's original format.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from userturn.errors import ConfigError
from userturn.records import Item, Verdict

DATA_DIR_ENV = "USERTURN_DATA_DIR"


@dataclass(frozen=True)
class LoadOptions:
    """Where and how to load a dataset.

    Args:
        data_dir: a folder with local copies (``gsm8k/test.jsonl``, ...); falls back to ``$USERTURN_DATA_DIR``.
        path: a user's own JSONL file, overriding the dataset's default source.
        fields: field mapping for user files (``query``, ``answer``, ``id``, ``messages``).
        extra: dataset-specific options (e.g. ``cut`` for conversations).
    """

    data_dir: Path | None = None
    path: Path | None = None
    fields: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def resolved_data_dir(self) -> Path | None:
        if self.data_dir is not None:
            return self.data_dir
        env = os.environ.get(DATA_DIR_ENV)
        return Path(env) if env else None


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    description: str
    load: Callable[[LoadOptions], Iterator[Item]]
    verify: Callable[[Item, str], Verdict] | None = None
    verifier_description: str = "none"
    size: int | None = None


_REGISTRY: dict[str, DatasetSpec] = {}
_BUILTIN_MODULES: dict[str, str] = {
    "demo": "userturn.datasets.demo",
    "gsm8k": "userturn.datasets.gsm8k",
    "math500": "userturn.datasets.math500",
    "ifeval": "userturn.datasets.ifeval",
    "mtbench": "userturn.datasets.mtbench",
    "conversations": "userturn.datasets.conversations",
    "mtbench101": "userturn.datasets.mtbench101",
    "jsonl": "userturn.datasets.jsonl",
}


def register_dataset(spec: DatasetSpec) -> DatasetSpec:
    _REGISTRY[spec.name] = spec
    return spec


def dataset_names() -> list[str]:
    return sorted(set(_REGISTRY) | set(_BUILTIN_MODULES))


def get_dataset(name: str) -> DatasetSpec:
    if name not in _REGISTRY and name in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[name])
    if name not in _REGISTRY:
        raise ConfigError(f"unknown dataset '{name}'; choose one of: {', '.join(dataset_names())}")
    return _REGISTRY[name]


def load_items(name: str, options: LoadOptions | None = None, limit: int | None = None) -> list[Item]:
    """Load up to ``limit`` items of dataset ``name`` (all when ``limit`` is None)."""
    spec = get_dataset(name)
    items: list[Item] = []
    for item in spec.load(options or LoadOptions()):
        if limit is not None and len(items) >= limit:
            break
        items.append(item)
    return items


def verify(item: Item, response: str) -> Verdict:
    """Score ``response`` for ``item`` with its dataset's verifier; ``correct`` is None without one."""
    spec = get_dataset(item.dataset)
    if spec.verify is None:
        return Verdict(correct=None)
    return spec.verify(item, response)
