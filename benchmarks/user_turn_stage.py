"""User-turn stage: prefix sharing vs. re-prefilling every sample vs. a decode-only lower bound.

Contexts are GSM8K questions with their reference solutions as the assistant response, opened for a
user turn with the model's chat template. Every context gets ``k`` samples at each temperature. The
same requests run, alternating, with prefix sharing on (each context prefilled once, its KV cache
copied to all its rows) and off (every row prefilled on its own). The decode-only lower bound is
the sharing run's time minus the time it spent in prefill: what the stage would cost if the
context came for free.

    python benchmarks/user_turn_stage.py --contexts 32 --samples 8 --temperatures 0.7,1.0,1.3
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from _common import (
    DEFAULT_DATA,
    Timer,
    gsm8k_questions,
    load_average,
    median,
    set_threads,
    table,
    write_result,
)


def build_requests(tokenizer, contexts: int, samples: int, temperatures: list[float], max_new_tokens: int,
                   data_dir: Path):
    from userturn.records import GenerationRequest, Message, SamplingParams
    from userturn.templates import open_user_turn

    requests = []
    for index, row in enumerate(gsm8k_questions(contexts, data_dir)):
        response = re.sub(r"<<[^>]*>>", "", row["answer"]).replace("####", "The answer is")
        prompt = open_user_turn(tokenizer, [Message("user", row["question"]), Message("assistant", response)])
        for t in temperatures:
            params = SamplingParams(temperature=t, top_p=1.0, max_tokens=max_new_tokens, n=samples,
                                    seed=1000 * index + int(t * 100))
            requests.append(GenerationRequest(prompt, params))
    return requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contexts", type=int, default=32)
    parser.add_argument("--samples", type=int, default=8, help="samples per temperature (k)")
    parser.add_argument("--temperatures", default="0.7,1.0,1.3")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs of each mode")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch-size", type=int, default=0, help="most rows per batch; 0 = the backend's choice")
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/user_turn_stage.json"))
    args = parser.parse_args()

    load_before = load_average()
    set_threads(args.threads)
    from userturn.backends import load_backend

    backend = load_backend("transformers", args.model, threads=args.threads, dtype=args.dtype,
                           batch_size=args.batch_size)
    temperatures = [float(t) for t in args.temperatures.split(",")]
    requests = build_requests(backend.tokenizer, args.contexts, args.samples, temperatures, args.max_new_tokens,
                              args.data_dir)
    rows_total = sum(r.params.n for r in requests)
    runs: dict[str, list[dict]] = {"shared": [], "none": []}
    outputs: dict[str, list] = {}
    for repeat in range(args.repeats):
        order = ("shared", "none") if repeat % 2 == 0 else ("none", "shared")
        for mode in order:
            backend.share_prefix = mode == "shared"
            backend.reset_stats()
            with Timer() as timer:
                result = backend.generate(requests)
            tokens = sum(len(c.token_ids) for per in result for c in per)
            runs[mode].append({"wall": timer.wall, "cpu": timer.cpu, "tokens": tokens, **backend.stats})
            outputs[mode] = [c.text for per in result for c in per]
            print(f"run {repeat + 1} {mode:<6} {timer.wall:7.2f} s wall {timer.cpu:7.2f} s cpu  "
                  f"prefill {backend.stats['prefill_seconds']:6.2f} s  {tokens} tokens  load {load_average()}",
                  flush=True)
    shared_wall = median([r["wall"] for r in runs["shared"]])
    none_wall = median([r["wall"] for r in runs["none"]])
    bound = median([r["wall"] - r["prefill_seconds"] for r in runs["shared"]])
    tokens = runs["shared"][0]["tokens"]
    identical = sum(a == b for a, b in zip(outputs["shared"], outputs["none"], strict=True)) / max(1, rows_total)
    rows = [
        ["prefix sharing", shared_wall, median([r["cpu"] for r in runs["shared"]]),
         median([r["prefill_seconds"] for r in runs["shared"]]), tokens / shared_wall, 1.0],
        ["no sharing", none_wall, median([r["cpu"] for r in runs["none"]]),
         median([r["prefill_seconds"] for r in runs["none"]]), runs["none"][0]["tokens"] / none_wall,
         none_wall / shared_wall],
        ["decode-only bound", bound, float("nan"), 0.0, tokens / bound, bound / shared_wall],
    ]
    print(f"\n{args.contexts} contexts x {args.samples} samples x {len(temperatures)} temperatures = {rows_total} "
          f"user turns, {args.max_new_tokens} max new tokens, {args.dtype}, {args.threads} threads "
          f"(median of {args.repeats} alternating runs)\n")
    print(table(["mode", "wall s", "cpu s", "prefill s", "tokens/s", "time vs sharing"], rows))
    speedup, over_bound = none_wall / shared_wall, shared_wall / bound
    print(f"\nsharing is {speedup:.2f}x faster than no sharing (target >= 3x: {'met' if speedup >= 3 else 'MISSED'}); "
          f"{over_bound:.2f}x the decode-only bound (target <= 1.3x: {'met' if over_bound <= 1.3 else 'MISSED'}); "
          f"identical outputs with and without sharing: {identical:.1%}")
    write_result(args.json, "user_turn_stage", {
        "settings": vars(args) | {"json": str(args.json), "data_dir": str(args.data_dir), "rows": rows_total},
        "runs": runs, "median_wall": {"shared": shared_wall, "none": none_wall, "decode_only_bound": bound},
        "speedup_vs_no_sharing": speedup, "ratio_to_decode_bound": over_bound, "identical_share": identical,
    }, load_before)


if __name__ == "__main__":
    main()
