"""Assistant stage: answer each item's query with the model's own chat template."""

from __future__ import annotations

from collections.abc import Sequence

from userturn.backends.base import Backend
from userturn.records import AssistantTurn, Item, SamplingParams
from userturn.stages.generation import ProgressHook, Unit, generate_cached
from userturn.store import Store
from userturn.templates import render_assistant_prompt, strip_reasoning, template_hash


def assistant_prompts(items: Sequence[Item], backend: Backend, *, thinking: bool | None) -> list[str]:
    """The exact prompt text of each item's assistant turn."""
    return [
        render_assistant_prompt(backend.tokenizer, item.messages, thinking=thinking, model_name=backend.identity.name)
        for item in items
    ]


def run_assistant_stage(items: Sequence[Item], backend: Backend, store: Store, *, params: SamplingParams,
                        thinking: bool | None = None, chunk_rows: int = 32,
                        progress: ProgressHook | None = None) -> list[AssistantTurn]:
    """Generate (or read back from the store) one assistant response per item.

    Items with a ``given_response`` (conversation corpora, ``--responses`` files) keep it and are
    not sent to the model. Reasoning blocks are stripped from ``response_visible``, which is what
    the user-turn stage sees.
    """
    prompts = assistant_prompts(items, backend, thinking=thinking)
    todo = [i for i, item in enumerate(items) if item.given_response is None]
    units = [Unit(prompts[i], params) for i in todo]
    completions = generate_cached(units, backend, store, template=template_hash(backend.tokenizer),
                                  stage="assistant", chunk_rows=chunk_rows, progress=progress)
    generated = dict(zip(todo, completions, strict=True))
    turns = []
    for i, item in enumerate(items):
        if i in generated:
            c = generated[i]
            response, finish, was_generated = c.text, c.finish_reason, True
        else:
            response, finish, was_generated = item.given_response or "", "given", False
        turns.append(AssistantTurn(item=item, model=backend.identity.name, prompt=prompts[i], response=response,
                                   response_visible=strip_reasoning(response), finish_reason=finish,
                                   generated=was_generated))
    return turns
