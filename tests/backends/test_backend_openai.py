"""The OpenAI-compatible backend against a real llama.cpp server on loopback serving the embedded GGUF."""

from __future__ import annotations

import threading
import time

import pytest

from userturn.backends import load_backend
from userturn.errors import BackendError
from userturn.records import GenerationRequest, SamplingParams
from userturn.templates import open_user_turn

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def openai_backend(llama_server):
    backend = load_backend("openai", "embedded", base_url=llama_server.base_url, concurrency=2,
                           backoff_base=0.2, max_backoff=2.0, max_retries=30)
    try:
        yield backend
    finally:
        backend.close()


def user_turn_requests(backend, contexts, params):
    return [GenerationRequest(open_user_turn(backend.tokenizer, c), params) for c in contexts]


def test_greedy_completions_are_repeatable_and_clean(openai_backend, demo_contexts):
    requests = user_turn_requests(openai_backend, demo_contexts[:3], SamplingParams(max_tokens=32))
    first = openai_backend.generate(requests)
    again = openai_backend.generate(requests)
    assert [c[0].text for c in first] == [c[0].text for c in again]
    for (completion,) in first:
        assert "<|im_end|>" not in completion.text and completion.finish_reason in {"stop", "length"}
    assert openai_backend.identity.backend == "openai"


def test_greedy_matches_llama_cpp_in_process(openai_backend, llamacpp_backend, demo_contexts):
    requests = user_turn_requests(openai_backend, demo_contexts, SamplingParams(max_tokens=32))
    served = [c[0].text for c in openai_backend.generate(requests)]
    local = [c[0].text for c in llamacpp_backend.generate(requests)]
    assert served == local


def test_n_samples_follow_their_seeds(openai_backend, demo_contexts):
    prompt = open_user_turn(openai_backend.tokenizer, demo_contexts[0])
    params = SamplingParams(temperature=1.0, top_p=0.95, max_tokens=20, n=3, seed=21)
    # llama.cpp's last bits depend on how much of the prompt it found cached, which can flip a sampled token;
    # a first call leaves the server's cache in the state the compared calls then share.
    openai_backend.generate([GenerationRequest(prompt, params)])
    three = openai_backend.generate([GenerationRequest(prompt, params)])[0]
    again = openai_backend.generate([GenerationRequest(prompt, params)])[0]
    assert len(three) == 3 and [c.text for c in three] == [c.text for c in again]
    assert len({c.text for c in three}) > 1
    alone = openai_backend.generate([GenerationRequest(prompt, SamplingParams(
        temperature=1.0, top_p=0.95, max_tokens=20, n=1, seed=23))])[0][0]
    assert alone.text == three[2].text


def test_wrong_model_name_is_one_clear_error(llama_server):
    with pytest.raises(BackendError, match="does not serve model 'no-such-model'.*serves: embedded"):
        load_backend("openai", "no-such-model", base_url=llama_server.base_url, tokenizer="embedded")


def test_bad_url_is_one_clear_error():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(BackendError, match=f"cannot reach http://127.0.0.1:{port}/v1"):
        load_backend("openai", "embedded", base_url=f"http://127.0.0.1:{port}/v1")


def test_server_killed_and_restarted_mid_run_loses_and_repeats_nothing(openai_backend, llama_server,
                                                                       demo_contexts):
    requests = user_turn_requests(openai_backend, demo_contexts[:2], SamplingParams(max_tokens=16))
    expected = [c[0].text for c in openai_backend.generate(requests)]
    retries_before = openai_backend.retries
    progress: list[int] = []
    first_done = threading.Event()

    def on_progress(done: int, tokens: int) -> None:
        progress.append(done)
        first_done.set()

    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = openai_backend.generate(requests * 3, progress=on_progress)
        except Exception as exc:  # surfaced by the assertion below
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    assert first_done.wait(120)
    llama_server.stop(hard=True)
    time.sleep(1.0)
    llama_server.start()
    worker.join(300)
    assert not worker.is_alive() and "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    assert [c[0].text for c in result] == expected * 3
    assert sorted(progress) == progress and progress[-1] == len(requests) * 3 == len(set(progress))
    assert openai_backend.retries > retries_before
