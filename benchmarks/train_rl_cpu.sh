#!/usr/bin/env bash
# Benchmark-sized GRPO run on CPU: SmolLM2-135M-Instruct (embedded) writes the next user turn after real
# oasst1 [query, response] pairs; the reward is userturn's rules classifier; then the before/after probe
# on held-out demo items with the same settings as benchmarks/train_sft_cpu.sh.
# Usage: benchmarks/train_rl_cpu.sh [DATA_DIR] [OUT_DIR]   (from the repository root)
set -euo pipefail
DATA=${1:-../shared/data}
OUT=${2:-bench/train}
PY=${PYTHON:-python}
mkdir -p "$OUT"
/usr/bin/time -f "make-data: %e s" $PY -m userturn train make-data --format prompts --out "$OUT/prompts.jsonl" \
    --conversations "$DATA/oasst1_en/conversations.jsonl" --holdout 0 --max-examples 200
/usr/bin/time -f "grpo + before/after probe: %e s" $PY -m userturn train rl --model embedded \
    --prompts "$OUT/prompts.jsonl" --out "$OUT/rl" \
    --max-steps 8 --batch-size 8 --num-generations 4 --max-completion-length 32 --max-prompt-tokens 256 \
    --learning-rate 2e-5 --beta 0.04 --threads 1 \
    --eval-dataset demo --eval-limit 12 --eval-temperatures 0,1.0 --eval-samples 3 \
    --eval-assistant-max-new-tokens 128 --eval-user-max-new-tokens 40
