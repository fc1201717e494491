"""Loading a model for training and writing the trained model so that ``userturn run --model DIR`` loads it.

Output folder of ``userturn train sft|rl``::

    DIR/config.json, model.safetensors, tokenizer files, chat_template.jinja   merged weights
    DIR/adapter/adapter_config.json, adapter_model.safetensors                  the LoRA adapter (vLLM --enable-lora)
    DIR/training.json                                                           options, data, used items, log
    DIR/learning_curves.png                                                     loss (and mean reward for RL)

The adapter is saved through the trainer (which gathers sharded weights under DeepSpeed or FSDP),
then merged into a fresh copy of the base model on the main process only.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from userturn import __version__
from userturn.errors import ConfigError, ModelError
from userturn.models import ResolvedModel, resolve_model
from userturn.output import write_json
from userturn.templates import require_chat_template

TRAINING_RECORD = "training.json"
ADAPTER_DIR = "adapter"


@dataclass(frozen=True)
class LoraOptions:
    """LoRA settings (PEFT). ``target_modules="all-linear"`` adapts every linear layer but the output head."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: str = "all-linear"

    def peft_config(self) -> Any:
        from peft import LoraConfig

        if self.r < 1:
            raise ConfigError(f"--lora-r must be >= 1, got {self.r}")
        return LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout,
                          target_modules=self.target_modules, task_type="CAUSAL_LM")


def load_tokenizer(resolved: ResolvedModel, model_name: str) -> Any:
    """The model's tokenizer, with a pad token (the EOS when it has none) and a chat template."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(resolved.source)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load the tokenizer of '{model_name}': {str(exc).splitlines()[0]}") from exc
    require_chat_template(tokenizer, model_name)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def disable_hub_telemetry() -> None:
    """TRL trainers ping the Hugging Face hub with usage data when built; userturn makes no such calls."""
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    from huggingface_hub import constants

    constants.HF_HUB_DISABLE_TELEMETRY = True  # read at import time, which may already have happened


def load_for_training(model_name: str, threads: int = 0) -> tuple[Any, Any, ResolvedModel]:
    """``(model, tokenizer, resolved)`` in float32 (mixed precision, if any, is the trainer's job).

    Args:
        model_name: anything ``userturn run --model`` takes except a ``.gguf`` file (``embedded`` is
            converted to safetensors first).
        threads: torch CPU threads; 0 keeps torch's default.
    """
    import torch
    from transformers import AutoModelForCausalLM

    disable_hub_telemetry()
    if threads > 0:
        torch.set_num_threads(threads)
    resolved = resolve_model(model_name)
    if resolved.gguf_file:
        raise ModelError(f"'{model_name}' is a GGUF file; training needs a transformers folder or hub id")
    tokenizer = load_tokenizer(resolved, model_name)
    try:
        model = AutoModelForCausalLM.from_pretrained(resolved.source, dtype=torch.float32)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load model '{model_name}': {str(exc).splitlines()[0]}") from exc
    return model, tokenizer, resolved


def bf16_available() -> bool:
    """Mixed precision in bfloat16 where a CUDA device supports it; CPUs train in float32."""
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


def checkpointing_option(config_class: Any, enabled: bool) -> dict[str, bool]:
    """The trainer-config keyword that switches activation (gradient) checkpointing, under its current name.

    TRL turns it on by default; transformers 5 renamed ``gradient_checkpointing`` to
    ``activation_checkpointing`` and warns on the old name.
    """
    import dataclasses

    names = {f.name for f in dataclasses.fields(config_class)}
    key = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
    return {key: enabled}


def merge_adapter(base_source: str, adapter_dir: Path, out: Path, tokenizer: Any) -> None:
    """Load the base model fresh, apply the adapter, merge it, and save safetensors plus tokenizer to ``out``."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_source, dtype=torch.float32)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def save_trained(trainer: Any, tokenizer: Any, resolved: ResolvedModel, out: Path, *, use_lora: bool) -> None:
    """Save the trained model in ``out`` (merged) and ``out/adapter`` (LoRA only); every process must call it."""
    if use_lora:
        adapter = out / ADAPTER_DIR
        trainer.save_model(str(adapter))
        trainer.accelerator.wait_for_everyone()
        if trainer.is_world_process_zero():
            tokenizer.save_pretrained(adapter)
            merge_adapter(resolved.source, adapter, out, tokenizer)
    else:
        trainer.save_model(str(out))
        if trainer.is_world_process_zero():
            tokenizer.save_pretrained(out)
    trainer.accelerator.wait_for_everyone()
    if trainer.is_world_process_zero():
        shutil.rmtree(out / "checkpoints", ignore_errors=True)  # save_strategy="no" leaves it empty


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def inherited_items(model_name: str) -> list[list[str]]:
    """Items a userturn-trained base model was trained on (read from its ``training.json``), else none."""
    record = Path(model_name) / TRAINING_RECORD
    if not record.is_file():
        return []
    try:
        return [list(pair) for pair in json.loads(record.read_text(encoding="utf-8")).get("used_items", [])]
    except (OSError, json.JSONDecodeError):
        return []


def write_training_record(out: Path, *, kind: str, model_name: str, resolved: ResolvedModel, data: Path,
                          used: set[tuple[str, str]], options: dict[str, Any], log_history: list[dict[str, Any]],
                          examples: int) -> dict[str, Any]:
    """Write ``training.json``: what was trained on what, and the trainer's log (the learning curves)."""
    items = sorted({tuple(p) for p in inherited_items(model_name)} | set(used))
    record = {
        "userturn_version": __version__,
        "kind": kind,
        "base_model": model_name,
        "base_source": resolved.source,
        "base_revision": resolved.revision,
        "data": str(data),
        "data_sha256": file_sha256(data),
        "examples": examples,
        "used_items": [list(p) for p in items],
        "options": options,
        "log_history": log_history,
        "finished": _dt.datetime.now().isoformat(timespec="seconds"),
    }
    write_json(out / TRAINING_RECORD, record)
    return record
