"""vLLM's offline engine: ``LLM.generate`` on prompts rendered by userturn, on one GPU or many.

Prompts are rendered by userturn and handed to vLLM as token ids (``{"prompt_token_ids": ...}``),
encoded without special tokens, so vLLM never adds a second BOS. All ``n`` samples of a prompt go in
one request (vLLM seeds sample ``i`` with ``seed + i``, the backend contract), and automatic prefix
caching is on, so every temperature and sample of one context shares its prefill.

Options (keyword arguments of ``load_backend("vllm", model, ...)``; from ``userturn run`` as
``--engine-arg key=value``, with the flags that exist named in brackets):
    tensor_parallel_size: GPUs per model replica that split each layer (default 1).
    pipeline_parallel_size: stages that split the layers (default 1); with
        ``distributed_executor_backend="ray"`` they may sit on different nodes.
    data_parallel_size: replicas. vLLM's offline engine cannot run replicas in one
        process (vLLM itself refuses ``LLM(data_parallel_size>1)``), so values above 1 raise a ConfigError that
        says to serve with ``vllm serve --data-parallel-size N`` and use ``--backend openai``, which spreads
        requests over the replicas (docs/backends/vllm.md). Only ``external_launcher`` (torchrun) passes.
    gpu_memory_utilization: share of each GPU vLLM may take (default 0.9).
    max_model_len: context length to reserve KV cache for (default: the model's).
    dtype: ``auto`` (default), ``bfloat16``, ``float16``, ``float32``.
    lora: a PEFT LoRA adapter folder applied to every request.
    max_lora_rank: default: the adapter's ``r`` (from ``adapter_config.json``).
    distributed_executor_backend: ``mp`` (one node), ``ray`` (several nodes; start the Ray cluster first),
        ``external_launcher`` (torchrun).
    tokenizer (``--engine-arg tokenizer=...``): the rendering tokenizer when it is not the model's own.
    chunk_size: prompts per ``LLM.generate`` call; progress is reported after each (default 512).
    trust_remote_code: allow the model repository's own code.
    engine_args: any other ``vllm.LLM`` / ``EngineArgs`` keyword (``enforce_eager=true``,
        ``max_num_seqs=256``, ``quantization=fp8``, ``kv_cache_dtype=fp8``...). ``userturn run`` passes every
        ``--engine-arg key=value`` as a keyword option: keys named above are the options, all others land here.

``enable_thinking`` is a rendering choice, not an engine one: userturn's ``--thinking`` flag passes it to
the chat template before the prompt reaches vLLM.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from userturn.backends import register_backend
from userturn.backends.base import ModelIdentity, ProgressCallback
from userturn.backends.common import (
    finish_completion,
    load_render_tokenizer,
    parse_engine_args,
    route_engine_args,
)
from userturn.errors import BackendError, ConfigError, ModelError
from userturn.models import _local_revision
from userturn.records import Completion, GenerationRequest, SamplingParams
from userturn.templates import TurnEnd, require_chat_template, turn_end


def engine_kwargs(model_source: str, tokenizer_source: str, *, tensor_parallel_size: int = 1,
                  pipeline_parallel_size: int = 1, data_parallel_size: int = 1,
                  gpu_memory_utilization: float = 0.9, max_model_len: int | None = None, dtype: str = "auto",
                  seed: int = 0, trust_remote_code: bool = False, lora_rank: int | None = None,
                  distributed_executor_backend: str | None = None,
                  engine_args: dict[str, Any] | None = None) -> dict[str, Any]:
    """The keyword arguments of ``vllm.LLM(...)``.

    Args:
        model_source: a folder or hub id vLLM loads the weights from.
        tokenizer_source: where vLLM loads its tokenizer (only used to detokenize; prompts arrive as ids).
        lora_rank: when not None, LoRA is enabled with this ``max_lora_rank``.
        engine_args: anything else ``vllm.LLM`` takes; it wins over the named options.

    Raises:
        ConfigError: sizes below 1, a memory share outside (0, 1], or ``data_parallel_size > 1`` without
            ``distributed_executor_backend=external_launcher`` (vLLM's offline engine cannot run replicas in
            one process; the message says to use ``vllm serve -dp N`` with the openai backend).
    """
    for name, size in (("tensor_parallel_size", tensor_parallel_size),
                       ("pipeline_parallel_size", pipeline_parallel_size),
                       ("data_parallel_size", data_parallel_size)):
        if int(size) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {size}")
    if not 0.0 < float(gpu_memory_utilization) <= 1.0:
        raise ConfigError(f"--gpu-memory-utilization must be in (0, 1], got {gpu_memory_utilization}")
    kwargs: dict[str, Any] = {
        "model": model_source,
        "tokenizer": tokenizer_source,
        "tensor_parallel_size": int(tensor_parallel_size),
        "pipeline_parallel_size": int(pipeline_parallel_size),
        "gpu_memory_utilization": float(gpu_memory_utilization),
        "dtype": dtype,
        "seed": int(seed),
        "trust_remote_code": bool(trust_remote_code),
        "enable_prefix_caching": True,
    }
    if int(data_parallel_size) > 1:
        kwargs["data_parallel_size"] = int(data_parallel_size)
    if max_model_len:
        kwargs["max_model_len"] = int(max_model_len)
    if lora_rank is not None:
        kwargs["enable_lora"] = True
        kwargs["max_lora_rank"] = int(lora_rank)
        kwargs["max_loras"] = 1
    if distributed_executor_backend:
        kwargs["distributed_executor_backend"] = distributed_executor_backend
    kwargs.update(engine_args or {})
    if kwargs.get("data_parallel_size", 1) > 1 and kwargs.get("distributed_executor_backend") != "external_launcher":
        raise ConfigError(
            "vLLM's offline engine cannot run data_parallel_size > 1 in one process: serve the model with "
            "`vllm serve MODEL --data-parallel-size N` and run userturn with --backend openai --base-url URL/v1"
        )
    return kwargs


def sampling_kwargs(params: SamplingParams, turn: TurnEnd) -> dict[str, Any]:
    """The keyword arguments of ``vllm.SamplingParams`` for one request (all ``n`` samples at once).

    Greedy requests send temperature 0 and top_p 1. The model's end-of-turn tokens go in
    ``stop_token_ids``, plain-text turn ends and the request's own stop strings in ``stop``; special tokens
    stay in the text (``skip_special_tokens=False``) as with the transformers backend.
    """
    return {
        "n": int(params.n),
        "temperature": float(params.temperature) if not params.greedy else 0.0,
        "top_p": 1.0 if params.greedy else float(params.top_p),
        "max_tokens": int(params.max_tokens),
        "seed": int(params.seed),
        "stop": list(dict.fromkeys([*params.stop, *turn.strings])),
        "stop_token_ids": [int(i) for i in turn.token_ids],
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
        "include_stop_str_in_output": False,
    }


def prompt_inputs(tokenizer: Any, prompt: str) -> dict[str, list[int]]:
    """A vLLM ``TokensPrompt`` for a rendered prompt: its ids, no special tokens added (no second BOS)."""
    return {"prompt_token_ids": tokenizer.encode(prompt, add_special_tokens=False)}


def completion_from_output(token_ids: Sequence[int], finish_reason: str | None, *, turn: TurnEnd,
                           stop: Sequence[str], tokenizer: Any) -> Completion:
    """One vLLM ``CompletionOutput`` (its ``token_ids`` and ``finish_reason``) as a :class:`Completion`.

    The text is decoded from the ids here, with special tokens kept, so that it is byte-identical to what
    the transformers backend makes from the same ids; the stop token is dropped and the text is cut at the
    first stop string. ``finish_reason`` is ``stop`` when vLLM or the cut says so.
    """
    completion = finish_completion(
        token_ids, stop_ids=turn.token_ids, markers=[*stop, *turn.strings],
        decode=lambda ids: tokenizer.decode(ids, skip_special_tokens=False),
    )
    if completion.finish_reason == "length" and finish_reason == "stop":
        return Completion(text=completion.text, token_ids=completion.token_ids, finish_reason="stop")
    return completion


def lora_rank(adapter: Path) -> int:
    """The rank ``r`` of a PEFT LoRA adapter folder, from its ``adapter_config.json``.

    Raises:
        ModelError: no folder, no ``adapter_config.json``, or no integer ``r`` in it.
    """
    config = adapter / "adapter_config.json"
    if not config.is_file():
        raise ModelError(f"LoRA adapter '{adapter}' has no adapter_config.json (is it a PEFT adapter folder?)")
    try:
        rank = json.loads(config.read_text())["r"]
        return int(rank)
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"{config}: field 'r' (the LoRA rank) is missing or not an integer") from exc


class VLLMBackend:
    """Generate with ``vllm.LLM`` (see the module docstring for the options)."""

    def __init__(self, model: str, *, tensor_parallel_size: int = 1, pipeline_parallel_size: int = 1,
                 data_parallel_size: int = 1, gpu_memory_utilization: float = 0.9,
                 max_model_len: int | None = None, dtype: str = "auto", lora: str | None = None,
                 max_lora_rank: int | None = None, distributed_executor_backend: str | None = None,
                 tokenizer: str | None = None, chunk_size: int = 512, trust_remote_code: bool = False,
                 engine_args: Any = None, seed: int = 0) -> None:
        self._tokenizer, resolved = load_render_tokenizer(model, tokenizer, trust_remote_code=trust_remote_code)
        require_chat_template(self._tokenizer, tokenizer or model)
        adapter = Path(lora).expanduser() if lora else None
        rank = (max_lora_rank or lora_rank(adapter)) if adapter else None
        source = resolved.source if not resolved.gguf_file else str(Path(resolved.source) / resolved.gguf_file)
        kwargs = engine_kwargs(
            source, tokenizer or resolved.source, tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size, data_parallel_size=data_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len, dtype=dtype, seed=seed,
            trust_remote_code=trust_remote_code, lora_rank=rank,
            distributed_executor_backend=distributed_executor_backend, engine_args=parse_engine_args(engine_args),
        )
        try:
            import vllm
        except ImportError as exc:
            raise ConfigError("the vllm backend needs vLLM: pip install 'userturn[vllm]' (on a machine with a GPU)") \
                from exc
        try:
            self.llm = vllm.LLM(**kwargs)
        except (OSError, ValueError) as exc:
            raise ModelError(f"vLLM cannot load '{model}': {str(exc).splitlines()[0] if str(exc) else exc}") from exc
        self._sampling_class = vllm.SamplingParams
        self.lora_request = None
        name, revision = resolved.name, resolved.revision
        if revision == "hub":
            revision = str(kwargs.get("revision") or "hub")
        if adapter is not None:
            from vllm.lora.request import LoRARequest

            self.lora_request = LoRARequest("userturn-adapter", 1, str(adapter))
            name = f"{name}+lora:{adapter.name}"
            revision = f"{revision}+{_local_revision(adapter)}"
        try:
            engine_dtype = str(self.llm.llm_engine.model_config.dtype).removeprefix("torch.")
        except AttributeError:
            engine_dtype = str(dtype)
        self.identity = ModelIdentity(name=name, revision=revision, backend="vllm", dtype=engine_dtype)
        self.turn_end = turn_end(self._tokenizer)
        self.chunk_size = max(1, int(chunk_size))

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def generate(self, requests: Sequence[GenerationRequest],
                 progress: ProgressCallback | None = None) -> list[list[Completion]]:
        results: list[list[Completion]] = []
        tokens = 0
        for start in range(0, len(requests), self.chunk_size):
            chunk = requests[start:start + self.chunk_size]
            prompts = [prompt_inputs(self._tokenizer, r.prompt) for r in chunk]
            params = [self._sampling_class(**sampling_kwargs(r.params, self.turn_end)) for r in chunk]
            try:
                outputs = self.llm.generate(prompts, params, use_tqdm=False, lora_request=self.lora_request)
            except ValueError as exc:  # e.g. a prompt longer than max_model_len
                raise BackendError(f"vLLM rejected a request: {str(exc).splitlines()[0]}") from exc
            for request, output in zip(chunk, outputs, strict=True):
                samples = sorted(output.outputs, key=lambda o: o.index)
                completions = [completion_from_output(o.token_ids, o.finish_reason, turn=self.turn_end,
                                                      stop=request.params.stop, tokenizer=self._tokenizer)
                               for o in samples]
                tokens += sum(len(c.token_ids) for c in completions)
                results.append(completions)
            if progress:
                progress(len(results), tokens)
        return results

    def close(self) -> None:
        self.llm = None  # type: ignore[assignment]
        try:
            import gc

            import torch

            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:  # pragma: no cover
            pass


OPTIONS = {"tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "gpu_memory_utilization",
           "max_model_len", "dtype", "lora", "max_lora_rank", "distributed_executor_backend", "tokenizer",
           "chunk_size", "trust_remote_code", "engine_args", "seed"}


@register_backend("vllm")
def _factory(model: str, **options: Any) -> VLLMBackend:
    options = route_engine_args(options, OPTIONS)
    return VLLMBackend(model, **options)
