"""Wall time and peak memory of a whole run as the number of items grows.

Each size runs the full probe (assistant turn, verify, user turns, rules classifier, outputs) in a
fresh process on the first N GSM8K test questions, with a small generation budget so that the
largest size fits in minutes. The child reports its wall time per stage and its peak RSS. The cost
per item should stay flat and the peak RSS should not grow with N (beyond the model and one batch).

    python benchmarks/scaling.py --sizes 50,200,800
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import DEFAULT_DATA, REPO, load_average, median, table, write_result


def child(args: argparse.Namespace) -> None:
    """Run the probe on ``args.child`` GSM8K items and print one JSON line with timings and peak RSS."""
    from userturn.config import RunConfig
    from userturn.datasets import DatasetSpec, register_dataset
    from userturn.pipeline import run_probe
    from userturn.records import Item, Message, Verdict
    from userturn.verifiers.numeric import extract_last_number, numbers_equal

    path = args.data_dir / "gsm8k" / "test.jsonl"

    def load(_options):
        with path.open(encoding="utf-8") as handle:
            for index, line in enumerate(handle):
                row = json.loads(line)
                yield Item(id=f"gsm8k-{index}", dataset="scaling_gsm8k", messages=(Message("user", row["question"]),),
                           answer=row["answer"].split("####")[-1].strip())

    def verify(item, response):
        extracted = extract_last_number(response)
        return Verdict(correct=numbers_equal(extracted, item.answer), extracted=extracted)

    register_dataset(DatasetSpec(name="scaling_gsm8k", description="GSM8K test (benchmark)", load=load,
                                 verify=verify))
    config = RunConfig(datasets=["scaling_gsm8k"], limit=args.child, temperatures=[0.0, 1.0], samples=args.samples,
                       assistant_max_new_tokens=args.assistant_tokens, user_max_new_tokens=args.user_tokens,
                       threads=args.threads, out=args.out)
    import userturn.pipeline as pipeline

    after_load: dict[str, float] = {}
    load_backends = pipeline.load_backends

    def load_and_measure(*a, **k):
        backends = load_backends(*a, **k)
        after_load["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return backends

    pipeline.load_backends = load_and_measure
    start = time.perf_counter()
    result = run_probe(config)
    wall = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    stages = sum(t["seconds"] for t in result.timings.values())
    tokens = sum(t["new_tokens"] for t in result.timings.values())
    print(json.dumps({"items": args.child, "wall": wall, "stages_seconds": stages, "timings": result.timings,
                      "new_tokens": tokens, "samples": len(result.labeled), "peak_rss_mb": peak_kb / 1024,
                      "peak_rss_after_load_mb": after_load.get("peak_rss_mb")}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="50,200,800")
    parser.add_argument("--assistant-tokens", type=int, default=32)
    parser.add_argument("--user-tokens", type=int, default=16)
    parser.add_argument("--samples", type=int, default=2, help="samples at temperature 1 (plus one greedy)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each size, alternating the order")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/scaling.json"))
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args)
        return

    load_before = load_average()
    sizes = [int(s) for s in args.sizes.split(",")]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    runs: dict[int, list[dict]] = {n: [] for n in sizes}
    for repeat in range(args.repeats):
        for n in (sizes if repeat % 2 == 0 else list(reversed(sizes))):
            out = Path(tempfile.mkdtemp(prefix="userturn-scaling-")) / "run"
            command = [sys.executable, str(Path(__file__).resolve()), "--child", str(n), "--out", str(out),
                       "--assistant-tokens", str(args.assistant_tokens), "--user-tokens", str(args.user_tokens),
                       "--samples", str(args.samples), "--threads", str(args.threads), "--data-dir",
                       str(args.data_dir)]
            proc = subprocess.run(command, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"size {n} failed:\n{proc.stderr[-3000:]}")
            figures = json.loads(proc.stdout.strip().splitlines()[-1]) | {"load": load_average()}
            runs[n].append(figures)
            print(f"{n:>5} items: {figures['stages_seconds']:8.1f} s in stages, {figures['peak_rss_mb']:7.0f} MB peak "
                  f"(load {figures['load']})", flush=True)
    rows, summary = [], []
    base = sizes[0]
    base_cost = median([r["stages_seconds"] / base for r in runs[base]]) if runs[base] else float("nan")
    base_rss = median([r["peak_rss_mb"] for r in runs[base]])
    for n in sizes:
        cost = median([r["stages_seconds"] / n for r in runs[n]])
        per_token = median([r["stages_seconds"] / max(1, r["new_tokens"]) * 1000 for r in runs[n]])
        rss = median([r["peak_rss_mb"] for r in runs[n]])
        loaded = median([r["peak_rss_after_load_mb"] for r in runs[n]])
        rows.append([n, median([r["stages_seconds"] for r in runs[n]]), cost, cost / base_cost, per_token, loaded,
                     rss, rss / base_rss])
        summary.append({"items": n, "seconds_per_item": cost, "ms_per_token": per_token, "peak_rss_mb": rss})
    print(f"\nGSM8K, {args.assistant_tokens} assistant / {args.user_tokens} user tokens, 1 greedy + {args.samples} "
          f"samples per item, rules classifier, {args.threads} threads, median of {args.repeats}\n")
    print(table(["items", "stage s", "s per item", "vs smallest", "ms per token", "RSS after model load MB",
                 "peak RSS MB", "RSS vs smallest"], rows))
    flat = all(abs(r[3] - 1) <= 0.15 for r in rows)
    rss_ok = all(r[7] <= 1.10 for r in rows)
    print(f"\ncost per item flat within 15%: {'met' if flat else 'MISSED'}; "
          f"peak RSS within +10%: {'met' if rss_ok else 'MISSED'}")
    write_result(args.json, "scaling", {"settings": vars(args) | {"json": str(args.json),
                                                                   "data_dir": str(args.data_dir)},
                                        "runs": {str(k): v for k, v in runs.items()}, "summary": summary},
                 load_before)


if __name__ == "__main__":
    main()
