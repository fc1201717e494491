"""Request building and answer parsing of the vLLM and OpenAI backends, without vLLM or a server."""

from __future__ import annotations

import importlib.util
import json
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from userturn.backends.common import (
    cut_at_markers,
    finish_completion,
    parse_engine_args,
    stop_strings,
)
from userturn.backends.openai_backend import (
    choice_to_completion,
    completion_body,
    normalize_base_url,
    parse_retry_after,
)
from userturn.backends.vllm_backend import (
    completion_from_output,
    engine_kwargs,
    lora_rank,
    prompt_inputs,
    sampling_kwargs,
)
from userturn.errors import ConfigError, ModelError
from userturn.records import SamplingParams
from userturn.templates import TurnEnd, open_user_turn, turn_end


def test_engine_args_parse_json_values_and_dashes():
    args = parse_engine_args(["enforce-eager=true", "max_num_seqs=256", "kv_cache_dtype=fp8",
                              "hf_overrides={\"a\": 1}", "revision=none", "x=0.5"])
    assert args == {"enforce_eager": True, "max_num_seqs": 256, "kv_cache_dtype": "fp8",
                    "hf_overrides": {"a": 1}, "revision": None, "x": 0.5}


def test_engine_arg_without_equals_is_a_config_error():
    with pytest.raises(ConfigError, match="key=value"):
        parse_engine_args(["enforce_eager"])


def test_finish_drops_stop_token_and_cuts_at_earliest_marker():
    decode = {1: "Hi", 2: " there", 3: "<END>", 4: " more"}

    def join(ids):
        return "".join(decode[i] for i in ids)

    stopped = finish_completion([1, 2, 9, 4], stop_ids=[9], markers=[], decode=join)
    assert (stopped.text, stopped.token_ids, stopped.finish_reason) == ("Hi there", (1, 2), "stop")
    cut = finish_completion([1, 3, 2], stop_ids=[9], markers=[" there", "<END>"], decode=join)
    assert (cut.text, cut.finish_reason) == ("Hi", "stop")
    ran_out = finish_completion([1, 2], stop_ids=[9], markers=["<END>"], decode=join)
    assert (ran_out.text, ran_out.finish_reason) == ("Hi there", "length")
    assert cut_at_markers("abc", ["", "z"]) == ("abc", False)


def test_stop_strings_include_the_end_of_turn_token_text(embedded_tokenizer):
    turn = turn_end(embedded_tokenizer)
    markers = stop_strings(turn, embedded_tokenizer, ["\nUser:"])
    assert markers[0] == "\nUser:"
    assert "<|im_end|>" in markers


def test_vllm_sampling_params_carry_n_seed_and_stops():
    turn = TurnEnd(token_ids=(2, 0), strings=("</turn>",))
    sampled = sampling_kwargs(SamplingParams(temperature=0.7, top_p=0.9, max_tokens=64, n=5, seed=11,
                                             stop=("\n\n",)), turn)
    assert sampled["n"] == 5 and sampled["seed"] == 11  # vLLM seeds sample i with seed + i
    assert (sampled["temperature"], sampled["top_p"], sampled["max_tokens"]) == (0.7, 0.9, 64)
    assert sampled["stop"] == ["\n\n", "</turn>"] and sampled["stop_token_ids"] == [2, 0]
    assert sampled["skip_special_tokens"] is False and sampled["include_stop_str_in_output"] is False
    greedy = sampling_kwargs(SamplingParams(temperature=0.0, top_p=0.5), turn)
    assert (greedy["temperature"], greedy["top_p"], greedy["n"]) == (0.0, 1.0, 1)


def test_vllm_engine_kwargs_turn_on_prefix_caching_and_let_engine_args_win():
    kwargs = engine_kwargs("/m", "/m", tensor_parallel_size=8, pipeline_parallel_size=2,
                           gpu_memory_utilization=0.85, max_model_len=8192, lora_rank=16,
                           distributed_executor_backend="ray",
                           engine_args={"enforce_eager": True, "max_model_len": 4096})
    assert kwargs["enable_prefix_caching"] is True
    assert (kwargs["tensor_parallel_size"], kwargs["pipeline_parallel_size"]) == (8, 2)
    assert kwargs["max_model_len"] == 4096 and kwargs["enforce_eager"] is True
    assert kwargs["enable_lora"] is True and kwargs["max_lora_rank"] == 16
    assert kwargs["distributed_executor_backend"] == "ray"
    assert "data_parallel_size" not in engine_kwargs("/m", "/m")


@pytest.mark.parametrize("bad", [{"tensor_parallel_size": 0}, {"gpu_memory_utilization": 1.5},
                                 {"data_parallel_size": 2}])
def test_vllm_engine_kwargs_refuse_impossible_settings(bad):
    with pytest.raises(ConfigError):
        engine_kwargs("/m", "/m", **bad)


def test_vllm_data_parallel_passes_under_external_launcher():
    kwargs = engine_kwargs("/m", "/m", data_parallel_size=2, distributed_executor_backend="external_launcher")
    assert kwargs["data_parallel_size"] == 2


def test_vllm_prompt_is_token_ids_without_a_second_bos(embedded_tokenizer, demo_contexts):
    for convo in demo_contexts:
        prompt = open_user_turn(embedded_tokenizer, convo)
        ids = prompt_inputs(embedded_tokenizer, prompt)["prompt_token_ids"]
        assert ids == embedded_tokenizer.encode(prompt, add_special_tokens=False)
        assert embedded_tokenizer.decode(ids, skip_special_tokens=False) == prompt
        im_start = embedded_tokenizer.convert_tokens_to_ids("<|im_start|>")
        assert ids.count(im_start) == prompt.count("<|im_start|>")  # parsed as special, one id each


def test_vllm_output_becomes_completion_like_transformers(embedded_tokenizer):
    turn = turn_end(embedded_tokenizer)
    ids = embedded_tokenizer.encode("Thanks, that helps!", add_special_tokens=False)
    eos = turn.token_ids[-1]
    done = completion_from_output([*ids, eos], "stop", turn=turn, stop=(), tokenizer=embedded_tokenizer)
    assert (done.text, done.finish_reason, done.token_ids) == ("Thanks, that helps!", "stop", tuple(ids))
    long = completion_from_output(ids, "length", turn=turn, stop=(), tokenizer=embedded_tokenizer)
    assert long.finish_reason == "length"
    by_string = completion_from_output(ids, "stop", turn=turn, stop=(", that",), tokenizer=embedded_tokenizer)
    assert (by_string.text, by_string.finish_reason) == ("Thanks", "stop")


def test_lora_rank_read_from_adapter_config(tmp_path):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 32, "lora_alpha": 64}))
    assert lora_rank(tmp_path) == 32
    with pytest.raises(ModelError, match="adapter_config.json"):
        lora_rank(tmp_path / "missing")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_vllm_backend_without_vllm_says_how_to_install():
    from userturn.backends import load_backend

    with pytest.raises(ConfigError, match=r"userturn\[vllm\]"):
        load_backend("vllm", "embedded")


def test_openai_body_sends_the_prompt_verbatim_with_neutral_sampling():
    prompt = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>user\n"
    body = completion_body("m", prompt, SamplingParams(temperature=0.0, top_p=0.3, max_tokens=32), seed=5, n=1,
                           stop=["<|im_end|>"], extra={"top_k": 20, "repeat_penalty": None})
    assert body["prompt"] == prompt and json.loads(json.dumps(body))["prompt"] == prompt
    assert (body["temperature"], body["top_p"], body["seed"], body["n"]) == (0.0, 1.0, 5, 1)
    assert body["top_k"] == 20 and "repeat_penalty" not in body and body["min_p"] == 0.0
    assert "messages" not in body


def test_retry_after_reads_seconds_and_dates():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    now = datetime(2025, 1, 1, tzinfo=timezone.utc)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(later, now=now.timestamp()) == pytest.approx(30.0)
    assert parse_retry_after(format_datetime(now - timedelta(seconds=5), usegmt=True), now=now.timestamp()) == 0.0


def test_base_url_needs_a_scheme():
    assert normalize_base_url("http://h:1/v1/") == "http://h:1/v1"
    with pytest.raises(ConfigError, match="http://"):
        normalize_base_url("localhost:8000/v1")


def test_choice_cut_at_a_printed_end_of_turn_marker():
    encode = lambda text: list(range(len(text.split())))  # noqa: E731
    printed = choice_to_completion({"text": "ok thanks<|im_end|>\nmore", "finish_reason": "length"},
                                   ["<|im_end|>"], encode)
    assert (printed.text, printed.finish_reason) == ("ok thanks", "stop")
    cut_off = choice_to_completion({"text": "and then", "finish_reason": "length"}, ["<|im_end|>"], encode)
    assert cut_off.finish_reason == "length" and cut_off.token_ids == (0, 1)
