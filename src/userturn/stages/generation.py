"""Cached generation shared by the assistant and user-turn stages.

A *unit* is one completion: a prompt, sampling parameters with ``n=1`` and that completion's own
seed, and its sample index. Units already in the store are read back; the rest are grouped into
backend requests (consecutive sample indices of one prompt become one request with ``n > 1``)
and generated chunk by chunk, each chunk committed before the next starts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from userturn import crashpoints
from userturn.backends.base import Backend
from userturn.records import Completion, GenerationRequest, SamplingParams
from userturn.store import Store, generation_key

ProgressHook = Callable[[int, int], None]
"""``hook(completions_done, tokens_generated)``: both are increments."""


@dataclass(frozen=True)
class Unit:
    prompt: str
    params: SamplingParams
    sample_index: int = 0

    @property
    def seed(self) -> int:
        return self.params.seed


def unit_request(unit: Unit, backend: Backend, template: str, stage: str) -> dict[str, Any]:
    """Everything that determines a completion: the store key is the hash of this dict."""
    return {
        "stage": stage,
        "model": backend.identity.key(),
        "template": template,
        "prompt": unit.prompt,
        "sampling": unit.params.key(),
        "seed": None if unit.params.greedy else unit.params.seed,
        "sample_index": unit.sample_index,
    }


def _group(units: Sequence[tuple[int, Unit]]) -> list[tuple[GenerationRequest, list[int]]]:
    """Merge units of one prompt with consecutive seeds into one request with ``n`` completions."""
    groups: list[tuple[GenerationRequest, list[int]]] = []
    ordered = sorted(units, key=lambda iu: (iu[1].prompt, iu[1].params.key().__repr__(), iu[1].seed))
    for index, unit in ordered:
        if groups:
            request, members = groups[-1]
            last = request.params
            if (request.prompt == unit.prompt and last.key() == unit.params.key() and not unit.params.greedy
                    and last.seed + last.n == unit.seed):
                groups[-1] = (replace(request, params=replace(last, n=last.n + 1)), [*members, index])
                continue
        groups.append((GenerationRequest(unit.prompt, replace(unit.params, n=1)), [index]))
    return groups


def generate_cached(units: Sequence[Unit], backend: Backend, store: Store, *, template: str, stage: str,
                    chunk_rows: int = 32, progress: ProgressHook | None = None) -> list[Completion]:
    """Return one completion per unit, generating only those the store does not hold.

    Args:
        units: the completions wanted, in any order; duplicates are generated once.
        chunk_rows: completions generated between two commits; smaller loses less on a crash,
            larger batches better.
        progress: called with increments as stored completions are found and new ones generated.
    """
    requests = [unit_request(u, backend, template, stage) for u in units]
    keys = [generation_key(r) for r in requests]
    found = store.get_many(list(dict.fromkeys(keys)))
    if progress and found:
        progress(sum(1 for k in keys if k in found), 0)
    missing: dict[str, int] = {}
    for index, key in enumerate(keys):
        if key not in found and key not in missing:
            missing[key] = index
    todo = sorted(missing.values(), key=lambda i: (len(units[i].prompt), units[i].prompt))
    duplicates = sum(1 for k in keys if k not in found) - len(todo)
    for start in range(0, len(todo), max(1, chunk_rows)):
        chunk = todo[start:start + chunk_rows]
        grouped = _group([(i, units[i]) for i in chunk])
        outputs = backend.generate([g for g, _ in grouped])
        entries = []
        tokens = 0
        for (_, members), completions in zip(grouped, outputs, strict=True):
            for index, completion in zip(members, completions, strict=True):
                entries.append((keys[index], stage, requests[index], completion))
                found[keys[index]] = completion
                tokens += len(completion.token_ids)
        crashpoints.reached(f"{stage}.uncommitted", len(entries))
        store.put_many(entries)
        crashpoints.reached(stage, len(entries))
        if progress:
            progress(len(chunk), tokens)
    if progress and duplicates:
        progress(duplicates, 0)
    return [found[k] for k in keys]
