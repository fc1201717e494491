"""bfloat16 vs float32 on CPU: share of identical greedy outputs on the demo set, and the speed-up.

Greedy assistant turns for every demo item, then the greedy user turn after each float32 response
(so both dtypes continue the same context), in float32 and bfloat16, alternating ``--repeats``
times. bfloat16 matmuls use the CPU's AMX/AVX512-BF16 units where it has them.

    python benchmarks/bf16_numerics.py --max-new-tokens 256 --user-max-new-tokens 64
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import Timer, load_average, median, set_threads, table, write_result


def common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=36, help="demo items")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--user-max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/bf16_numerics.json"))
    args = parser.parse_args()

    load_before = load_average()
    set_threads(args.threads)
    from userturn.backends import load_backend
    from userturn.datasets import load_items
    from userturn.records import GenerationRequest, Message, SamplingParams
    from userturn.templates import open_user_turn, render_assistant_prompt

    backends = {d: load_backend("transformers", "embedded", threads=args.threads, dtype=d)
                for d in ("float32", "bfloat16")}
    tokenizer = backends["float32"].tokenizer
    items = load_items("demo", limit=args.limit)
    prompts = [render_assistant_prompt(tokenizer, item.messages) for item in items]
    assistant = [GenerationRequest(p, SamplingParams(max_tokens=args.max_new_tokens)) for p in prompts]
    outputs: dict[str, dict[str, list]] = {d: {} for d in backends}
    times: dict[str, dict[str, list[float]]] = {d: {"assistant": [], "user": []} for d in backends}
    user_requests = None
    for repeat in range(args.repeats):
        for dtype in (("float32", "bfloat16") if repeat % 2 == 0 else ("bfloat16", "float32")):
            backend = backends[dtype]
            with Timer() as timer:
                result = backend.generate(assistant)
            times[dtype]["assistant"].append(timer.wall)
            outputs[dtype]["assistant"] = [per[0] for per in result]
            if user_requests is None and dtype == "float32":
                contexts = [open_user_turn(tokenizer, [*item.messages, Message("assistant", c.text)])
                            for item, c in zip(items, outputs["float32"]["assistant"], strict=True)]
                user_requests = [GenerationRequest(c, SamplingParams(max_tokens=args.user_max_new_tokens))
                                 for c in contexts]
            print(f"run {repeat + 1} {dtype} assistant {timer.wall:.1f} s (load {load_average()})", flush=True)
        for dtype in backends:
            with Timer() as timer:
                result = backends[dtype].generate(user_requests)
            times[dtype]["user"].append(timer.wall)
            outputs[dtype]["user"] = [per[0] for per in result]
    rows, figures = [], {}
    for stage in ("assistant", "user"):
        pairs = list(zip(outputs["float32"][stage], outputs["bfloat16"][stage], strict=True))
        identical = sum(a.token_ids == b.token_ids for a, b in pairs) / len(pairs)
        prefix = median([common_prefix(a.token_ids, b.token_ids) for a, b in pairs])
        speed = median(times["float32"][stage]) / median(times["bfloat16"][stage])
        rows.append([stage, len(pairs), identical, prefix, median(times["float32"][stage]),
                     median(times["bfloat16"][stage]), speed])
        figures[stage] = {"identical_share": identical, "median_common_prefix_tokens": prefix,
                          "float32_seconds": times["float32"][stage], "bfloat16_seconds": times["bfloat16"][stage]}
    print(f"\ndemo set, greedy, {args.max_new_tokens}/{args.user_max_new_tokens} max new tokens, {args.threads} "
          "threads\n")
    print(table(["stage", "items", "identical greedy outputs", "median common prefix (tokens)", "float32 s",
                 "bfloat16 s", "bf16 speed-up"], rows))
    write_result(args.json, "bf16_numerics", {"settings": vars(args) | {"json": str(args.json)}, **figures},
                 load_before)


if __name__ == "__main__":
    main()
