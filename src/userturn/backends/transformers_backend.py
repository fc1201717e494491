"""The transformers backend: batched generation with per-sample seeds, on CPU or CUDA.

The decode loop is userturn's own (``model.generate`` is not used), for three reasons:

* **Prefix sharing.** Rows that continue the same prompt (the greedy turn and every ``k`` sample at
  every temperature of one context) prefill that prompt *once*; its KV cache and last-token logits
  are then copied to every row that needs them.
* **No wasted work.** Rows are sorted by prompt length and padded on the left; finished rows are
  dropped from the batch (with their cache) as soon as an eighth of the batch has finished, and
  the KV cache is written in place into a buffer sized for the batch, instead of being
  re-concatenated at every step.
* **Batch-independent sampling.** Each sampled row draws its random numbers from its own
  ``torch.Generator`` seeded from the completion's seed, with the Gumbel-max trick (see
  :class:`_RowSampler`), so a completion is the same whichever batch it lands in, which is what
  lets a killed run resume with identical results.

The batch size follows from the memory the batch needs (KV cache, logits, activations) and the
memory available, capped by ``batch_size`` (or 64 rows when it is 0).
"""

from __future__ import annotations

import inspect
import os
import time
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
# Bumped whenever the decode loop or the sampler changes what a seed produces (part of the store key).
ENGINE_VERSION = "decode-loop/1"
DEFAULT_MAX_ROWS = 64
# Finished rows leave the batch once they are this share of it (their cache rows are moved in place).
DROP_AT = 0.125
# The last rows of a run join the batch before them when they fit in this multiple of the token budget:
# batch throughput grows with rows, so neither a small tail batch nor evenly split batches pay off.
TAIL_SLACK = 1.25
# Tokens of KV cache per batch (rows x (prompt + new tokens)); 1.1 GB for the embedded model in float32.
DEFAULT_TOKEN_BUDGET = 24576
# Share of the available memory one batch may take (the rest is for the OS, the store, other jobs).
MEMORY_SHARE = 0.5
# Tokens whose Gumbel noise is drawn at every sampling step (the full vocabulary only in the tail case).
CANDIDATES = 64
# Prompt tokens per prefill forward pass (rows x padded width); bounds the activation memory of a batch.
PREFILL_TOKENS = 8192


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


def available_memory(device: str) -> int:
    """Bytes a new allocation can take now: free GPU memory, or the kernel's MemAvailable on CPU."""
    import torch

    if device.startswith("cuda"):
        free, _total = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 4 << 30


class _RowSampler:
    """Turns logits into next tokens, with per-row seeded sampling.

    Rows with temperature 0 take the argmax. The other rows sample from the softmax at their
    temperature, cut to their top-p nucleus, with random numbers from the row's own generator only:
    one uniform number decides whether the token comes from the ``CANDIDATES`` most likely tokens
    (with the probability they hold) or from the rest; within either set the Gumbel-max trick picks
    the token. Unlike an inverse-CDF draw over the whole vocabulary, whose boundaries between tiny
    tail probabilities move with the last bit of the logits, Gumbel-max only changes its answer
    when two perturbed scores tie, so the float differences between batch shapes almost never
    change a sample. ``keep`` drops finished rows.
    """

    def __init__(self, temperatures: list[float], top_ps: list[float], seeds: list[int], device: str) -> None:
        import torch

        self.device = device
        self.temperature = torch.tensor(temperatures, dtype=torch.float32, device=device)
        self.top_p = torch.tensor(top_ps, dtype=torch.float32, device=device)
        self.generators: list[Any] = []
        for t, seed in zip(temperatures, seeds, strict=True):
            gen = None
            if t > 0:
                gen = torch.Generator(device=device)
                gen.manual_seed(int(seed) % (2**63))
            self.generators.append(gen)
        self._refresh()

    def _refresh(self) -> None:
        import torch

        sampled = self.temperature > 0
        nucleus = sampled & (self.top_p < 1.0)
        self.groups = []  # (rows, temperatures, top-ps or None, generators), one per sampling method
        for mask, with_nucleus in ((sampled & ~nucleus, False), (nucleus, True)):
            rows = torch.nonzero(mask).flatten()
            if len(rows):
                self.groups.append((rows, self.temperature[rows][:, None],
                                    self.top_p[rows][:, None] if with_nucleus else None,
                                    [self.generators[i] for i in rows.tolist()]))
        self.one_group = len(self.groups) == 1 and len(self.groups[0][0]) == len(self.generators)

    def keep(self, rows: list[int]) -> None:
        """Keep only ``rows`` (positions in the current batch), in that order."""
        import torch

        index = torch.tensor(rows, dtype=torch.long, device=self.device)
        self.temperature = self.temperature[index]
        self.top_p = self.top_p[index]
        self.generators = [self.generators[r] for r in rows]
        self._refresh()

    def __call__(self, logits: Any) -> Any:
        """Next token per row from ``logits`` (rows × vocab, float32)."""
        if self.one_group:
            _rows, temperature, top_p, generators = self.groups[0]
            return self._sample(logits, temperature, top_p, generators)
        tokens = logits.argmax(dim=-1)
        for rows, temperature, top_p, generators in self.groups:
            tokens[rows] = self._sample(logits[rows], temperature, top_p, generators)
        return tokens

    @staticmethod
    def _sample(scores: Any, temperature: Any, top_p: Any, generators: list[Any]) -> Any:
        import torch

        probs = torch.softmax(scores / temperature, dim=-1)
        if top_p is not None:
            ordered, order = torch.sort(probs, dim=-1, descending=True)
            inside = (ordered.cumsum(dim=-1) - ordered) < top_p
            probs = probs * torch.zeros_like(inside).scatter_(-1, order, inside)
            probs = probs / probs.sum(dim=-1, keepdim=True)
        k = min(CANDIDATES, probs.shape[-1])
        top, candidates = probs.topk(k, dim=-1)
        draws = torch.stack([torch.rand(1 + k, generator=g, device=probs.device) for g in generators])
        choice = candidates.gather(-1, (top.log() + _gumbel(draws[:, 1:])).argmax(dim=-1, keepdim=True)).squeeze(-1)
        # The tail beyond the candidates is drawn from with the probability it holds (rare at usual settings).
        for row in torch.nonzero(draws[:, 0] >= top.sum(dim=-1)).flatten().tolist():
            tail = probs[row].clone()
            tail[candidates[row]] = 0.0
            noise = torch.rand(tail.shape[-1], generator=generators[row], device=probs.device)
            choice[row] = (tail.log() + _gumbel(noise)).argmax()
        return choice


def _gumbel(uniform: Any) -> Any:
    """Gumbel(0, 1) noise from uniform numbers in [0, 1)."""
    return -(-uniform.clamp(min=1e-12).log()).log()


def _slab_cache(num_layers: int, capacity: int, rows: int) -> Any:
    """A DynamicCache whose layers write in place into buffers of ``rows`` x ``capacity`` positions.

    ``cache.userturn_span`` (``[first, end]``) selects the rows the next forward pass covers, so that
    a batch can be prefilled a group of rows at a time. transformers releases without cache layer
    classes (before 4.56) get a plain DynamicCache (and no ``userturn_span``).
    """
    from transformers.cache_utils import DynamicCache

    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:
        return DynamicCache()

    class SlabLayer(DynamicLayer):
        """Keys and values live in one preallocated buffer; ``update`` copies the new positions in."""

        def __init__(self) -> None:
            super().__init__()
            self.length = 0

        def lazy_initialization(self, key_states: Any, value_states: Any) -> None:
            _, heads, _, dim = key_states.shape
            self.device = key_states.device
            self.key_buffer = key_states.new_empty((rows, heads, capacity, dim))
            self.value_buffer = value_states.new_empty((rows, value_states.shape[1], capacity,
                                                        value_states.shape[-1]))
            self.is_initialized = True

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            first, last = span
            end = self.length + key_states.shape[-2]
            self.key_buffer[first:last, :, self.length:end].copy_(key_states)
            self.value_buffer[first:last, :, self.length:end].copy_(value_states)
            self.length = end
            self.keys = self.key_buffer[first:last, :, :end]
            self.values = self.value_buffer[first:last, :, :end]
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.length

        def batch_select_indices(self, indices: Any) -> None:
            """Keep rows ``indices`` (ascending), moved to the front of the buffer in place: no second buffer."""
            if not self.is_initialized:
                return
            for target, source in enumerate(indices.tolist()):
                if source != target:  # source >= target: rows not yet moved are never overwritten
                    self.key_buffer[target].copy_(self.key_buffer[source])
                    self.value_buffer[target].copy_(self.value_buffer[source])
            span[0], span[1] = 0, len(indices)
            self.keys = self.key_buffer[:len(indices), :, :self.length]
            self.values = self.value_buffer[:len(indices), :, :self.length]

        def spread(self, owner: list[int]) -> None:
            """Row ``r`` becomes a copy of row ``owner[r]`` (``owner`` non-decreasing, ``owner[r] <= r``), in place."""
            for target in range(len(owner) - 1, -1, -1):
                source = owner[target]
                if source != target:  # only rows after `target` were written so far, and source <= target
                    self.key_buffer[target].copy_(self.key_buffer[source])
                    self.value_buffer[target].copy_(self.value_buffer[source])
            span[0], span[1] = 0, len(owner)
            self.keys = self.key_buffer[:len(owner), :, :self.length]
            self.values = self.value_buffer[:len(owner), :, :self.length]

    span = [0, rows]
    cache = DynamicCache()
    cache.layers = [SlabLayer() for _ in range(num_layers)]
    cache.layer_class_to_replicate = None
    cache.userturn_span = span
    return cache


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
        batch_size: the most rows per forward pass; 0 means 64. Fewer are used when memory is short.
        threads: CPU threads for torch; 0 keeps torch's default.
        trust_remote_code: allow model repositories to run their own Python code (off by default).
        allow_pickle: allow ``.bin`` (pickle) weights; only safetensors/GGUF load otherwise.
        token_budget: cap rows × (prompt + new tokens) per batch at this many tokens (0: no cap), so that
            the KV cache of one batch, hence peak memory, does not grow with the longest prompt of a run.
        share_prefix: prefill each distinct prompt once per batch and share its cache (on by default;
            off only to measure what sharing saves).
    """

    def __init__(self, model: str, *, device: str = "auto", dtype: str = "auto", batch_size: int = 0,
                 threads: int = 0, trust_remote_code: bool = False, allow_pickle: bool = False,
                 token_budget: int = DEFAULT_TOKEN_BUDGET, share_prefix: bool = True) -> None:
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
                                      dtype=str(self.torch_dtype).removeprefix("torch."), engine=ENGINE_VERSION)
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
        self.share_prefix = share_prefix
        self.reset_stats()
        self.stop_ids = torch.tensor(sorted(self.turn_end.token_ids) or [-1], dtype=torch.long, device=self.device)
        config = self.model.config.get_text_config(decoder=True)
        self.num_layers = int(config.num_hidden_layers)
        heads = int(config.num_attention_heads)
        kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
        itemsize = torch.empty((), dtype=self.torch_dtype).element_size()
        self.kv_bytes_per_token = 2 * self.num_layers * kv_heads * head_dim * itemsize
        self.activation_bytes_per_token = (4 * int(config.hidden_size) + 3 * int(config.intermediate_size)
                                           + heads * head_dim) * itemsize
        self.vocab_size = int(config.vocab_size)
        # transformers 5.x renamed the forward argument `past_key_values` to `cache`.
        forward_args = inspect.signature(self.model.forward).parameters
        self.cache_arg = "cache" if "cache" in forward_args else "past_key_values"
        keep = next((n for n in ("logits_to_keep", "num_logits_to_keep") if n in forward_args), None)
        self.last_logits_only = {keep: 1} if keep else {}

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def reset_stats(self) -> None:
        """Zero the engine counters in ``stats`` (seconds in prefill and decode, tokens, steps, batches)."""
        self.stats: dict[str, float] = dict.fromkeys(
            ("prefill_seconds", "decode_seconds", "prefill_tokens", "decode_steps", "decode_rows", "batches"), 0)

    def _clock(self) -> float:
        import torch

        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter()

    def rows_per_batch(self, width: int, max_new: int, *, available: int | None = None,
                       token_slack: float = 1.0) -> int:
        """How many rows of a ``width``-token prompt and ``max_new`` new tokens fit in one batch.

        Args:
            available: bytes free for the batch; measured (see :func:`available_memory`) when None.
            token_slack: multiplies the token budget (never the memory bound or the row cap).
        """
        cap = self.batch_size if self.batch_size > 0 else DEFAULT_MAX_ROWS
        tokens = width + max_new
        if self.token_budget > 0:
            cap = min(cap, int(self.token_budget * token_slack) // max(1, tokens))
        per_row = (self.kv_bytes_per_token * tokens + self.activation_bytes_per_token * width
                   + 4 * 4 * self.vocab_size)
        if available is None:
            available = available_memory(self.device)
        return max(1, min(cap, int(available * MEMORY_SHARE) // max(1, per_row)))

    def generate(self, requests: Sequence[GenerationRequest],
                 progress: ProgressCallback | None = None) -> list[list[Completion]]:
        import torch

        encoded_by_prompt: dict[str, list[int]] = {}
        for r in requests:
            if r.prompt not in encoded_by_prompt:
                encoded_by_prompt[r.prompt] = self._tokenizer.encode(r.prompt, add_special_tokens=False)
        encoded = [encoded_by_prompt[r.prompt] for r in requests]
        rows = [(ri, ci) for ri, r in enumerate(requests) for ci in range(r.params.n)]
        # Longest first (an out-of-memory error shows on the first batch, not after an hour); rows of
        # one prompt stay together so that a batch prefills each prompt once.
        rows.sort(key=lambda rc: (-len(encoded[rc[0]]), requests[rc[0]].prompt, rc[0], rc[1]))
        results: list[list[Completion | None]] = [[None] * r.params.n for r in requests]
        done = tokens = 0
        start = 0
        while start < len(rows):
            width = len(encoded[rows[start][0]])
            window = rows[start:start + (self.batch_size or DEFAULT_MAX_ROWS)]
            max_new = max(requests[ri].params.max_tokens for ri, _ in window)
            size = self.rows_per_batch(width, max_new)
            left = len(rows) - start
            if size < left <= self.rows_per_batch(width, max_new, token_slack=TAIL_SLACK):
                size = left  # a small tail rides along rather than decoding alone at a fraction of the speed
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

    def _prefill(self, prompts: list[list[int]], capacity: int, rows: int) -> tuple[Any, Any, Any, Any]:
        """Run the prompts (left-padded) through the model; returns logits, cache, mask and positions.

        The cache has room for ``rows`` rows (the prompts fill the first ones), so that sharing a
        prompt with more rows later needs no second buffer.
        """
        import torch

        width = max(len(ids) for ids in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), capacity), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids):width] = 1
        attention = attention.to(self.device)
        input_ids = input_ids.to(self.device)
        positions = (attention[:, :width].cumsum(-1) - 1).clamp(min=0)
        cache = _slab_cache(self.num_layers, capacity, rows)
        span = getattr(cache, "userturn_span", None)
        # A bounded number of prompt tokens per forward pass keeps activation memory flat.
        group = max(1, PREFILL_TOKENS // width) if span is not None else len(prompts)
        logits = []
        for first in range(0, len(prompts), group):
            last = min(len(prompts), first + group)
            if span is not None:
                span[0], span[1] = first, last
                for layer in cache.layers:
                    layer.length = 0
            out = self.model(input_ids=input_ids[first:last], attention_mask=attention[first:last, :width],
                             position_ids=positions[first:last], use_cache=True, **self.last_logits_only,
                             **{self.cache_arg: cache})
            logits.append(out.logits[:, -1, :].float())
        if span is not None:
            span[0], span[1] = 0, len(prompts)
        return torch.cat(logits), cache, attention, positions[:, -1]

    def _generate_batch(self, requests: Sequence[GenerationRequest], encoded: list[list[int]],
                        batch: list[tuple[int, int]]) -> list[Completion]:
        import torch

        params = [requests[ri].params for ri, _ in batch]
        sampler = _RowSampler(
            temperatures=[p.temperature for p in params],
            top_ps=[p.top_p for p in params],
            seeds=[p.seed + ci for p, (_, ci) in zip(params, batch, strict=True)],
            device=self.device,
        )
        max_new = max(p.max_tokens for p in params)
        width = max(len(encoded[ri]) for ri, _ in batch)
        capacity = width + max_new
        if self.share_prefix:
            firsts: dict[str, int] = {}
            for ri, _ in batch:
                firsts.setdefault(requests[ri].prompt, len(firsts))
            prompts = []
            seen: set[str] = set()
            for ri, _ in batch:
                if requests[ri].prompt not in seen:
                    seen.add(requests[ri].prompt)
                    prompts.append(encoded[ri])
            owner = [firsts[requests[ri].prompt] for ri, _ in batch]
        else:
            prompts = [encoded[ri] for ri, _ in batch]
            owner = list(range(len(batch)))
        began = self._clock()
        logits, cache, attention, last_position = self._prefill(prompts, capacity, len(batch))
        if len(prompts) != len(batch):
            index = torch.tensor(owner, dtype=torch.long, device=self.device)
            if hasattr(cache, "userturn_span"):
                for layer in cache.layers:
                    layer.spread(owner)
            else:
                cache.batch_select_indices(index)
            logits, attention, last_position = logits[index], attention[index], last_position[index]
        prefilled = self._clock()
        self.stats["prefill_seconds"] += prefilled - began
        self.stats["prefill_tokens"] += sum(len(p) for p in prompts)
        self.stats["batches"] += 1
        attention[:, width:] = 1  # generated positions; only the first `length` columns are ever read
        limits = torch.tensor([p.max_tokens for p in params], dtype=torch.long, device=self.device)
        generated = torch.full((len(batch), max_new), self.pad_id, dtype=torch.long, device=self.device)
        active = torch.arange(len(batch), device=self.device)  # batch row of each live row
        finished = torch.zeros(len(batch), dtype=torch.bool, device=self.device)
        length = width
        for step in range(max_new):
            next_tokens = sampler(logits)
            generated[active, step] = next_tokens
            finished |= torch.isin(next_tokens, self.stop_ids) | (limits[active] <= step + 1)
            if step + 1 == max_new:
                break
            stopped = int(finished.sum())
            if stopped == len(active):
                break
            if stopped and stopped >= DROP_AT * len(active):
                # Drop finished rows: their cache copy costs less than computing them on.
                keep = torch.nonzero(~finished).flatten()
                cache.batch_select_indices(keep)
                sampler.keep(keep.tolist())
                active, next_tokens = active[keep], next_tokens[keep]
                attention, last_position, finished = attention[keep], last_position[keep], finished[keep]
            last_position = last_position + 1
            length += 1
            out = self.model(input_ids=next_tokens[:, None], attention_mask=attention[:, :length],
                             position_ids=last_position[:, None], use_cache=True, **{self.cache_arg: cache})
            logits = out.logits[:, -1, :].float()
            self.stats["decode_steps"] += 1
            self.stats["decode_rows"] += len(active)
        self.stats["decode_seconds"] += self._clock() - prefilled
        stop_ids = set(self.turn_end.token_ids)
        new_tokens = generated.tolist()
        return [self._finish(new_tokens[row][: p.max_tokens], p.stop, stop_ids) for row, p in enumerate(params)]

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
    known = {"device", "dtype", "batch_size", "threads", "trust_remote_code", "allow_pickle", "token_budget",
             "share_prefix"}
    unknown = set(options) - known
    if unknown:
        raise ConfigError(f"the transformers backend does not take option(s): {', '.join(sorted(unknown))}")
    threads = options.pop("threads", 0) or int(os.environ.get("USERTURN_THREADS", "0") or 0)
    return TransformersBackend(model, threads=threads, **options)
