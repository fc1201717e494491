"""The llama.cpp backend on the embedded SmolLM2 GGUF, in process."""

from __future__ import annotations

import pytest

from userturn.models import embedded_gguf_path, file_sha256
from userturn.records import GenerationRequest, SamplingParams
from userturn.templates import open_user_turn

pytestmark = pytest.mark.slow


def test_prompt_tokens_match_the_rendering_tokenizer_without_extra_bos(llamacpp_backend, demo_contexts):
    tokenizer = llamacpp_backend.tokenizer
    im_start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    for context in demo_contexts:
        prompt = open_user_turn(tokenizer, context)
        ids = llamacpp_backend.encode(prompt)
        assert ids == tokenizer.encode(prompt, add_special_tokens=False)
        assert ids[0] == im_start and ids.count(im_start) == prompt.count("<|im_start|>")
        assert llamacpp_backend.llm.detokenize(ids, special=True).decode("utf-8") == prompt


def test_identity_names_the_engine_and_the_file(llamacpp_backend):
    identity = llamacpp_backend.identity
    assert identity.backend == "llamacpp"
    assert identity.revision == file_sha256(embedded_gguf_path())[:16]


def test_greedy_is_repeatable_and_ends_at_the_turn_end(llamacpp_backend, demo_contexts):
    prompts = [open_user_turn(llamacpp_backend.tokenizer, c) for c in demo_contexts[:2]]
    requests = [GenerationRequest(p, SamplingParams(temperature=0.0, max_tokens=40)) for p in prompts]
    first = llamacpp_backend.generate(requests)
    again = llamacpp_backend.generate(list(reversed(requests)))
    assert [c[0].text for c in first] == [c[0].text for c in reversed(again)]
    for (completion,) in first:
        assert "<|im_end|>" not in completion.text and completion.finish_reason in {"stop", "length"}
        if completion.finish_reason == "length":
            assert len(completion.token_ids) == 40


def test_sample_i_depends_only_on_seed_plus_i(llamacpp_backend, demo_contexts):
    prompt = open_user_turn(llamacpp_backend.tokenizer, demo_contexts[0])
    params = SamplingParams(temperature=1.0, top_p=0.95, max_tokens=24, n=3, seed=7)
    three = llamacpp_backend.generate([GenerationRequest(prompt, params)])[0]
    assert len(three) == 3
    alone = llamacpp_backend.generate([GenerationRequest(prompt, SamplingParams(
        temperature=1.0, top_p=0.95, max_tokens=24, n=1, seed=8))])[0][0]
    assert alone.text == three[1].text
    assert len({c.text for c in three}) > 1  # different seeds, different samples


def test_progress_counts_requests_and_tokens(llamacpp_backend, demo_contexts):
    prompt = open_user_turn(llamacpp_backend.tokenizer, demo_contexts[1])
    seen: list[tuple[int, int]] = []
    out = llamacpp_backend.generate([GenerationRequest(prompt, SamplingParams(max_tokens=1))] * 2,
                                    progress=lambda done, tokens: seen.append((done, tokens)))
    assert [done for done, _ in seen] == [1, 2] and seen[-1][1] == sum(len(c[0].token_ids) for c in out)
    assert all(c[0].finish_reason == "length" or c[0].text == "" for c in out)
