"""The run configuration: defaults, then a config file (TOML or YAML), then command-line flags.

Every field is validated with a message that names the field (and the file, when it came from one).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from userturn.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class RunConfig(BaseModel):
    """Everything that defines a probe run. Field names double as config-file keys."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    model: str = Field("embedded", description="assistant model: 'embedded', a local folder, .gguf or hub id")
    user_model: str | None = Field(None, description="model that writes the user turn (default: same as model)")
    backend: str = "transformers"
    datasets: list[str] = Field(default_factory=lambda: ["demo"])
    data_dir: Path | None = None
    dataset_path: Path | None = None
    fields: dict[str, str] = Field(default_factory=dict)
    cut: Literal["first", "last", "all"] = "last"
    limit: int | None = None
    temperatures: list[float] = Field(default_factory=lambda: [0.0, 0.7, 1.0])
    samples: int = 4
    top_p: float = 1.0
    assistant_temperature: float = 0.0
    assistant_max_new_tokens: int = 256
    user_max_new_tokens: int = 64
    thinking: Literal["auto", "on", "off"] = "auto"
    perturbations: list[str] = Field(default_factory=lambda: ["none"])
    perturbation_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per-perturbation options, e.g. {truncate: {fraction: 0.3}}")
    responses: Path | None = Field(None, description="JSONL of assistant responses (item id + response) used "
                                   "instead of generating them")
    classifier: str = "rules"
    batch_size: int = 0
    seed: int = 0
    device: str = "auto"
    dtype: str = "auto"
    threads: int = 0
    trust_remote_code: bool = False
    backend_options: dict[str, Any] = Field(default_factory=dict)
    out: Path | None = None

    @field_validator("temperatures")
    @classmethod
    def _temperatures(cls, value: list[float]) -> list[float]:
        if not value:
            raise ValueError("give at least one temperature")
        for t in value:
            if not math.isfinite(t) or t < 0:
                raise ValueError(f"temperatures must be finite and >= 0, got {t}")
        return sorted(dict.fromkeys(float(t) for t in value))

    @field_validator("assistant_temperature")
    @classmethod
    def _assistant_temperature(cls, value: float) -> float:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"must be finite and >= 0, got {value}")
        return value

    @field_validator("samples")
    @classmethod
    def _samples(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"must be >= 1, got {value}")
        return value

    @field_validator("top_p")
    @classmethod
    def _top_p(cls, value: float) -> float:
        if not (0 < value <= 1) or not math.isfinite(value):
            raise ValueError(f"must be in (0, 1], got {value}")
        return value

    @field_validator("assistant_max_new_tokens", "user_max_new_tokens")
    @classmethod
    def _max_tokens(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"must be >= 1, got {value}")
        return value

    @field_validator("limit")
    @classmethod
    def _limit(cls, value: int | None) -> int | None:
        if value is not None and value < 0:
            raise ValueError(f"must be >= 0, got {value}")
        return value

    @field_validator("batch_size", "threads")
    @classmethod
    def _non_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"must be >= 0 (0 = automatic), got {value}")
        return value

    @field_validator("datasets", "perturbations")
    @classmethod
    def _non_empty(cls, value: list[str]) -> list[str]:
        value = [v.strip() for v in value if v.strip()]
        if not value:
            raise ValueError("must name at least one")
        return list(dict.fromkeys(value))

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        if self.dataset_path is not None and len(self.datasets) != 1:
            raise ValueError("--dataset-path needs exactly one --dataset")
        return self

    @property
    def effective_user_model(self) -> str:
        return self.user_model or self.model

    def fingerprint(self) -> str:
        """A hash of everything that changes results (not where they are written)."""
        data = self.model_dump(mode="json", exclude={"out", "batch_size", "threads"})
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _format_validation(error: ValidationError, source: str | None) -> str:
    first = error.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "config"
    where = f"{source}: " if source else ""
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown key (see `userturn run --help` for the accepted names)"
    return f"{where}field '{loc}': {message}"


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a TOML (``.toml``) or YAML (``.yaml``/``.yml``) config file into a dict of RunConfig fields.

    Keys may use dashes or underscores (``max-new-tokens`` or ``max_new_tokens``).
    """
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save the config file as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        elif path.suffix in {".yaml", ".yml"}:
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            raise ConfigError(f"{path}: config files must end in .toml, .yaml or .yml")
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"{path}: cannot parse: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a table/mapping of settings")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def build_config(file: Path | None, overrides: dict[str, Any]) -> RunConfig:
    """Defaults, then ``file``, then the non-None ``overrides`` (command-line flags)."""
    values: dict[str, Any] = {}
    if file is not None:
        values.update(read_config_file(file))
        try:
            RunConfig(**values)
        except ValidationError as exc:
            raise ConfigError(_format_validation(exc, str(file))) from None
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return RunConfig(**values)
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, None)) from None
