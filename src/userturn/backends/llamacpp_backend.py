"""llama.cpp in process (llama-cpp-python), for GGUF models on CPU, the embedded SmolLM2 GGUF included.

The GGUF file is loaded as it is (no de-quantization), so this backend runs the quantized weights the
way llama.cpp users do; the transformers backend de-quantizes the same file to float. Prompts rendered by
userturn are tokenized by llama.cpp with ``special=True`` (``<|im_start|>`` in the text becomes the special
token, as in the transformers backend) and ``add_bos=False``: the chat template already wrote a BOS where
the model wants one, so none is added a second time. Output ids are decoded by the same Hugging Face
tokenizer userturn renders with, special tokens kept, so texts compare byte for byte across backends.

Samples run one after another; llama.cpp keeps the KV cache of the longest common prefix between
calls, so the ``n`` samples (and every temperature) of one prompt pay for its prefill once.

Options (keyword arguments of ``load_backend("llamacpp", model, ...)``; ``userturn run`` flags in brackets,
anything else as ``--engine-arg key=value``):
    n_ctx: context length in tokens, prompt plus completion (default 4096; 0 = the model's training length).
    threads (``--threads``): CPU threads (default: ``$USERTURN_THREADS``, else all cores).
    n_batch: prompt tokens evaluated per step (default 512).
    tokenizer (``--engine-arg tokenizer=...``): the rendering tokenizer; default the model's own (the converted folder for
        ``embedded``, the GGUF's tokenizer for a ``.gguf`` file).
    engine_args: any other ``llama_cpp.Llama`` keyword, e.g. ``n_gpu_layers=-1`` or ``flash_attn=true``;
        ``--engine-arg key=value`` pairs that are not one of the options above land here, and a key
        ``Llama`` does not take is a ConfigError.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from userturn.backends import register_backend
from userturn.backends.base import ModelIdentity, ProgressCallback
from userturn.backends.common import (
    cut_at_markers,
    finish_completion,
    load_render_tokenizer,
    parse_engine_args,
    reject_unknown,
    route_engine_args,
    single_gguf,
)
from userturn.errors import BackendError, ConfigError, ModelError
from userturn.models import embedded_gguf_path, file_sha256, is_embedded
from userturn.records import Completion, GenerationRequest, SamplingParams
from userturn.templates import require_chat_template, turn_end


def gguf_path_for(model: str) -> Path:
    """The GGUF file for ``--model``: the embedded one for ``embedded``, else a file or a one-GGUF folder."""
    if is_embedded(model):
        return embedded_gguf_path()
    return single_gguf(Path(model).expanduser())


def sampler_kwargs(params: SamplingParams) -> dict[str, Any]:
    """``Llama.generate`` sampler settings that mean plain temperature + top-p sampling.

    llama.cpp's defaults (top_k 40, min_p 0.05, repeat_penalty 1.1) would change greedy outputs too, so
    they are switched off; temperature 0 selects llama.cpp's greedy sampler.
    """
    return {
        "temp": 0.0 if params.greedy else float(params.temperature),
        "top_p": 1.0 if params.greedy else float(params.top_p),
        "top_k": 0,
        "min_p": 0.0,
        "typical_p": 1.0,
        "repeat_penalty": 1.0,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
    }


class LlamaCppBackend:
    """Generate with ``llama_cpp.Llama`` (see the module docstring for the options)."""

    def __init__(self, model: str, *, n_ctx: int = 4096, threads: int = 0, n_batch: int = 512,
                 tokenizer: str | None = None, engine_args: Any = None) -> None:
        try:
            import llama_cpp
        except ImportError as exc:
            raise ConfigError("the llamacpp backend needs llama-cpp-python: pip install 'userturn[llamacpp]'") \
                from exc
        path = gguf_path_for(model)
        self._tokenizer, _ = load_render_tokenizer(str(path) if not is_embedded(model) else model, tokenizer)
        require_chat_template(self._tokenizer, tokenizer or model)
        threads = threads or int(os.environ.get("USERTURN_THREADS", "0") or 0) or (os.cpu_count() or 1)
        kwargs: dict[str, Any] = {"model_path": str(path), "n_ctx": int(n_ctx), "n_threads": int(threads),
                                  "n_threads_batch": int(threads), "n_batch": int(n_batch), "verbose": False}
        extra = parse_engine_args(engine_args)
        known = set(inspect.signature(llama_cpp.Llama.__init__).parameters) - {"self", "kwargs", "args"}
        reject_unknown("llama_cpp.Llama (--engine-arg)", extra, known)
        kwargs.update(extra)
        try:
            self.llm = llama_cpp.Llama(**kwargs)
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(f"llama.cpp cannot load '{path}': {exc}") from exc
        self.n_ctx = self.llm.n_ctx()
        eos = self.llm.token_eos()
        self.turn_end = turn_end(self._tokenizer, [eos] if eos is not None and eos >= 0 else [])
        if not self.turn_end.token_ids and not self.turn_end.strings:
            raise ModelError(f"model '{model}' has no EOS or end-of-turn token; generation could never stop")
        file_type = self.llm.metadata.get("general.file_type", "")
        self.identity = ModelIdentity(
            name="SmolLM2-135M-Instruct" if is_embedded(model) else model,
            revision=file_sha256(path)[:16],
            backend="llamacpp",
            dtype=f"gguf-ftype{file_type}" if file_type != "" else "gguf",
        )

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def encode(self, prompt: str) -> list[int]:
        """The prompt's token ids as llama.cpp sees them: special tokens parsed, no BOS added."""
        return self.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)

    def _decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=False)

    def _sample(self, prompt_ids: list[int], params: SamplingParams, seed: int) -> Completion:
        budget = min(int(params.max_tokens), self.n_ctx - len(prompt_ids))
        stop_ids = set(self.turn_end.token_ids)
        markers = [*params.stop, *self.turn_end.strings]
        self.llm.set_seed(int(seed) % (2**32))
        out: list[int] = []
        for token in self.llm.generate(prompt_ids, reset=True, **sampler_kwargs(params)):
            out.append(int(token))
            if token in stop_ids or len(out) >= budget:
                break
            if markers and cut_at_markers(self._decode(out), markers)[1]:
                break
        return finish_completion(out, stop_ids=stop_ids, markers=markers, decode=self._decode)

    def generate(self, requests: Sequence[GenerationRequest],
                 progress: ProgressCallback | None = None) -> list[list[Completion]]:
        results: list[list[Completion]] = []
        tokens = 0
        for request in requests:
            prompt_ids = self.encode(request.prompt)
            if len(prompt_ids) >= self.n_ctx:
                raise BackendError(f"a prompt of {len(prompt_ids)} tokens does not fit the llama.cpp context of "
                                   f"{self.n_ctx}; pass --engine-arg n_ctx=... with a larger value")
            completions = [self._sample(prompt_ids, request.params, request.params.seed + i)
                           for i in range(request.params.n)]
            tokens += sum(len(c.token_ids) for c in completions)
            results.append(completions)
            if progress:
                progress(len(results), tokens)
        return results

    def close(self) -> None:
        llm, self.llm = self.llm, None
        if llm is not None:
            llm.close()


OPTIONS = {"n_ctx", "threads", "n_batch", "tokenizer", "engine_args"}


@register_backend("llamacpp")
def _factory(model: str, **options: Any) -> LlamaCppBackend:
    options = route_engine_args(options, OPTIONS)
    return LlamaCppBackend(model, **options)
