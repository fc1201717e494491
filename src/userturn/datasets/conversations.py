"""Real multi-turn human–assistant conversations, cut after an assistant turn.

Sources: ``--data-dir`` → ``oasst1_en/conversations.jsonl`` (OpenAssistant oasst1 English threads);
``--dataset-path`` → any JSONL of conversations: ``messages`` as ``[{"role", "content"}]``
(WildChat and most exports) or ShareGPT's ``conversations`` as ``[{"from", "value"}]``; otherwise the
Hugging Face hub ``OpenAssistant/oasst1`` (train and validation, English), whose message trees are
turned into threads by :func:`threads_from_messages`, the same procedure that made the local file.

**Cut.** A cut point is an assistant turn that answers a user turn and is followed by another user
turn. ``extra["cut"]`` (``--cut``) picks ``first``, ``last`` (default: one item per conversation,
with the most context) or ``all`` cut points. At a cut, the item's ``messages`` end with the user
query that the assistant turn answered, ``given_response`` is the real assistant reply from the
corpus, and ``reference_user_turn`` is the real next user turn.

**The assistant stage uses ``given_response``** instead of regenerating: the probe then asks the
model to continue a real conversation, and the real next user turn is a fair reference for exactly
that context (a regenerated reply would make the human follow-up answer a different message).

Ids: the assistant message's id where the corpus has message ids (oasst1), else
``<conversation id>@<n>`` for the n-th assistant turn (conversation id = its ``id`` field or line).
Conversations that share a prefix (oasst1 threads of one tree) give one item per distinct
context; every distinct real next user turn is listed in ``meta["reference_user_turns"]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from userturn.datasets import DatasetSpec, LoadOptions, register_dataset
from userturn.datasets.jsonl import field_name, hub_rows, local_file, normalize_messages, read_jsonl
from userturn.errors import ConfigError, DataError
from userturn.records import Item, Message

CUT_MODES = ("first", "last", "all")
DEFAULT_CUT = "last"
HUB_REPO = "OpenAssistant/oasst1"


@dataclass(frozen=True)
class Conversation:
    """One linear conversation: its id, messages, optional per-message ids, and descriptive fields."""

    conversation_id: str
    messages: tuple[Message, ...]
    message_ids: tuple[str, ...] | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def cut_mode(options: LoadOptions) -> str:
    """The validated ``extra["cut"]`` value (default ``last``).

    Raises:
        ConfigError: for a value other than first, last or all.
    """
    mode = str(options.extra.get("cut") or DEFAULT_CUT)
    if mode not in CUT_MODES:
        raise ConfigError(f"--cut must be one of {', '.join(CUT_MODES)}, not {mode!r}")
    return mode


def cut_points(messages: tuple[Message, ...] | list[Message], mode: str) -> list[int]:
    """Indices of the assistant turns to cut after, by ``mode`` (first, last or all).

    Args:
        messages: a conversation; an assistant turn qualifies when a user turn comes right before
            and right after it. A conversation with none gives ``[]``.
    """
    points = [
        index
        for index in range(1, len(messages) - 1)
        if messages[index].role == "assistant"
        and messages[index - 1].role == "user"
        and messages[index + 1].role == "user"
    ]
    if mode == "first":
        return points[:1]
    if mode == "last":
        return points[-1:]
    return points


def cut_items(dataset: str, conversations: Iterable[Conversation], mode: str) -> Iterator[Item]:
    """Items cut from ``conversations`` (see the module doc), one per distinct context, in input order."""
    pending: dict[tuple, dict[str, Any]] = {}
    for conversation in conversations:
        messages = conversation.messages
        for point in cut_points(messages, mode):
            key = tuple((m.role, m.content) for m in messages[: point + 1])
            reference = messages[point + 1].content
            if key in pending:
                references = pending[key]["meta"]["reference_user_turns"]
                if reference not in references:
                    references.append(reference)
                continue
            assistant_number = sum(1 for m in messages[: point + 1] if m.role == "assistant")
            if conversation.message_ids is not None:
                item_id = conversation.message_ids[point]
            else:
                item_id = f"{conversation.conversation_id}@{assistant_number}"
            pending[key] = {
                "id": item_id,
                "messages": tuple(messages[:point]),
                "given_response": messages[point].content,
                "reference_user_turn": reference,
                "meta": {
                    **conversation.meta,
                    "conversation_id": conversation.conversation_id,
                    "cut": mode,
                    "assistant_turn": assistant_number,
                    "reference_user_turns": [reference],
                },
            }
    for entry in pending.values():
        yield Item(dataset=dataset, answer=None, **entry)


def threads_from_messages(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Linear threads from oasst1 message rows (one message per row, with ``parent_id``).

    Procedure: keep messages with ``deleted`` false and ``review_result`` true; for every kept
    prompter message with a parent and no kept prompter descendant, take its chain of ancestors to
    the root; drop it if an ancestor is missing or not kept, if roles do not alternate
    prompter/assistant from the root, or if it has fewer than 2 prompter turns; append its best kept
    assistant reply (lowest ``rank``, then earliest ``created_date``, then ``message_id``) if any.
    Threads are sorted by (tree id, created date, message id) of their final prompter message.
    """
    kept = {
        row["message_id"]: row
        for row in rows
        if not row.get("deleted") and row.get("review_result") is True
    }
    children: dict[str, list[dict[str, Any]]] = {}
    for row in kept.values():
        if row.get("parent_id"):
            children.setdefault(row["parent_id"], []).append(row)

    def has_prompter_descendant(message_id: str) -> bool:
        stack = list(children.get(message_id, []))
        while stack:
            child = stack.pop()
            if child["role"] == "prompter":
                return True
            stack.extend(children.get(child["message_id"], []))
        return False

    threads = []
    for row in kept.values():
        if row["role"] != "prompter" or not row.get("parent_id") or has_prompter_descendant(row["message_id"]):
            continue
        chain = [row]
        while chain[-1].get("parent_id"):
            parent = kept.get(chain[-1]["parent_id"])
            if parent is None:
                break
            chain.append(parent)
        if chain[-1].get("parent_id"):
            continue  # an ancestor is missing or filtered out
        chain.reverse()
        expected = ["prompter" if index % 2 == 0 else "assistant" for index in range(len(chain))]
        if [message["role"] for message in chain] != expected:
            continue
        if sum(1 for message in chain if message["role"] == "prompter") < 2:
            continue
        replies = [c for c in children.get(row["message_id"], []) if c["role"] == "assistant"]
        if replies:
            best = min(replies, key=lambda r: (r.get("rank") is None, r.get("rank") or 0, r["created_date"],
                                               r["message_id"]))
            chain.append(best)
        threads.append({
            "message_tree_id": row["message_tree_id"],
            "ends_with_assistant": chain[-1]["role"] == "assistant",
            "message_ids": [message["message_id"] for message in chain],
            "messages": [
                {"role": "user" if message["role"] == "prompter" else "assistant", "content": message["text"]}
                for message in chain
            ],
            "_sort": (row["message_tree_id"], row["created_date"], row["message_id"]),
        })
    threads.sort(key=lambda thread: thread["_sort"])
    for thread in threads:
        del thread["_sort"]
    return threads


def _file_conversations(path: Path, options: LoadOptions) -> Iterator[Conversation]:
    messages_field = field_name(options, "messages", "messages")
    id_field = field_name(options, "id", "id")
    for number, row in read_jsonl(path):
        where = (str(path), number)
        name = messages_field if messages_field in row else ("conversations" if "conversations" in row else None)
        if name is None:
            raise DataError("missing field (or 'conversations' in ShareGPT format)", path=str(path), line=number,
                            field=messages_field)
        messages = tuple(normalize_messages(row[name], where, name))
        message_ids = row.get("message_ids")
        if not (isinstance(message_ids, list) and len(message_ids) == len(messages)):
            message_ids = None
        conversation_id = row.get(id_field) or row.get("conversation_id") or (message_ids or [str(number)])[-1]
        meta = {"source": str(path), "line": number}
        if "message_tree_id" in row:
            meta["message_tree_id"] = row["message_tree_id"]
        yield Conversation(str(conversation_id), messages, tuple(message_ids) if message_ids else None, meta)


def _hub_conversations(options: LoadOptions) -> Iterator[Conversation]:
    revision = options.extra.get("revision")
    rows: list[dict[str, Any]] = []
    for split in ("train", "validation"):
        split_rows, revision = hub_rows(HUB_REPO, split, revision=revision)
        rows.extend(row for row in split_rows if row.get("lang") == "en")
    source = f"hf:{HUB_REPO}@{revision}"
    for thread in threads_from_messages(rows):
        messages = tuple(Message(m["role"], m["content"]) for m in thread["messages"])
        yield Conversation(thread["message_ids"][-1], messages, tuple(thread["message_ids"]),
                           {"source": source, "message_tree_id": thread["message_tree_id"]})


def _load(options: LoadOptions) -> Iterator[Item]:
    mode = cut_mode(options)
    path = Path(options.path) if options.path else local_file(options, "oasst1_en/conversations.jsonl")
    conversations = _hub_conversations(options) if path is None else _file_conversations(path, options)
    yield from cut_items("conversations", conversations, mode)


register_dataset(
    DatasetSpec(
        name="conversations",
        description="real multi-turn conversations (OpenAssistant oasst1 English, or your JSONL/ShareGPT via "
        "--dataset-path), cut after an assistant turn (--cut first|last|all)",
        load=_load,
        verify=None,
        verifier_description="none; the corpus's assistant reply is used and the real next user turn is the reference",
        size=None,
    )
)
