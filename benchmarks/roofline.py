"""Decode throughput at several batch sizes next to what the machine allows.

For each dtype and batch size, ``--new-tokens`` tokens are decoded for every row (end-of-turn
tokens ignored, so every row runs the full length) after distinct GSM8K prompts, and only the decode
time counts. Two bounds, both measured here in the same dtype and thread count:

* memory bandwidth: every decode step reads all weights once plus each row's KV cache, at the
  bandwidth of a large tensor copy loop (bytes read + written per second);
* compute: 2 FLOPs per weight per token plus the attention over the context, at the FLOP/s of a
  large square matmul.

    python benchmarks/roofline.py --batches 1,4,16,64 --new-tokens 64 --dtypes float32,bfloat16
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import DEFAULT_DATA, gsm8k_questions, load_average, median, set_threads, table, write_result


def copy_bandwidth(megabytes: int, repeats: int) -> float:
    """Bytes moved (read + write) per second by ``dst.copy_(src)`` on a ``megabytes`` buffer."""
    import torch

    src = torch.ones(megabytes * (1 << 20) // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - start)
    return 2 * src.numel() * 4 / min(times)


def matmul_flops(size: int, dtype: str, repeats: int) -> float:
    """FLOP/s of a ``size`` x ``size`` matmul in ``dtype`` (best of ``repeats``)."""
    import torch

    kind = getattr(torch, dtype)
    a = torch.randn(size, size).to(kind)
    b = torch.randn(size, size).to(kind)
    torch.mm(a, b)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    return 2 * size**3 / min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="1,4,16,64")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--copy-mb", type=int, default=512)
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/roofline.json"))
    args = parser.parse_args()

    load_before = load_average()
    set_threads(args.threads)
    import torch

    from userturn.backends import load_backend
    from userturn.records import GenerationRequest, Message, SamplingParams
    from userturn.templates import render_assistant_prompt

    bandwidth = median([copy_bandwidth(args.copy_mb, 5) for _ in range(args.repeats)])
    print(f"copy bandwidth {bandwidth / 1e9:.1f} GB/s (load {load_average()})", flush=True)
    batches = [int(b) for b in args.batches.split(",")]
    questions = gsm8k_questions(max(batches), args.data_dir)
    rows, figures = [], []
    for dtype in args.dtypes.split(","):
        flops = median([matmul_flops(args.matmul_size, dtype, 5) for _ in range(args.repeats)])
        print(f"{dtype}: matmul {flops / 1e9:.1f} GFLOP/s (load {load_average()})", flush=True)
        backend = load_backend("transformers", "embedded", threads=args.threads, dtype=dtype, batch_size=max(batches))
        backend.stop_ids = torch.tensor([-1], device=backend.device)  # run every row to --new-tokens
        model = backend.model
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        params = sum(p.numel() for p in model.parameters())
        config = model.config
        prompts = [render_assistant_prompt(backend.tokenizer, [Message("user", q["question"])]) for q in questions]
        for batch in batches:
            requests = [GenerationRequest(p, SamplingParams(max_tokens=args.new_tokens)) for p in prompts[:batch]]
            context = sum(len(backend.tokenizer.encode(p, add_special_tokens=False)) for p in prompts[:batch]) / batch
            context += args.new_tokens / 2  # mean context length over the decode steps
            measured = []
            for _ in range(args.repeats):
                backend.reset_stats()
                backend.generate(requests)
                measured.append(backend.stats["decode_rows"] / backend.stats["decode_seconds"])
            rate = median(measured)
            kv_read = batch * context * backend.kv_bytes_per_token
            memory_bound = batch * bandwidth / (weight_bytes + kv_read)
            attention_flops = 4 * config.num_hidden_layers * config.num_attention_heads * config.head_dim * context
            compute_bound = flops / (2 * params + attention_flops)
            rows.append([dtype, batch, rate, memory_bound, rate / memory_bound, compute_bound, rate / compute_bound])
            figures.append({"dtype": dtype, "batch": batch, "tokens_per_second": rate, "runs": measured,
                            "memory_bound": memory_bound, "compute_bound": compute_bound,
                            "weight_bytes": weight_bytes, "kv_bytes_per_step": kv_read, "matmul_flops": flops,
                            "mean_context": context, "load": load_average()})
            print(f"{dtype} batch {batch:>3}: {rate:8.1f} tokens/s (load {load_average()})", flush=True)
        backend.close()
    print(f"\ndecode only, {args.new_tokens} new tokens per row after GSM8K prompts, {args.threads} threads; "
          f"copy bandwidth {bandwidth / 1e9:.1f} GB/s\n")
    print(table(["dtype", "batch", "tokens/s", "memory bound", "of memory bound", "compute bound",
                 "of compute bound"], rows))
    write_result(args.json, "roofline", {"settings": vars(args) | {"json": str(args.json),
                                                                    "data_dir": str(args.data_dir)},
                                         "copy_bandwidth": bandwidth, "rows": figures}, load_before)


if __name__ == "__main__":
    main()
