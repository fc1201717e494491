"""Tiny local model folders built from the real SmolLM2 tokenizer, for the bad-model and security tests.

The weights are random and a few MB (one layer, width 8): enough for transformers to load them, so
each test reaches exactly the check it is about.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

SMOL_TEMPLATE = "chat_template.jinja"


def smol_folder() -> Path:
    from userturn.models import resolve_model

    return Path(resolve_model("embedded").source)


def build_base(target: Path) -> Path:
    """A loadable tiny Llama with SmolLM2's tokenizer and chat template (safetensors weights)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    source = smol_folder()
    config = LlamaConfig(vocab_size=49152, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                         num_attention_heads=1, num_key_value_heads=1, head_dim=8, max_position_embeddings=512,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(target, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", SMOL_TEMPLATE):
        shutil.copy(source / name, target / name)
    return target


def variant(base: Path, target: Path, *, template: str | None = "keep", eos: bool = True,
            pickle_weights_marker: Path | None = None, auto_map_marker: Path | None = None) -> Path:
    """A copy of ``base`` with one thing changed.

    Args:
        template: ``"keep"`` SmolLM2's template, None for no chat template, else the Jinja text to use.
        eos: False removes every EOS (tokenizer, config, generation config).
        pickle_weights_marker: replace the safetensors weights by a ``pytorch_model.bin`` whose unpickling
            would create this directory (so a test can prove it was never unpickled).
        auto_map_marker: declare custom model code (``auto_map``) whose import would create this directory.
    """
    shutil.copytree(base, target)
    if template is None:
        (target / SMOL_TEMPLATE).unlink()
    elif template != "keep":
        (target / SMOL_TEMPLATE).write_text(template)
    if not eos:
        for name in ("config.json", "generation_config.json", "tokenizer_config.json"):
            path = target / name
            if path.is_file():
                data = json.loads(path.read_text())
                for key in ("eos_token_id", "eos_token", "pad_token_id", "pad_token", "bos_token_id", "bos_token"):
                    data.pop(key, None)
                path.write_text(json.dumps(data))
    if pickle_weights_marker is not None:
        import torch

        (target / "model.safetensors").unlink()
        torch.save({"model.embed_tokens.weight": _Trap(str(pickle_weights_marker))}, target / "pytorch_model.bin")
    if auto_map_marker is not None:
        config = json.loads((target / "config.json").read_text())
        config["auto_map"] = {"AutoConfig": "custom_code.TrapConfig",
                              "AutoModelForCausalLM": "custom_code.TrapModel"}
        config["model_type"] = "userturn_trap"
        (target / "config.json").write_text(json.dumps(config))
        (target / "custom_code.py").write_text(
            f"import os\nos.makedirs({str(auto_map_marker)!r}, exist_ok=True)\n"
            "from transformers import LlamaConfig, LlamaForCausalLM\n"
            "class TrapConfig(LlamaConfig):\n    model_type = 'userturn_trap'\n"
            "class TrapModel(LlamaForCausalLM):\n    config_class = TrapConfig\n"
        )
    return target


class _Trap:
    """Unpickling this calls ``os.makedirs(marker)``: proof that a pickle was loaded."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.makedirs, (self.marker,))
