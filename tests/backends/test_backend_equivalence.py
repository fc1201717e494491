"""Every backend renders the same prompt bytes for the same item and template; greedy texts are compared.

The identical-output share between transformers and llama.cpp is reported, not asserted: the two run the
same GGUF in different precisions (float32 de-quantized vs. Q4_1 kernels), so an early near-tie can flip a
token and change the rest of the text.
"""

from __future__ import annotations

import pytest

from userturn.backends import load_backend
from userturn.backends.common import load_render_tokenizer
from userturn.backends.openai_backend import completion_body
from userturn.backends.vllm_backend import prompt_inputs
from userturn.records import GenerationRequest, Message, SamplingParams
from userturn.templates import open_user_turn, render_assistant_prompt

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def transformers_backend(smol_backend):
    return smol_backend


def rendered(tokenizer, contexts):
    prompts = []
    for context in contexts:
        prompts.append(render_assistant_prompt(tokenizer, context[:1]))
        prompts.append(open_user_turn(tokenizer, context))
        prompts.append(open_user_turn(tokenizer, context, thinking=False))
    return [p.encode("utf-8") for p in prompts]


def test_same_prompt_bytes_on_every_backend(transformers_backend, llamacpp_backend, llama_server, demo_contexts):
    openai = load_backend("openai", "embedded", base_url=llama_server.base_url)
    try:
        vllm_tokenizer = load_render_tokenizer("embedded")[0]  # what the vLLM backend renders with
        reference = rendered(transformers_backend.tokenizer, demo_contexts)
        for tokenizer in (llamacpp_backend.tokenizer, openai.tokenizer, vllm_tokenizer):
            assert rendered(tokenizer, demo_contexts) == reference
    finally:
        openai.close()
    # and what each engine is handed is exactly those bytes
    for prompt in (p.decode("utf-8") for p in reference):
        assert llamacpp_backend.llm.detokenize(llamacpp_backend.encode(prompt), special=True) == prompt.encode()
        assert completion_body("embedded", prompt, SamplingParams(), seed=0, n=1, stop=[])["prompt"] == prompt
        ids = prompt_inputs(vllm_tokenizer, prompt)["prompt_token_ids"]
        assert ids == transformers_backend.tokenizer.encode(prompt, add_special_tokens=False)
        assert ids == llamacpp_backend.encode(prompt)


def test_report_identical_greedy_share_transformers_vs_llamacpp(transformers_backend, llamacpp_backend,
                                                                record_property, capsys):
    from userturn.datasets import load_items

    items = load_items("demo", limit=12)
    tokenizer = transformers_backend.tokenizer
    prompts = [render_assistant_prompt(tokenizer, item.messages) for item in items]
    prompts += [open_user_turn(tokenizer, (*item.messages, Message("assistant", "Sure. The answer is 12.")))
                for item in items]
    requests = [GenerationRequest(p, SamplingParams(temperature=0.0, max_tokens=48)) for p in prompts]
    reference = [c[0].text for c in transformers_backend.generate(requests)]
    other = [c[0].text for c in llamacpp_backend.generate(requests)]
    same = sum(a == b for a, b in zip(reference, other, strict=True))
    prefix = sum(len(_common_prefix(a, b)) / max(1, len(a), len(b)) for a, b in zip(reference, other, strict=True))
    share = same / len(requests)
    record_property("identical_greedy_share", share)
    with capsys.disabled():
        print(f"\n[equivalence] transformers vs llamacpp, greedy, {len(requests)} prompts (12 demo items x "
              f"assistant/user turn, 48 tokens): identical {same}/{len(requests)} = {share:.0%}; "
              f"mean shared prefix {prefix / len(requests):.0%}")
    assert all(isinstance(t, str) for t in other)


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]
