"""The transformers backend: batched generation with per-sample seeds, on CPU or CUDA.

Rows (one per requested completion) are sorted by prompt length and padded on the left, so a
batch wastes little compute. Sampling is done row by row with the Gumbel-max trick and one
``torch.Generator`` per row seeded from the completion's own seed: a completion is the same
whichever batch it lands in, which is what lets a killed run resume with identical results.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from userturn.backends import register_backend
from userturn.backends.base import ModelIdentity, ProgressCallback
from userturn.errors import ConfigError, ModelError
from userturn.models import ResolvedModel, resolve_model
from userturn.records import Completion, GenerationRequest
from userturn.templates import require_chat_template, turn_end

_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float16": "float16", "fp16": "float16"}


def _pick_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _pick_dtype(dtype: str, device: str) -> Any:
    import torch

    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if dtype not in _DTYPES:
        raise ConfigError(f"unknown dtype '{dtype}'; choose auto, float32, bfloat16 or float16")
    return getattr(torch, _DTYPES[dtype])


class _RowSampler:
    """A logits processor that turns greedy search into per-row seeded sampling.

    Rows with temperature 0 are left alone (plain argmax). The other rows are sampled by inverse
    transform: softmax at their temperature, cut to their top-p nucleus, one uniform number drawn
    from the row's own generator, and the token where the cumulative probability passes it wins
    (its score is set to 0, every other to -inf, so the greedy argmax picks it). One random number
    per row and step, everything else batched.
    """

    def __init__(self, temperatures: list[float], top_ps: list[float], seeds: list[int], device: str) -> None:
        import torch

        self.sampled_rows = [i for i, t in enumerate(temperatures) if t > 0]
        self.rows = torch.tensor(self.sampled_rows, dtype=torch.long, device=device)
        self.temperatures = torch.tensor([temperatures[i] for i in self.sampled_rows], device=device)
        self.top_ps = [top_ps[i] for i in self.sampled_rows]
        self.nucleus = any(p < 1.0 for p in self.top_ps)
        self.top_p_tensor = torch.tensor(self.top_ps, device=device)
        self.generators = []
        for i in self.sampled_rows:
            gen = torch.Generator(device=device)
            gen.manual_seed(int(seeds[i]) % (2**63))
            self.generators.append(gen)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if not self.sampled_rows:
            return scores
        probs = torch.softmax(scores[self.rows].float() / self.temperatures[:, None], dim=-1)
        order = None
        if self.nucleus:
            probs, order = torch.sort(probs, dim=-1, descending=True)
            before = probs.cumsum(dim=-1) - probs
            probs = probs * (before < self.top_p_tensor[:, None])
        cdf = probs.cumsum(dim=-1)
        uniform = torch.cat([torch.rand(1, generator=g, device=cdf.device) for g in self.generators])
        choice = torch.searchsorted(cdf, (uniform * cdf[:, -1]).unsqueeze(-1)).clamp(max=cdf.shape[-1] - 1)
        if order is not None:
            choice = order.gather(-1, choice)
        out = scores.clone()
        out[self.rows] = float("-inf")
        out[self.rows.unsqueeze(-1), choice] = 0.0
        return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else 'no details'}"


PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def check_local_folder(source: str, model: str, *, trust_remote_code: bool, allow_pickle: bool) -> None:
    """Refuse a local model folder that would run its own code or unpickle weights, unless allowed.

    Hub ids are left to transformers (``use_safetensors=True`` and ``trust_remote_code`` do the same there).

    Raises:
        ModelError: the folder declares custom code (``auto_map`` in config.json) without
            ``trust_remote_code``, or holds only pickle weights (``.bin``/``.pt``) without ``allow_pickle``.
    """
    import json
    from pathlib import Path

    folder = Path(source)
    if not folder.is_dir():
        return
    config_path = folder / "config.json"
    if not trust_remote_code and config_path.is_file():
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelError(f"model '{model}': cannot read {config_path}: {exc}") from exc
        if isinstance(config, dict) and config.get("auto_map"):
            raise ModelError(
                f"model '{model}' ships its own Python code (auto_map in config.json), which userturn does not run "
                "by default; read it, and pass --trust-remote-code only if you trust it"
            )
    files = [p.name for p in folder.iterdir() if p.is_file()]
    safe = [f for f in files if f.endswith((".safetensors", ".gguf"))]
    pickled = [f for f in files if f.endswith(PICKLE_SUFFIXES)]
    if pickled and not safe and not allow_pickle:
        raise ModelError(
            f"model '{model}' has only pickle weights ({', '.join(sorted(pickled)[:3])}), which can run code when "
            "loaded; convert them to safetensors, or pass --engine-arg allow_pickle=true if you trust the files"
        )


class TransformersBackend:
    """Generate with a Hugging Face causal LM.

    Args:
        model: ``embedded``, a local folder, a ``.gguf`` file or a hub id (see :func:`resolve_model`).
        device: ``auto`` (CUDA when available), ``cpu``, ``cuda``, ``cuda:1``...
        dtype: ``auto`` (float32 on CPU, bfloat16/float16 on CUDA), ``float32``, ``bfloat16``, ``float16``.
        batch_size: rows per forward pass; 0 picks one from the token budget of the batch.
        threads: CPU threads for torch; 0 keeps torch's default.
        trust_remote_code: allow model repositories to run their own Python code (off by default).
        allow_pickle: allow ``.bin`` (pickle) weights; only safetensors/GGUF load otherwise.
    """

    def __init__(self, model: str, *, device: str = "auto", dtype: str = "auto", batch_size: int = 0,
                 threads: int = 0, trust_remote_code: bool = False, allow_pickle: bool = False,
                 token_budget: int = 24576) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        if threads > 0:
            torch.set_num_threads(threads)
        resolved: ResolvedModel = resolve_model(model)
        self.device = _pick_device(device)
        self.torch_dtype = _pick_dtype(dtype, self.device)
        load_kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
        if resolved.gguf_file:
            load_kwargs["gguf_file"] = resolved.gguf_file
        else:
            check_local_folder(resolved.source, model, trust_remote_code=trust_remote_code,
                               allow_pickle=allow_pickle)
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(resolved.source, **load_kwargs)
        except Exception as exc:  # a damaged file fails in many ways (OSError, ValueError, struct.error, ...)
            raise ModelError(f"cannot load the tokenizer of '{model}': {_first_line(exc)}") from exc
        require_chat_template(self._tokenizer, model)  # before the weights: a model we cannot use fails fast
        try:
            self.model = AutoModelForCausalLM.from_pretrained(
                resolved.source, dtype=self.torch_dtype, use_safetensors=None if allow_pickle else
                (None if resolved.gguf_file else True), **load_kwargs
            )
        except Exception as exc:
            raise ModelError(f"cannot load model '{model}': {_first_line(exc)}") from exc
        self.model.to(self.device)
        self.model.eval()
        revision = resolved.revision
        if revision == "hub":
            revision = getattr(self.model.config, "_commit_hash", None) or "hub-unknown"
        self.identity = ModelIdentity(name=resolved.name, revision=revision, backend="transformers",
                                      dtype=str(self.torch_dtype).removeprefix("torch."))
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        extra = gen_eos if isinstance(gen_eos, list) else ([gen_eos] if gen_eos is not None else [])
        self.turn_end = turn_end(self._tokenizer, extra)
        if not self.turn_end.token_ids and not self.turn_end.strings:
            raise ModelError(f"model '{model}' has no EOS or end-of-turn token; generation could never stop")
        self.pad_id = self._tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.turn_end.token_ids[0] if self.turn_end.token_ids else 0
        self.batch_size = batch_size
        self.token_budget = token_budget

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def _rows_per_batch(self, longest: int, max_new: int) -> int:
        if self.batch_size > 0:
            return self.batch_size
        return max(1, min(64, self.token_budget // max(1, longest + max_new)))

    def generate(self, requests: Sequence[GenerationRequest],
                 progress: ProgressCallback | None = None) -> list[list[Completion]]:
        import torch

        encoded = [self._tokenizer.encode(r.prompt, add_special_tokens=False) for r in requests]
        rows = [(ri, ci) for ri, r in enumerate(requests) for ci in range(r.params.n)]
        # Longest first: an out-of-memory error shows up on the first batch, not after an hour.
        rows.sort(key=lambda rc: (-len(encoded[rc[0]]), requests[rc[0]].prompt, rc[1]))
        results: list[list[Completion | None]] = [[None] * r.params.n for r in requests]
        done = tokens = 0
        start = 0
        while start < len(rows):
            longest = len(encoded[rows[start][0]])
            max_new = max(requests[ri].params.max_tokens for ri, _ in rows[start:start + 64])
            size = self._rows_per_batch(longest, max_new)
            batch = rows[start:start + size]
            start += len(batch)
            with torch.inference_mode():
                outs = self._generate_batch(requests, encoded, batch)
            for (ri, ci), completion in zip(batch, outs, strict=True):
                results[ri][ci] = completion
                tokens += len(completion.token_ids)
            done += len(batch)
            if progress:
                progress(done, tokens)
        return [[c for c in per if c is not None] for per in results]

    def _generate_batch(self, requests: Sequence[GenerationRequest], encoded: list[list[int]],
                        batch: list[tuple[int, int]]) -> list[Completion]:
        import torch
        from transformers import LogitsProcessorList

        width = max(len(encoded[ri]) for ri, _ in batch)
        input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ri, _) in enumerate(batch):
            ids = encoded[ri]
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids):] = 1
        params = [requests[ri].params for ri, _ in batch]
        sampler = _RowSampler(
            temperatures=[p.temperature for p in params],
            top_ps=[p.top_p for p in params],
            seeds=[p.seed + ci for p, (_, ci) in zip(params, batch, strict=True)],
            device=self.device,
        )
        max_new = max(p.max_tokens for p in params)
        stop_ids = list(self.turn_end.token_ids)
        output = self.model.generate(
            input_ids=input_ids.to(self.device),
            attention_mask=attention.to(self.device),
            max_new_tokens=max_new,
            do_sample=False,
            num_beams=1,
            logits_processor=LogitsProcessorList([sampler]),
            eos_token_id=stop_ids or None,
            pad_token_id=self.pad_id,
            temperature=None,
            top_p=None,
            top_k=None,
        )
        new_tokens = output[:, width:].tolist()
        completions = []
        for row, p in enumerate(params):
            completions.append(self._finish(new_tokens[row][: p.max_tokens], p.stop, set(stop_ids)))
        return completions

    def _finish(self, ids: list[int], stop: Sequence[str], stop_ids: set[int]) -> Completion:
        reason = "length"
        for pos, tok in enumerate(ids):
            if tok in stop_ids:
                ids, reason = ids[:pos], "stop"
                break
        text = self._tokenizer.decode(ids, skip_special_tokens=False)
        for marker in (*stop, *self.turn_end.strings):
            cut = text.find(marker)
            if cut >= 0:
                text, reason = text[:cut], "stop"
        return Completion(text=text, token_ids=tuple(ids), finish_reason=reason)

    def close(self) -> None:
        self.model = None  # type: ignore[assignment]


@register_backend("transformers")
def _factory(model: str, **options: Any) -> TransformersBackend:
    known = {"device", "dtype", "batch_size", "threads", "trust_remote_code", "allow_pickle", "token_budget"}
    unknown = set(options) - known
    if unknown:
        raise ConfigError(f"the transformers backend does not take option(s): {', '.join(sorted(unknown))}")
    threads = options.pop("threads", 0) or int(os.environ.get("USERTURN_THREADS", "0") or 0)
    return TransformersBackend(model, threads=threads, **options)
