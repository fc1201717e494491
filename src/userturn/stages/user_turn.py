"""User-turn stage: open a user turn after ``[query, response]`` and let the model write it.

Greedy once (when 0 is in the temperature grid) and ``k`` samples at every other temperature.
Each sample's seed derives from the run seed, the item, the perturbation and the temperature,
so it is the same whatever else is in the run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from userturn.backends.base import Backend
from userturn.perturbations import get_perturbation, resolve_options
from userturn.records import SamplingParams, ScoredTurn, UserTurn, UserTurnContext
from userturn.stages.generation import ProgressHook, Unit, generate_cached
from userturn.store import Store
from userturn.templates import open_user_turn, template_hash


def sample_seed(run_seed: int, context: UserTurnContext, temperature: float) -> int:
    """The base seed of a context's samples at one temperature (sample ``i`` uses ``base + i``)."""
    item = context.scored.turn.item
    text = f"{run_seed}|{item.dataset}|{item.id}|{context.perturbation}|{temperature:.6f}"
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


def build_contexts(scored: Sequence[ScoredTurn], perturbations: Sequence[str],
                   options: Mapping[str, Mapping[str, Any]] | None = None, seed: int = 0) -> list[UserTurnContext]:
    """Apply each perturbation to every scored turn (grouped by dataset for borrowing perturbations).

    Args:
        options: per-perturbation options (``{"truncate": {"fraction": 0.3}}``); missing ones take
            the perturbation's defaults. The resolved options are recorded in every context.
        seed: the run seed; seeded perturbations (wrong_answer, swap_response) derive their choices
            from it and the item, never from the model.

    Items a perturbation does not apply to (see :mod:`userturn.perturbations`) get no context for it.
    """
    by_dataset: dict[str, list[ScoredTurn]] = {}
    for s in scored:
        by_dataset.setdefault(s.turn.item.dataset, []).append(s)
    contexts = []
    for name in perturbations:
        perturbation = get_perturbation(name)
        resolved = resolve_options(name, (options or {}).get(name))
        for s in scored:
            messages = perturbation.apply(s, by_dataset[s.turn.item.dataset], resolved, seed)
            if messages is None:
                continue
            contexts.append(UserTurnContext(scored=s, perturbation=name, messages=messages,
                                            options=resolved))
    return contexts


def plan_samples(temperatures: Sequence[float], samples: int) -> list[tuple[float, int]]:
    """``(temperature, sample_index)`` pairs: one greedy sample at 0, ``samples`` at every other temperature."""
    plan = []
    for t in temperatures:
        plan.extend([(t, 0)] if t <= 0 else [(t, i) for i in range(samples)])
    return plan


def run_user_turn_stage(contexts: Sequence[UserTurnContext], backend: Backend, store: Store, *,
                        temperatures: Sequence[float], samples: int, top_p: float, max_new_tokens: int,
                        run_seed: int, thinking: bool | None = None, chunk_rows: int = 32,
                        progress: ProgressHook | None = None) -> list[UserTurn]:
    """Generate every planned user turn for every context, reading stored ones back."""
    name = backend.identity.name
    prompts = [open_user_turn(backend.tokenizer, c.messages, thinking=thinking, model_name=name) for c in contexts]
    plan = plan_samples(temperatures, samples)
    units, owners = [], []
    for ci, context in enumerate(contexts):
        for temperature, index in plan:
            base = sample_seed(run_seed, context, temperature)
            params = SamplingParams(temperature=temperature, top_p=top_p if temperature > 0 else 1.0,
                                    max_tokens=max_new_tokens, seed=base + index)
            units.append(Unit(prompts[ci], params, sample_index=index))
            owners.append((ci, temperature, index))
    completions = generate_cached(units, backend, store, template=template_hash(backend.tokenizer),
                                  stage="user_turn", chunk_rows=chunk_rows, progress=progress)
    return [
        UserTurn(context=contexts[ci], user_model=name, prompt=prompts[ci], temperature=t, sample_index=i,
                 seed=unit.params.seed, text=c.text, finish_reason=c.finish_reason)
        for (ci, t, i), unit, c in zip(owners, units, completions, strict=True)
    ]
