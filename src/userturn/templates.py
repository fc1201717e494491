"""Chat-template rendering, and opening a *user* turn with any Jinja chat template.

Chat templates only know how to open an *assistant* turn (``add_generation_prompt``). To open a
user turn we render the conversation plus a user message that holds a sentinel string, cut the
text at the sentinel, and check that what comes before it is exactly the rendering of the
conversation so far followed by a user header. Everything here is pure given a tokenizer.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from userturn.errors import TemplateError
from userturn.records import Message, messages_to_dicts

# Letters and digits only, so that no template escapes, trims or re-cases it.
SENTINEL = "Xq7UserturnSentinel3Kz"


def sentinel_for(messages: Sequence[Message]) -> str:
    """:data:`SENTINEL`, or ``SENTINEL`` plus a number when some message already contains it.

    The cut point must be unambiguous: a conversation that quotes the sentinel (a test, a crafted dataset
    item) gets a variant that appears nowhere in it.
    """
    text = "\n".join(m.content for m in messages)
    sentinel, n = SENTINEL, 0
    while sentinel in text:
        n += 1
        sentinel = f"{SENTINEL}{n}Z"
    return sentinel


def _apply(tokenizer: Any, messages: Sequence[Message], *, add_generation_prompt: bool,
           thinking: bool | None) -> str:
    kwargs: dict[str, Any] = {}
    if thinking is not None:
        kwargs["enable_thinking"] = thinking
    rendered = tokenizer.apply_chat_template(
        messages_to_dicts(list(messages)), tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
    )
    if not isinstance(rendered, str):  # some tokenizers return a list when given a batch
        raise TemplateError("the chat template did not render to a single string")
    return rendered


def require_chat_template(tokenizer: Any, model_name: str) -> None:
    """Raise :class:`TemplateError` unless the tokenizer has a chat template."""
    if not getattr(tokenizer, "chat_template", None):
        raise TemplateError(
            f"model '{model_name}' has no chat template; userturn needs one to render conversations "
            "(pick an instruct/chat model, or set tokenizer.chat_template in its tokenizer_config.json)"
        )


def render_assistant_prompt(tokenizer: Any, messages: Sequence[Message], *, thinking: bool | None = None,
                            model_name: str = "model") -> str:
    """The text that asks the model for the next *assistant* turn (``add_generation_prompt=True``)."""
    try:
        return _apply(tokenizer, messages, add_generation_prompt=True, thinking=thinking)
    except TemplateError:
        raise
    except Exception as exc:  # Jinja raise_exception() and friends
        raise TemplateError(f"the chat template of '{model_name}' failed to render the query: {exc}") from exc


def open_user_turn(tokenizer: Any, messages: Sequence[Message], *, thinking: bool | None = None,
                   model_name: str = "model") -> str:
    """The exact text that makes the model write the next *user* turn after ``messages``.

    Args:
        tokenizer: any tokenizer with a Jinja ``chat_template``.
        messages: the conversation so far, usually ``[user query, assistant response]``; may be empty
            (the ``no_context`` perturbation), in which case the result is a bare user header
            (with whatever system prompt the template injects by default).
        thinking: passed to templates as ``enable_thinking`` when not None.
        model_name: used in error messages only.

    Raises:
        TemplateError: the template rejects the conversation (e.g. two consecutive roles it does not
            allow), drops or alters the sentinel, or renders the earlier turns differently once a user
            message follows them, so that no exact user header can be cut out.
    """
    sentinel = sentinel_for(messages)
    probe = [*messages, Message("user", sentinel)]
    try:
        with_sentinel = _apply(tokenizer, probe, add_generation_prompt=False, thinking=thinking)
    except Exception as exc:
        raise TemplateError(
            f"the chat template of '{model_name}' cannot open a user turn after "
            f"[{', '.join(m.role for m in messages) or 'nothing'}]: {exc}"
        ) from exc
    cut = with_sentinel.find(sentinel)
    if cut < 0 or with_sentinel.find(sentinel, cut + 1) >= 0:
        raise TemplateError(
            f"the chat template of '{model_name}' does not render user content verbatim, so a user turn cannot be opened"
        )
    prefix = with_sentinel[:cut]
    if messages:
        try:
            so_far = _apply(tokenizer, messages, add_generation_prompt=False, thinking=thinking)
        except Exception as exc:
            raise TemplateError(f"the chat template of '{model_name}' cannot render the conversation: {exc}") from exc
    else:
        so_far = ""
    if not prefix.startswith(so_far):
        raise TemplateError(
            f"the chat template of '{model_name}' renders the conversation differently once a user turn follows it, "
            "so the user turn cannot be opened exactly"
        )
    header = prefix[len(so_far):]
    if not header.strip() and messages:
        raise TemplateError(f"the chat template of '{model_name}' writes no user header; it cannot open a user turn")
    return prefix


def user_header(tokenizer: Any, *, thinking: bool | None = None, model_name: str = "model") -> str:
    """What the template writes between a finished assistant turn and the user's words (for display)."""
    convo = [Message("user", "hello"), Message("assistant", "hi")]
    opened = open_user_turn(tokenizer, convo, thinking=thinking, model_name=model_name)
    return opened[len(_apply(tokenizer, convo, add_generation_prompt=False, thinking=thinking)):]


@dataclass(frozen=True)
class TurnEnd:
    """How a turn ends under a template: special token ids, and plain-text markers for templates without them."""

    token_ids: tuple[int, ...]
    strings: tuple[str, ...]


def turn_end(tokenizer: Any, extra_eos_ids: Sequence[int] = ()) -> TurnEnd:
    """Find the end-of-turn token(s) of a template, plus the tokenizer's EOS.

    The template is rendered with a short user and assistant message; the special tokens that
    follow each message's content are end-of-turn markers (``<|im_end|>``, ``<|eot_id|>``,
    ``<end_of_turn>``, ``</s>``...). When a template ends turns with plain text only, that text is
    returned as a stop string instead.
    """
    special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    special_ids |= {i for i, tok in added.items() if getattr(tok, "special", False)}
    ids: set[int] = set(int(i) for i in extra_eos_ids)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    strings: list[str] = []
    convo = [Message("user", "Ping1"), Message("assistant", "Pong2"), Message("user", "Ping3")]
    try:
        rendered = _apply(tokenizer, convo, add_generation_prompt=False, thinking=None)
    except Exception:
        rendered = ""
    for marker, follower in (("Pong2", "Ping3"), ("Ping3", None)):
        start = rendered.find(marker)
        if start < 0:
            continue
        start += len(marker)
        end = rendered.find(follower, start) if follower else len(rendered)
        tail = rendered[start:end]
        found = [t for t in tokenizer.encode(tail, add_special_tokens=False) if t in special_ids]
        if found:
            ids.add(int(found[0]))
        elif tail.strip():
            # A template without special tokens: the first line of the tail ends the turn.
            strings.append(tail.strip().splitlines()[0])
    return TurnEnd(tuple(sorted(ids)), tuple(dict.fromkeys(s for s in strings if s)))


_REASONING = re.compile(
    r"<(think|thinking|reasoning|thought)>.*?(</\1>|\Z)", re.DOTALL | re.IGNORECASE
)
_ORPHAN_CLOSE = re.compile(r"^.*</(think|thinking|reasoning|thought)>", re.DOTALL | re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """Remove reasoning blocks so they never enter the next stage's context.

    ``<think>…</think>`` (and ``thinking``/``reasoning``/``thought``) blocks are dropped; an unclosed
    block runs to the end of the text; a closing tag with no opening one (templates that put
    ``<think>`` in the prompt) drops everything before it.
    """
    visible = _ORPHAN_CLOSE.sub("", text) if not re.search(r"<(think|thinking|reasoning|thought)>", text,
                                                            re.IGNORECASE) else text
    visible = _REASONING.sub("", visible)
    return visible.strip()


def template_hash(tokenizer: Any) -> str:
    """A short hash of everything in the tokenizer that changes rendered prompts."""
    payload = {
        "template": getattr(tokenizer, "chat_template", None),
        "special": {k: str(v) for k, v in sorted((getattr(tokenizer, "special_tokens_map", {}) or {}).items())},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]
