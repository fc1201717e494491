"""Where the real benchmark files for tests live: ``../shared/data`` beside the repo, or ``$USERTURN_DATA_DIR``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(os.environ["USERTURN_DATA_DIR"]) if os.environ.get("USERTURN_DATA_DIR") else (
    Path(__file__).resolve().parents[1].parent / "shared" / "data"
)

needs_shared_data = pytest.mark.skipif(
    not (SHARED_DATA / "gsm8k" / "test.jsonl").is_file(),
    reason=f"real benchmark files not found at {SHARED_DATA} (set USERTURN_DATA_DIR); CI must provide them",
)
