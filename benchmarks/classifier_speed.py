"""Turns per CPU-second of the rules classifier on one core, over the gold set (process time, so that
other load on a shared machine does not distort the figure).

Two figures: every turn with a context the classifier has not seen (cold context cache), and the
probe's real shape, k sampled turns per context (warm cache). Usage:
    PYTHONPATH=src python benchmarks/classifier_speed.py [--repeat 50]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from userturn.classifiers import ClassifyInput
from userturn.classifiers.rules import _context, classify_turn

GOLD = Path(__file__).resolve().parent.parent / "tests" / "data" / "gold_user_turns.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=50, help="passes over the gold set")
    args = parser.parse_args()
    rows = [json.loads(line) for line in GOLD.read_text(encoding="utf-8").splitlines() if line.strip()]
    inputs = [ClassifyInput(r["query"], r["response"], r["user_turn"]) for r in rows]

    # cold: a distinct context per turn (the cache is cleared, and each context is new)
    n, elapsed = 0, 0.0
    for rep in range(args.repeat):
        fresh = [ClassifyInput(i.query + f" #{rep}", i.response + f" #{rep}", i.user_turn) for i in inputs]
        _context.cache_clear()
        start = time.process_time()
        for item in fresh:
            classify_turn(item)
        elapsed += time.process_time() - start
        n += len(fresh)
    print(f"rules classifier, new context per turn: {n / elapsed:,.0f} turns/s ({n} turns)")

    n, start = 0, time.process_time()
    for _ in range(args.repeat):
        for item in inputs:
            classify_turn(item)
        n += len(inputs)
    elapsed = time.process_time() - start
    print(f"rules classifier, contexts shared by samples: {n / elapsed:,.0f} turns/s ({n} turns)")


if __name__ == "__main__":
    main()
