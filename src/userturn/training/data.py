"""Training data for collaboration-oriented post-training: JSONL of ``messages``, built from real
conversations and from probe runs.

Two formats, one record per line:

* **sft**: ``{"messages": [...], "source": {...}}``: a conversation whose user turns that follow an
  assistant turn are what SFT learns (see :mod:`userturn.training.sft`). It ends with a user turn.
* **prompts**: ``{"messages": [..., assistant], "query": ..., "response": ..., "source": {...}}``:
  a conversation that ends with an assistant turn; RL asks the model for the next user turn and
  the reward classifies it against ``query`` and ``response``.

``source`` names where a record came from (``kind``, ``dataset``, ``item_ids``). Records from a
benchmark item carry its dataset and id, so that the before/after evaluation can run only on items
never used for training. A deterministic hash of ``dataset`` and item id holds a share of items out
of the data altogether (``holdout_percent``), so the evaluation has items left to run on.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from userturn.errors import ConfigError, DataError
from userturn.output import write_jsonl

ROLES = ("system", "user", "assistant")
FORMATS = ("sft", "prompts")


@dataclass(frozen=True)
class Record:
    """One training record before it is written: the messages and where they came from."""

    messages: tuple[tuple[str, str], ...]
    kind: str
    dataset: str | None = None
    item_ids: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self, data_format: str) -> dict[str, Any]:
        row: dict[str, Any] = {"messages": [{"role": r, "content": c} for r, c in self.messages]}
        if data_format == "prompts":
            row["query"] = next(c for r, c in reversed(self.messages) if r == "user")
            row["response"] = self.messages[-1][1]
        source: dict[str, Any] = {"kind": self.kind}
        if self.dataset:
            source["dataset"] = self.dataset
        if self.item_ids:
            source["item_ids"] = list(self.item_ids)
        source.update(self.extra)
        row["source"] = source
        return row


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of ``path``.

    Raises:
        DataError: the file is missing, a line is not JSON, or a line is not a JSON object.
    """
    if not path.is_file():
        raise DataError("file not found", path=str(path))
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"not valid JSON ({exc.msg})", path=str(path), line=number) from None
            if not isinstance(row, dict):
                raise DataError("expected a JSON object", path=str(path), line=number)
            yield number, row


def parse_messages(raw: Any, *, path: Path, line: int, field_name: str = "messages") -> tuple[tuple[str, str], ...]:
    """Validate a list of ``{"role", "content"}`` objects and return ``(role, content)`` pairs.

    Raises:
        DataError: not a non-empty list, or a message without a known role or a string content.
    """
    if not isinstance(raw, list) or not raw:
        raise DataError("expected a non-empty list of {role, content} messages", path=str(path), line=line,
                        field=field_name)
    pairs = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict) or message.get("role") not in ROLES \
                or not isinstance(message.get("content"), str):
            raise DataError(f"message {index} needs a role (system/user/assistant) and a string content",
                            path=str(path), line=line, field=field_name)
        pairs.append((message["role"], message["content"]))
    return tuple(pairs)


def is_heldout(dataset: str | None, item_id: str, percent: float) -> bool:
    """Whether an item belongs to the held-out split: a stable hash of dataset and id, below ``percent``.

    Args:
        percent: 0 holds nothing out, 100 holds everything out.
    """
    if percent <= 0:
        return False
    digest = hashlib.sha256(f"{dataset or ''}\0{item_id}".encode()).hexdigest()
    return int(digest[:8], 16) % 10_000 < percent * 100


def _trim_to_last_follow_up(messages: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...] | None:
    """Cut a conversation after its last user turn that follows an assistant turn; None if it has none."""
    for end in range(len(messages) - 1, 0, -1):
        if messages[end][0] == "user" and messages[end - 1][0] == "assistant":
            return tuple(messages[: end + 1])
    return None


def conversation_records(path: Path, data_format: str) -> list[Record]:
    """Records from a JSONL of conversations (``messages``; oasst1's ``message_ids`` used as item ids).

    sft: each conversation cut after its last user turn that follows an assistant turn.
    prompts: every distinct prefix that ends with an assistant turn followed by a user turn.
    """
    records: list[Record] = []
    for line, row in read_jsonl(path):
        messages = parse_messages(row.get("messages"), path=path, line=line)
        ids = row.get("message_ids")
        ids = [str(i) for i in ids] if isinstance(ids, list) and len(ids) == len(messages) else None
        base = str(row.get("id") or row.get("message_tree_id") or f"{path.stem}:{line}")
        cuts = [i for i in range(1, len(messages)) if messages[i][0] == "user" and messages[i - 1][0] == "assistant"]
        # An item is an assistant turn that a real user turn follows (the conversations dataset's ids).
        cut_ids = [ids[i - 1] if ids else f"{base}@{n}" for n, i in enumerate(cuts, 1)]
        if data_format == "sft":
            trimmed = _trim_to_last_follow_up(messages)
            if trimmed is not None:
                records.append(Record(trimmed, "conversations", "conversations", tuple(cut_ids)))
        else:
            for cut, cut_id in zip(cuts, cut_ids, strict=True):
                records.append(Record(tuple(messages[:cut]), "conversations", "conversations", (cut_id,)))
    return records


def mt_bench_records(path: Path, data_format: str) -> list[Record]:
    """Records from MT-Bench's ``question.jsonl``: [turn 1, reference answer, turn 2].

    Only questions with a ``reference`` answer for turn 1 have an assistant turn to follow up on
    (39 of 80); to use the others, run the probe on them and pass the run with ``--run`` (its
    ``reference_user_turn`` is MT-Bench's second turn).
    """
    records: list[Record] = []
    for line, row in read_jsonl(path):
        turns, reference = row.get("turns"), row.get("reference")
        if not isinstance(turns, list) or len(turns) < 2 or not all(isinstance(t, str) for t in turns):
            raise DataError("expected a list of at least two user turns", path=str(path), line=line, field="turns")
        if not isinstance(reference, list) or not reference or not isinstance(reference[0], str):
            continue
        item_id = str(row.get("question_id", line))
        convo = (("user", turns[0]), ("assistant", reference[0]))
        if data_format == "sft":
            convo = (*convo, ("user", turns[1]))
        records.append(Record(convo, "mt_bench", "mtbench", (item_id,)))
    return records


def run_records(run_dir: Path, data_format: str, *, labels: Sequence[str] = ("follow_up",),
                reference_turns: bool = True) -> list[Record]:
    """Records from a probe run's ``samples.jsonl``.

    sft: ``context + [user turn]`` for every generated user turn whose label is in ``labels``
    (rejection sampling: self-distillation from the model's own follow-ups), plus, when
    ``reference_turns``, ``context + [reference user turn]`` for items that have a human-written next
    turn (MT-Bench's second turn, a conversation corpus's real reply).
    prompts: every distinct context, whatever its samples were labelled.
    """
    path = run_dir / "samples.jsonl" if run_dir.is_dir() else run_dir
    records: list[Record] = []
    for line, row in read_jsonl(path):
        for key in ("item_id", "dataset", "context", "label", "user_turn"):
            if key not in row:
                raise DataError("not a userturn samples.jsonl line", path=str(path), line=line, field=key)
        context = parse_messages(row["context"], path=path, line=line, field_name="context")
        if not context or context[-1][0] != "assistant":
            continue
        ids = (str(row["item_id"]),)
        extra = {"perturbation": row.get("perturbation", "none")}
        if data_format == "prompts":
            records.append(Record(context, "run", row["dataset"], ids, extra))
            continue
        turn = str(row["user_turn"]).strip()
        if row["label"] in labels and turn:
            records.append(Record((*context, ("user", turn)), "run", row["dataset"], ids,
                                  {**extra, "label": row["label"], "temperature": row.get("temperature")}))
        reference = row.get("reference_user_turn")
        if reference_turns and isinstance(reference, str) and reference.strip():
            records.append(Record((*context, ("user", reference.strip())), "run_reference", row["dataset"], ids,
                                  extra))
    return records


def dedupe(records: Iterable[Record]) -> list[Record]:
    """Drop records whose messages repeat an earlier record's (the first one wins)."""
    seen: set[tuple[tuple[str, str], ...]] = set()
    unique = []
    for record in records:
        if record.messages not in seen:
            seen.add(record.messages)
            unique.append(record)
    return unique


def make_data(out: Path, *, data_format: str = "sft", conversations: Sequence[Path] = (),
              mt_bench: Sequence[Path] = (), runs: Sequence[Path] = (), labels: Sequence[str] = ("follow_up",),
              reference_turns: bool = True, holdout_percent: float = 50.0,
              holdout_datasets: Sequence[str] | None = None, max_examples: int | None = None,
              seed: int = 0) -> dict[str, Any]:
    """Build a training JSONL at ``out`` and return counts per source.

    Args:
        data_format: ``sft`` (conversations ending with a user turn) or ``prompts`` (ending with an
            assistant turn, for ``userturn train rl``).
        conversations, mt_bench, runs: the sources; at least one must be given.
        labels: which classifier labels of a run's generated turns are kept for sft.
        holdout_percent: share of items (by a stable hash of dataset and id) left out of the data, so
            that the before/after evaluation has unseen items; 0 keeps everything.
        holdout_datasets: apply the hold-out only to these datasets (None: to all).
        max_examples: keep at most this many records, chosen by a seeded shuffle (None: all).

    Raises:
        ConfigError: no source, an unknown format, or nothing left to write.
    """
    if data_format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got '{data_format}'")
    if not (conversations or mt_bench or runs):
        raise ConfigError("give at least one source: --conversations, --mt-bench or --run")
    if not 0 <= holdout_percent <= 100:
        raise ConfigError(f"--holdout must be between 0 and 100, got {holdout_percent}")
    gathered: list[Record] = []
    for path in conversations:
        gathered += conversation_records(path, data_format)
    for path in mt_bench:
        gathered += mt_bench_records(path, data_format)
    for path in runs:
        gathered += run_records(path, data_format, labels=labels, reference_turns=reference_turns)
    kept, held = [], 0
    for record in dedupe(gathered):
        applies = holdout_datasets is None or record.dataset in holdout_datasets
        if applies and any(is_heldout(record.dataset, i, holdout_percent) for i in record.item_ids):
            held += 1
            continue
        kept.append(record)
    random.Random(seed).shuffle(kept)
    if max_examples is not None:
        kept = kept[:max_examples]
    if not kept:
        raise ConfigError("no training records left: the sources are empty, no run sample has a kept label, "
                          "or --holdout left everything out")
    write_jsonl(out, (r.to_json(data_format) for r in kept))
    counts: dict[str, int] = {}
    for record in kept:
        counts[record.kind] = counts.get(record.kind, 0) + 1
    return {"records": len(kept), "held_out": held, "by_kind": counts, "format": data_format, "out": str(out)}


def load_training_file(path: Path, data_format: str) -> list[dict[str, Any]]:
    """Read and validate a training JSONL: ``[{"messages": ((role, content), ...), "source": {...}}]``.

    Prompts records must end with an assistant turn; which turns of an sft record carry loss is
    decided (and checked) by the trainer.

    Raises:
        DataError: a malformed line (named by file and line), or an empty file.
    """
    rows = []
    for line, row in read_jsonl(path):
        messages = parse_messages(row.get("messages"), path=path, line=line)
        if data_format == "prompts" and messages[-1][0] != "assistant":
            raise DataError("a prompt must end with an assistant turn (the model writes the next user turn)",
                            path=str(path), line=line, field="messages")
        source = row.get("source") if isinstance(row.get("source"), dict) else {}
        rows.append({"messages": messages, "source": source, "line": line,
                     "query": row.get("query"), "response": row.get("response")})
    if not rows:
        raise DataError("no records", path=str(path))
    return rows


def used_items(rows: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """``(dataset, item id)`` of every benchmark item the records were built from."""
    used = set()
    for row in rows:
        source = row.get("source") or {}
        dataset = source.get("dataset")
        for item_id in source.get("item_ids") or []:
            if dataset:
                used.add((str(dataset), str(item_id)))
    return used
