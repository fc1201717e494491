"""The transformers engine: prefix sharing, batch sizing and dropping finished rows change no completion."""

from __future__ import annotations

import pytest

from userturn.records import GenerationRequest, Message, SamplingParams
from userturn.templates import open_user_turn

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def user_turn_requests(smol_tokenizer):
    contexts = [
        [Message("user", "What is 12 times 7?"), Message("assistant", "12 times 7 is 84.")],
        [Message("user", "Name a primary colour."), Message("assistant", "Blue is a primary colour.")],
    ]
    requests = []
    for index, messages in enumerate(contexts):
        prompt = open_user_turn(smol_tokenizer, messages)
        requests.append(GenerationRequest(prompt, SamplingParams(max_tokens=10)))
        requests.append(GenerationRequest(prompt, SamplingParams(temperature=1.0, max_tokens=10, n=3, seed=10 + index)))
        requests.append(GenerationRequest(prompt, SamplingParams(temperature=0.7, top_p=0.9, max_tokens=6, n=2,
                                                                 seed=20 + index)))
    return requests


def _texts(result):
    return [[(c.text, c.finish_reason, c.token_ids) for c in per] for per in result]


def test_prefix_sharing_gives_the_same_completions_as_prefilling_every_row(smol_backend, user_turn_requests):
    smol_backend.share_prefix, smol_backend.batch_size = True, 0
    smol_backend.reset_stats()
    shared = smol_backend.generate(user_turn_requests)
    assert smol_backend.stats["batches"] == 1
    shared_prefill = smol_backend.stats["prefill_tokens"]
    smol_backend.share_prefix = False
    smol_backend.reset_stats()
    try:
        separate = smol_backend.generate(user_turn_requests)
    finally:
        smol_backend.share_prefix = True
    assert _texts(shared) == _texts(separate)
    # 12 rows of 2 prompts: prefilled twice with sharing, 12 times without.
    assert smol_backend.stats["prefill_tokens"] == 6 * shared_prefill
    assert [len(per) for per in shared] == [1, 3, 2, 1, 3, 2]
    assert all(len(c.token_ids) <= 6 for c in shared[2] + shared[5])


def test_completions_do_not_depend_on_the_batch_size(smol_backend, user_turn_requests):
    whole = smol_backend.generate(user_turn_requests)
    smol_backend.batch_size = 1
    try:
        one_by_one = smol_backend.generate(user_turn_requests)
    finally:
        smol_backend.batch_size = 0
    assert _texts(whole) == _texts(one_by_one)
    samples = [c.text for c in whole[1]]
    assert len(set(samples)) > 1, "three samples at temperature 1 with different seeds should differ"


def test_rows_per_batch_follows_the_memory_available_and_the_token_budget(smol_backend):
    b = smol_backend
    per_row = b.kv_bytes_per_token * (300 + 64) + b.activation_bytes_per_token * 300 + 16 * b.vocab_size
    assert b.rows_per_batch(300, 64, available=1 << 40) == 64
    assert b.rows_per_batch(300, 64, available=int(per_row * 10.5 / 0.5)) == 10  # half the free memory
    assert b.rows_per_batch(3000, 64, available=int(per_row * 10.5 / 0.5)) < 10  # longer prompts, fewer rows
    assert smol_backend.rows_per_batch(300, 64, available=0) == 1
    assert b.rows_per_batch(1000, 24, available=1 << 40) == 24576 // 1024  # the KV token budget of one batch
    smol_backend.batch_size = 8
    try:
        assert smol_backend.rows_per_batch(300, 64, available=1 << 40) == 8
    finally:
        smol_backend.batch_size = 0


def test_the_engine_version_is_part_of_the_store_key(smol_backend):
    from dataclasses import replace

    from userturn.backends.transformers_backend import ENGINE_VERSION

    identity = smol_backend.identity
    assert identity.key()["engine"] == ENGINE_VERSION
    assert replace(identity, engine="decode-loop/0").key() != identity.key()
    assert "engine" not in replace(identity, engine="").key()  # backends without their own loop: key unchanged


def test_a_small_tail_joins_the_batch_before_it_within_the_token_slack(smol_backend):
    from userturn.backends.transformers_backend import TAIL_SLACK

    b = smol_backend
    assert b.rows_per_batch(1000, 24, available=1 << 40) == 24576 // 1024
    assert b.rows_per_batch(1000, 24, available=1 << 40, token_slack=TAIL_SLACK) == int(24576 * TAIL_SLACK) // 1024
    assert b.rows_per_batch(300, 64, available=1 << 40, token_slack=TAIL_SLACK) == 64  # the row cap still rules
    assert b.rows_per_batch(1000, 24, available=1 << 20, token_slack=TAIL_SLACK) == 1  # and so does memory
