"""GSM8K assistant turns: userturn's transformers backend vs. lm-evaluation-harness (``lm-eval``).

Both harnesses run in this one process on the same safetensors copy of the embedded SmolLM2, the
same dtype and torch threads, greedy, the same max new tokens, on the first ``--items`` GSM8K test
questions rendered with the model's chat template (lm-eval: ``--model hf``, ``apply_chat_template``,
a local task file pointing at the GSM8K mirror, ``predict_only``). lm-eval's batch size is first
chosen among ``--lm-eval-batch-sizes`` on a short probe (its fastest); then the two harnesses run
alternately ``--repeats`` times each. Model loading is timed separately and left out of the ratio.

    python benchmarks/vs_lm_eval.py --items 64 --max-new-tokens 256 --repeats 3 --threads 2

Needs ``pip install lm-eval`` (the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
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

TASK = "userturn_bench_gsm8k"


def write_task(folder: Path, data_file: Path, max_new_tokens: int, stop: str) -> None:
    """A local lm-eval task: GSM8K questions as the user message, greedy, stop at end of turn."""
    import json

    text = f"""task: {TASK}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {json.dumps(str(data_file))}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: [{json.dumps(stop)}]
  do_sample: false
  temperature: 0.0
  max_gen_toks: {max_new_tokens}
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""
    (folder / f"{TASK}.yaml").write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs of each harness")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch-size", type=int, default=0, help="userturn: most rows per batch (0 = automatic)")
    parser.add_argument("--lm-eval-batch-sizes", default="8,16,32,64",
                        help="lm-eval batch sizes to probe; the fastest is used (one value skips the probe)")
    parser.add_argument("--probe-items", type=int, default=16, help="items in each lm-eval batch-size probe")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/vs_lm_eval.json"))
    args = parser.parse_args()
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    load_before = load_average()
    set_threads(args.threads)
    try:
        from lm_eval import simple_evaluate
        from lm_eval.models.huggingface import HFLM
        from lm_eval.tasks import TaskManager
    except ImportError:
        raise SystemExit("lm-eval is not installed: pip install lm-eval (see docs/benchmarks.md)") from None
    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    from userturn.backends import load_backend
    from userturn.models import resolve_model
    from userturn.records import GenerationRequest, Message, SamplingParams
    from userturn.templates import render_assistant_prompt

    source = resolve_model("embedded").source
    with Timer() as userturn_load:
        backend = load_backend("transformers", source, threads=args.threads, dtype=args.dtype,
                               batch_size=args.batch_size)
    with Timer() as lm_eval_load:
        lm = HFLM(pretrained=source, dtype=args.dtype, device="cpu", batch_size=1)
    rows = gsm8k_questions(args.items, args.data_dir)
    folder = Path(tempfile.mkdtemp(prefix="userturn-lm-eval-"))
    data_file = folder / "gsm8k_head.jsonl"
    data_file.write_text("".join(__import__("json").dumps(r) + "\n" for r in rows), encoding="utf-8")
    stop = backend.tokenizer.decode(backend.turn_end.token_ids[:1]) if backend.turn_end.token_ids else "\n\n"
    write_task(folder, data_file, args.max_new_tokens, stop)
    manager = TaskManager(include_path=str(folder), include_defaults=False)
    tokenizer = backend.tokenizer
    prompts = [render_assistant_prompt(tokenizer, [Message("user", r["question"])]) for r in rows]

    def run_lm_eval(batch_size: int, limit: int) -> tuple[Timer, list[str], list[str]]:
        lm.batch_size_per_gpu = batch_size
        with Timer() as timer:
            result = simple_evaluate(model=lm, tasks=[TASK], task_manager=manager, limit=limit,
                                     apply_chat_template=True, predict_only=True, log_samples=True,
                                     bootstrap_iters=0, verbosity="ERROR")
        samples = sorted(result["samples"][TASK], key=lambda s: s["doc_id"])
        texts = [s["resps"][0][0] for s in samples]
        sent = [s["arguments"]["gen_args_0"]["arg_0"] if isinstance(s["arguments"], dict) else s["arguments"][0][0]
                for s in samples]
        return timer, texts, sent

    def run_userturn(limit: int) -> tuple[Timer, list[str], int]:
        with Timer() as timer:
            requests = [GenerationRequest(p, SamplingParams(max_tokens=args.max_new_tokens)) for p in prompts[:limit]]
            result = backend.generate(requests)
        return timer, [per[0].text for per in result], sum(len(per[0].token_ids) for per in result)

    sizes = [int(b) for b in args.lm_eval_batch_sizes.split(",")]
    probe: dict[int, float] = {}
    if len(sizes) > 1:
        for size in sizes:
            timer, _, _ = run_lm_eval(size, min(args.probe_items, args.items))
            probe[size] = timer.wall
            print(f"lm-eval batch size {size:>3}: {timer.wall:7.2f} s on {min(args.probe_items, args.items)} items "
                  f"(load {load_average()})", flush=True)
    best = min(probe, key=probe.get) if probe else sizes[0]

    runs: dict[str, list[dict]] = {"userturn": [], "lm-eval": []}
    texts: dict[str, list[str]] = {}
    lm_eval_prompts: list[str] = []
    for repeat in range(args.repeats):
        order = ("userturn", "lm-eval") if repeat % 2 == 0 else ("lm-eval", "userturn")
        for name in order:
            if name == "userturn":
                timer, out, tokens = run_userturn(args.items)
            else:
                timer, out, lm_eval_prompts = run_lm_eval(best, args.items)
                tokens = sum(len(tokenizer.encode(t, add_special_tokens=False)) for t in out)
            texts[name] = out
            runs[name].append({"wall": timer.wall, "cpu": timer.cpu, "tokens": tokens})
            print(f"run {repeat + 1} {name:<9} {timer.wall:8.2f} s wall {timer.cpu:8.2f} s cpu {tokens} tokens "
                  f"(load {load_average()})", flush=True)
    wall = {k: median([r["wall"] for r in v]) for k, v in runs.items()}
    cpu = {k: median([r["cpu"] for r in v]) for k, v in runs.items()}
    tokens = {k: median([r["tokens"] for r in v]) for k, v in runs.items()}
    identical = sum(a.strip() == b.strip() for a, b in zip(texts["userturn"], texts["lm-eval"], strict=True))
    same_prompt = sum(a == b for a, b in zip(prompts, lm_eval_prompts, strict=False))
    ratio = wall["lm-eval"] / wall["userturn"]
    rate = {k: tokens[k] / wall[k] for k in wall}
    print(f"\n{args.items} GSM8K items, greedy, {args.max_new_tokens} max new tokens, {args.dtype}, {args.threads} "
          f"threads; lm-eval batch size {best}; median of {args.repeats} alternating runs\n")
    print(table(["harness", "wall s", "cpu s", "generated tokens", "tokens/s", "model load s"], [
        ["userturn", wall["userturn"], cpu["userturn"], tokens["userturn"], rate["userturn"], userturn_load.wall],
        [f"lm-eval (hf, bs {best})", wall["lm-eval"], cpu["lm-eval"], tokens["lm-eval"], rate["lm-eval"],
         lm_eval_load.wall],
    ]))
    print(f"\nuserturn is {ratio:.2f}x faster (wall-time ratio; target >= 1.5x: {'met' if ratio >= 1.5 else 'MISSED'}), "
          f"{rate['userturn'] / rate['lm-eval']:.2f}x the tokens/s; identical outputs {identical}/{args.items}; "
          f"identical prompts {same_prompt}/{args.items}")
    write_result(args.json, "vs_lm_eval", {
        "settings": vars(args) | {"json": str(args.json), "data_dir": str(args.data_dir), "model": source},
        "lm_eval_batch_probe": probe, "lm_eval_batch_size": best, "runs": runs, "median_wall": wall,
        "median_cpu": cpu, "tokens_per_second": rate, "wall_ratio": ratio, "identical_outputs": identical,
        "identical_prompts": same_prompt, "model_load_seconds": {"userturn": userturn_load.wall,
                                                                 "lm-eval": lm_eval_load.wall},
    }, load_before)


if __name__ == "__main__":
    main()
