"""Shared fixtures: the real embedded model and the local dataset mirrors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("USERTURN_DATA_DIR") or REPO.parent / "shared" / "data")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"dataset mirrors not found at {SHARED_DATA} (set USERTURN_DATA_DIR)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def smol_tokenizer():
    """The real SmolLM2-135M-Instruct tokenizer (converted from the embedded GGUF on first use)."""
    from transformers import AutoTokenizer

    from userturn.models import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model("embedded").source)


@pytest.fixture(scope="session")
def smol_backend():
    """The real embedded model on the transformers backend, loaded once per test session."""
    from userturn.backends import load_backend

    backend = load_backend("transformers", "embedded", threads=1)
    yield backend
