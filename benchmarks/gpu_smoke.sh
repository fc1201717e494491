#!/usr/bin/env bash
# GPU smoke test of the vLLM backend: install vLLM, build a tiny random-weight model locally (no hub
# access), run `userturn run --backend vllm` on the demo set, and print throughput.
#
# Needs a CUDA GPU and a Python environment where userturn is installed (pip install -e .). Run from the
# repository root:   bash benchmarks/gpu_smoke.sh
# Environment: PYTHON (default python3), VLLM_SPEC (default 'vllm'), WORK (default a temporary folder),
# SKIP_INSTALL=1 to use the vLLM already installed.
set -euo pipefail

PYTHON="${PYTHON:-python3}"
WORK="${WORK:-$(mktemp -d -t userturn-gpu-smoke-XXXX)}"
VLLM_SPEC="${VLLM_SPEC:-vllm}"
mkdir -p "$WORK"

if ! nvidia-smi >/dev/null 2>&1; then
  echo "gpu_smoke: no NVIDIA GPU visible (nvidia-smi failed); this script needs one" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

if [[ "${SKIP_INSTALL:-0}" != "1" ]]; then
  # vLLM pins its own torch; install it into this environment as vLLM wants.
  "$PYTHON" -m pip install --quiet "$VLLM_SPEC"
fi
"$PYTHON" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"

echo "== building a tiny random-weight Llama with the embedded SmolLM2 tokenizer in $WORK/tiny"
"$PYTHON" - "$WORK/tiny" <<'PY'
import sys

import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

from userturn.backends.common import load_render_tokenizer

target = sys.argv[1]
tokenizer, _ = load_render_tokenizer("embedded")
torch.manual_seed(0)
config = LlamaConfig(
    vocab_size=len(tokenizer), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
    bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, torch_dtype="bfloat16",
)
model = LlamaForCausalLM(config).to(torch.bfloat16)
model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
model.save_pretrained(target, safe_serialization=True)
tokenizer.save_pretrained(target)
print("saved", target, sum(p.numel() for p in model.parameters()), "parameters")
PY

VLLM_ARGS=(--engine-arg gpu_memory_utilization=0.5 --engine-arg max_model_len=4096)

echo "== userturn run --backend vllm on the demo set (tiny random model)"
start=$(date +%s.%N)
"$PYTHON" -m userturn.cli.app run --backend vllm --model "$WORK/tiny" --dataset demo \
  --temperatures 0,0.7,1.0 --samples 8 --out "$WORK/run-tiny" --quiet "${VLLM_ARGS[@]}"
end=$(date +%s.%N)
echo "run wall time: $(echo "$end - $start" | bc) s (includes engine start-up)"
if [[ -f "$WORK/run-tiny/samples.jsonl" ]]; then
  echo "user turns written: $(wc -l < "$WORK/run-tiny/samples.jsonl")"
fi

echo "== engine throughput (backend.generate, after start-up)"
"$PYTHON" - "$WORK/tiny" <<'PY'
import sys
import time

from userturn.backends import load_backend
from userturn.datasets import load_items
from userturn.records import GenerationRequest, Message, SamplingParams
from userturn.templates import open_user_turn

for model in (sys.argv[1], "embedded"):
    backend = load_backend("vllm", model, gpu_memory_utilization=0.5, max_model_len=4096)
    items = load_items("demo")
    prompts = [open_user_turn(backend.tokenizer, (*item.messages, Message("assistant", "Here is my answer."))) for item in items]
    requests = [GenerationRequest(p, SamplingParams(temperature=t, max_tokens=64, n=1 if t == 0 else 8, seed=i))
                for i, p in enumerate(prompts) for t in (0.0, 0.7, 1.0)]
    backend.generate(requests[:4])  # warm-up
    start = time.perf_counter()
    out = backend.generate(requests)
    seconds = time.perf_counter() - start
    completions = sum(len(c) for c in out)
    tokens = sum(len(x.token_ids) for c in out for x in c)
    print(f"{model}: {len(requests)} requests, {completions} completions, {tokens} tokens in {seconds:.2f} s "
          f"= {tokens / seconds:.0f} tokens/s, {completions / seconds:.1f} completions/s")
    backend.close()
PY
echo "gpu_smoke: done ($WORK)"
