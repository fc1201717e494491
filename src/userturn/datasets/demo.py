"""The built-in demo set: 36 short items written for userturn, runnable offline in minutes.

Three kinds, interleaved so that any ``--limit`` keeps a mix:
math word problems with numeric answers, instructions with programmatically checkable
constraints, and open conversation starters (no verifier, accuracy ``null``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from importlib import resources

from userturn.datasets import DatasetSpec, LoadOptions, register_dataset
from userturn.records import Item, Message, Verdict
from userturn.verifiers.numeric import extract_last_number, numbers_equal


def _load(options: LoadOptions) -> Iterator[Item]:
    text = resources.files("userturn.datasets").joinpath("demo_items.jsonl").read_text(encoding="utf-8")
    for line in text.splitlines():
        row = json.loads(line)
        yield Item(
            id=row["id"],
            dataset="demo",
            messages=(Message("user", row["query"]),),
            answer=row.get("answer"),
            meta={"kind": row["kind"], "checks": row.get("checks", [])},
        )


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9']+", text)


def _bullets(text: str) -> int:
    return sum(1 for line in text.splitlines() if re.match(r"^\s*[*\-]\s+\S", line))


def check_constraint(check: dict, response: str) -> bool:
    """One demo constraint: ``{"type": ..., "value": ...}``; unknown types fail loudly."""
    kind, value = check["type"], check.get("value")
    stripped = response.strip()
    if kind == "max_words":
        return len(_words(stripped)) <= int(value)
    if kind == "min_words":
        return len(_words(stripped)) >= int(value)
    if kind == "lowercase":
        return stripped == stripped.lower() and any(c.isalpha() for c in stripped)
    if kind == "uppercase":
        return stripped == stripped.upper() and any(c.isalpha() for c in stripped)
    if kind == "no_comma":
        return "," not in stripped
    if kind == "bullet_count":
        return _bullets(stripped) == int(value)
    if kind == "include_word":
        return re.search(rf"\b{re.escape(str(value))}\b", stripped, re.IGNORECASE) is not None
    if kind == "end_with":
        return stripped.rstrip(" .!\"'").endswith(str(value))
    if kind == "start_with":
        return stripped.startswith(str(value))
    raise ValueError(f"unknown demo constraint type {kind!r}")


def verify_demo(item: Item, response: str) -> Verdict:
    kind = item.meta.get("kind")
    if kind == "math":
        extracted = extract_last_number(response)
        return Verdict(correct=numbers_equal(extracted, item.answer), extracted=extracted)
    if kind == "instruction":
        results = {c["type"]: check_constraint(c, response) for c in item.meta["checks"]}
        return Verdict(correct=all(results.values()), details={"checks": results})
    return Verdict(correct=None)


register_dataset(
    DatasetSpec(
        name="demo",
        description="built-in: 14 math word problems, 12 checkable instructions, 10 open starters",
        load=_load,
        verify=verify_demo,
        verifier_description="math: last number equals the answer; instructions: every constraint holds; open: none",
        size=36,
    )
)
