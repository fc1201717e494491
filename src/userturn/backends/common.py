"""Small pure helpers shared by the backends: option parsing, stop handling, the rendering tokenizer.

Nothing here imports an engine; every function is usable (and tested) without vLLM, llama.cpp or
a server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from userturn.errors import ConfigError, ModelError
from userturn.models import ResolvedModel, resolve_model
from userturn.records import Completion
from userturn.templates import TurnEnd


def parse_value(text: str) -> Any:
    """Read one ``--engine-arg`` value: JSON when it parses (``true``, ``0.9``, ``{"a": 1}``), else the string.

    Args:
        text: the part after ``=``; ``none``/``None``/``null`` give None, an empty string stays ``""``.
    """
    if text in {"none", "None"}:
        return None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text


def parse_engine_args(pairs: Iterable[str] | Mapping[str, Any] | None) -> dict[str, Any]:
    """Turn ``["key=value", ...]`` into a dict; a mapping is returned as a copy.

    Args:
        pairs: each item ``key=value``; dashes in the key become underscores (``max-num-seqs`` ->
            ``max_num_seqs``) so that vLLM's command-line spelling works too. A later key wins.

    Raises:
        ConfigError: an item without ``=`` or with an empty key.
    """
    if pairs is None:
        return {}
    if isinstance(pairs, Mapping):
        return dict(pairs)
    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = str(pair).partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError(f"--engine-arg '{pair}' is not of the form key=value")
        parsed[key] = parse_value(value.strip())
    return parsed


def as_list(value: str | Sequence[str] | None) -> list[str]:
    """A repeatable option as a list: None -> [], ``"a"`` -> ``["a"]``, ``"a,b"`` stays one item."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    return [str(v) for v in value if str(v)]


def reject_unknown(what: str, given: Iterable[str], known: Iterable[str]) -> None:
    """Raise :class:`ConfigError` naming the keys of ``given`` that ``what`` does not take."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ConfigError(
            f"{what} does not take option(s): {', '.join(unknown)} (it takes: {', '.join(sorted(known))})"
        )


def route_engine_args(options: Mapping[str, Any], named: Iterable[str]) -> dict[str, Any]:
    """Split keyword options into the backend's own and the engine's (``engine_args``).

    ``userturn run --engine-arg key=value`` hands every pair to the backend as a keyword option. Keys the
    backend names (``tensor_parallel_size``, ``base_url``...) stay options; every other key joins
    ``engine_args`` and goes to the engine (``vllm.LLM``, ``llama_cpp.Llama``, the request body). Pairs in an
    explicit ``engine_args`` list/dict that name an option are moved to it; an option given by name wins.
    """
    names = set(named) - {"engine_args"}
    routed = {k: v for k, v in options.items() if k in names}
    engine = parse_engine_args(options.get("engine_args"))
    for key, value in options.items():
        if key not in names and key != "engine_args":
            engine[key] = value
    for key in [k for k in engine if k in names]:
        routed.setdefault(key, engine.pop(key))
    routed["engine_args"] = engine
    return routed


def load_render_tokenizer(model: str, tokenizer: str | None = None, *,
                          trust_remote_code: bool = False) -> tuple[Any, ResolvedModel]:
    """The Hugging Face tokenizer userturn renders prompts with, for a model served by another engine.

    Args:
        model: what ``--model`` names (``embedded``, a folder, a ``.gguf`` file, a hub id). It is
            resolved as for the transformers backend, so the same model renders the same bytes whichever
            backend runs it.
        tokenizer: a different tokenizer source (folder, ``.gguf`` file or hub id) when ``model`` is a
            name only the server knows (``--engine-arg tokenizer=...``); None uses ``model``.
        trust_remote_code: passed to ``AutoTokenizer``.

    Raises:
        ModelError: the source cannot be resolved or has no tokenizer.
    """
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    resolved = resolve_model(tokenizer or model)
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if resolved.gguf_file:
        kwargs["gguf_file"] = resolved.gguf_file
    try:
        loaded = AutoTokenizer.from_pretrained(resolved.source, **kwargs)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load the tokenizer of '{tokenizer or model}': {str(exc).splitlines()[0]}") from exc
    return loaded, resolved


def single_gguf(path: Path) -> Path:
    """A ``.gguf`` file, or the only ``.gguf`` file in a folder.

    Raises:
        ModelError: no file, or a folder with zero or several GGUF files.
    """
    if path.is_file():
        if path.suffix != ".gguf":
            raise ModelError(f"'{path}' is not a .gguf file")
        return path
    if path.is_dir():
        found = sorted(path.glob("*.gguf"))
        if len(found) == 1:
            return found[0]
        raise ModelError(f"folder '{path}' holds {len(found)} .gguf files; name the one to load")
    raise ModelError(f"no such GGUF file or folder: '{path}'")


def stop_strings(turn_end: TurnEnd, tokenizer: Any, extra: Sequence[str] = ()) -> list[str]:
    """Every text marker that ends a turn: extra stop strings, plain-text turn ends, and stop tokens as text.

    Servers that only take stop *strings* (``/v1/completions``) get the special stop tokens in their
    text form too, so that a server that prints ``<|im_end|>`` instead of stopping on it still stops.
    """
    markers = list(extra) + list(turn_end.strings)
    for token_id in turn_end.token_ids:
        text = tokenizer.decode([int(token_id)], skip_special_tokens=False)
        if text.strip():
            markers.append(text)
    return list(dict.fromkeys(m for m in markers if m))


def cut_at_markers(text: str, markers: Iterable[str]) -> tuple[str, bool]:
    """``text`` up to the earliest marker, and whether one was found."""
    cut = min((pos for pos in (text.find(m) for m in markers if m) if pos >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def finish_completion(ids: Sequence[int], *, stop_ids: Iterable[int], markers: Iterable[str],
                      decode: Callable[[list[int]], str]) -> Completion:
    """Build a :class:`Completion` from generated token ids, as the transformers backend does.

    Args:
        ids: the generated ids, possibly including the stop token and anything after it.
        stop_ids: end-of-turn/EOS ids; the first one ends the completion (and is not part of it).
        markers: stop strings; the text is cut at the earliest one.
        decode: ids -> text with special tokens kept (``skip_special_tokens=False``).

    Returns:
        ``finish_reason`` ``"stop"`` when a stop id or marker ended the text, else ``"length"``.
    """
    stops = set(int(i) for i in stop_ids)
    kept = list(ids)
    reason = "length"
    for pos, tok in enumerate(kept):
        if int(tok) in stops:
            kept, reason = kept[:pos], "stop"
            break
    text, cut = cut_at_markers(decode(kept), markers)
    if cut:
        reason = "stop"
    return Completion(text=text, token_ids=tuple(int(t) for t in kept), finish_reason=reason)  # type: ignore[arg-type]
