"""The same GSM8K assistant turns on each local backend: transformers (float32) and llama.cpp (the GGUF).

Both backends get the same prompts (rendered by userturn with the model's chat template), greedy, the same
max new tokens and threads, in one process, alternating ``--repeats`` times. The transformers backend
batches the requests; llama.cpp generates them one after the other from the embedded Q8 GGUF, so the
two differ in weights format as well as engine: the table reports throughput side by side, not a race
on equal terms.

    python benchmarks/backends_gsm8k.py --items 16 --max-new-tokens 128 --repeats 3
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs of each backend")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--backends", default="transformers,llamacpp")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/backends_gsm8k.json"))
    args = parser.parse_args()

    load_before = load_average()
    set_threads(args.threads)
    from userturn.backends import load_backend
    from userturn.records import GenerationRequest, Message, SamplingParams
    from userturn.templates import render_assistant_prompt

    names = args.backends.split(",")
    backends = {}
    loads = {}
    for name in names:
        with Timer() as timer:
            backends[name] = load_backend(name, "embedded", threads=args.threads)
        loads[name] = timer.wall
    tokenizer = backends[names[0]].tokenizer
    prompts = [render_assistant_prompt(tokenizer, [Message("user", r["question"])])
               for r in gsm8k_questions(args.items, args.data_dir)]
    requests = [GenerationRequest(p, SamplingParams(max_tokens=args.max_new_tokens)) for p in prompts]
    runs: dict[str, list[dict]] = {n: [] for n in names}
    texts: dict[str, list[str]] = {}
    for repeat in range(args.repeats):
        for name in names if repeat % 2 == 0 else list(reversed(names)):
            with Timer() as timer:
                result = backends[name].generate(requests)
            tokens = sum(len(c.token_ids) for per in result for c in per)
            texts[name] = [per[0].text for per in result]
            runs[name].append({"wall": timer.wall, "cpu": timer.cpu, "tokens": tokens})
            print(f"run {repeat + 1} {name:<12} {timer.wall:7.2f} s wall  {tokens} tokens  load {load_average()}",
                  flush=True)
    rows = []
    for name in names:
        wall = median([r["wall"] for r in runs[name]])
        tokens = runs[name][0]["tokens"]
        rows.append([name, wall, median([r["cpu"] for r in runs[name]]), tokens, tokens / wall, loads[name]])
    same = sum(a == b for a, b in zip(*(texts[n] for n in names), strict=True)) if len(names) == 2 else None
    print(f"\n{args.items} GSM8K items, greedy, {args.max_new_tokens} max new tokens, {args.threads} threads "
          f"(median of {args.repeats} alternating runs)\n")
    print(table(["backend", "wall s", "cpu s", "generated tokens", "tokens/s", "load s"], rows))
    if same is not None:
        print(f"\nidentical outputs: {same}/{args.items}")
    write_result(args.json, "backends_gsm8k", {
        "settings": vars(args) | {"json": str(args.json), "data_dir": str(args.data_dir)},
        "runs": runs, "identical": same}, load_before)


if __name__ == "__main__":
    main()
