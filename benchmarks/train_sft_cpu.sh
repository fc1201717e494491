#!/usr/bin/env bash
# Benchmark-sized post-training run on CPU: SmolLM2-135M-Instruct (embedded), LoRA SFT on real human
# follow-up turns (oasst1 + MT-Bench), then the before/after probe on held-out demo items.
# Usage: benchmarks/train_sft_cpu.sh [DATA_DIR] [OUT_DIR]   (from the repository root)
# Sizes are chosen for a shared 2-core machine (~15 minutes); raise --max-length, --eval-limit and
# --eval-samples on a real machine.
set -euo pipefail
DATA=${1:-../shared/data}
OUT=${2:-bench/train}
PY=${PYTHON:-python}
mkdir -p "$OUT"
/usr/bin/time -f "make-data: %e s" $PY -m userturn train make-data --out "$OUT/sft.jsonl" \
    --conversations "$DATA/oasst1_en/conversations.jsonl" --mt-bench "$DATA/mt_bench/question.jsonl" --holdout 0
/usr/bin/time -f "sft + before/after probe: %e s" $PY -m userturn train sft --model embedded \
    --data "$OUT/sft.jsonl" --out "$OUT/sft" \
    --max-length 128 --skip-longer --batch-size 8 --epochs 1 --learning-rate 3e-4 --threads 1 \
    --eval-dataset demo --eval-limit 12 --eval-temperatures 0,1.0 --eval-samples 3 \
    --eval-assistant-max-new-tokens 128 --eval-user-max-new-tokens 40
