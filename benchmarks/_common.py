"""Shared helpers of the benchmark scripts: machine description, tables, JSON output, GSM8K items.

Every benchmark prints a table and writes the same figures (plus the machine they ran on and the
load average before and after) to a JSON file. Timings are medians of repeated runs.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "src") not in sys.path:  # run from a fresh clone without installing
    sys.path.insert(0, str(REPO / "src"))



def _default_data() -> Path:
    """``$USERTURN_DATA_DIR``, else the first ``shared/data`` next to the clone or one level up."""
    if os.environ.get("USERTURN_DATA_DIR"):
        return Path(os.environ["USERTURN_DATA_DIR"])
    candidates = [REPO.parent / "shared" / "data", REPO.parent.parent / "shared" / "data"]
    return next((c for c in candidates if c.is_dir()), candidates[0])


DEFAULT_DATA = _default_data()


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info: dict[str, Any] = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
                            "platform": platform.platform()}
    try:
        import torch

        info.update(torch=torch.__version__, torch_threads=torch.get_num_threads(),
                    cuda=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    except ImportError:
        pass
    return info


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


class Timer:
    """Wall and CPU seconds of a block: ``with Timer() as t: ...; t.wall, t.cpu``."""

    def __enter__(self) -> Timer:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table; floats get 3 significant decimals."""
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_result(path: Path, name: str, figures: dict[str, Any], load_before: list[float]) -> None:
    """Write ``figures`` with the machine and load averages to ``path`` (JSON)."""
    payload = {"benchmark": name, "machine": machine(), "load_average_before": load_before,
               "load_average_after": load_average(), "time": time.strftime("%Y-%m-%d %H:%M:%S"), **figures}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"\nload average before {load_before}, after {payload['load_average_after']}; wrote {path}")


def gsm8k_questions(limit: int, data_dir: Path = DEFAULT_DATA, offset: int = 0) -> list[dict[str, str]]:
    """The first ``limit`` GSM8K test rows (``question``, ``answer``) from the local mirror."""
    path = data_dir / "gsm8k" / "test.jsonl"
    if not path.is_file():
        raise SystemExit(f"GSM8K not found at {path}: pass --data-dir or set USERTURN_DATA_DIR")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for index, line in enumerate(handle):
            if index < offset:
                continue
            if len(rows) >= limit:
                break
            rows.append(json.loads(line))
    return rows


def set_threads(threads: int) -> None:
    """Pin torch (and the BLAS pools it starts) to ``threads`` threads; 0 keeps the default."""
    if threads > 0:
        import torch

        torch.set_num_threads(threads)
