"""Reading JSONL files line by line, the Hugging Face fallback, and the ``jsonl`` dataset.

The helpers here are shared by every dataset module: :func:`read_jsonl` validates line by line
(a malformed line is a :class:`~userturn.errors.DataError` naming the file and line),
:func:`require` names the missing or mistyped field, :func:`local_file` finds a dataset's file
under ``--data-dir`` / ``$USERTURN_DATA_DIR``, and :func:`hub_rows` loads from the Hugging Face hub
at a pinned revision.

The ``jsonl`` dataset reads a user's own file (``--dataset-path``) with a field mapping: each line
has a query (field ``query``, or ``messages`` for a conversation that ends with a user turn), and
optionally ``answer``, ``id``, ``reference_user_turn``; it has no verifier (to score with a
benchmark's verifier, give that dataset name with ``--dataset-path``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from userturn.datasets import DatasetSpec, LoadOptions, register_dataset
from userturn.errors import ConfigError, DataError
from userturn.jsonl_io import read_jsonl  # noqa: F401  (re-exported for the loaders)
from userturn.records import Item, Message

ROLE_ALIASES = {
    "user": "user", "human": "user", "prompter": "user",
    "assistant": "assistant", "gpt": "assistant", "bot": "assistant", "chatgpt": "assistant",
    "model": "assistant", "bard": "assistant", "bing": "assistant",
    "system": "system",
}


def require(row: dict[str, Any], field: str, kind: type | tuple[type, ...], where: tuple[str, int]) -> Any:
    """``row[field]`` checked to be of ``kind``.

    Args:
        where: ``(path, line)`` for the error message.

    Raises:
        DataError: naming the file, line and field when it is missing or of another type.
    """
    path, line = where
    if field not in row or row[field] is None:
        raise DataError("missing field", path=path, line=line, field=field)
    value = row[field]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise DataError(f"expected {_kind_name(kind)}, got bool", path=path, line=line, field=field)
    if not isinstance(value, kind):
        raise DataError(f"expected {_kind_name(kind)}, got {type(value).__name__}", path=path, line=line, field=field)
    if isinstance(value, str) and not value.strip():
        raise DataError("empty string", path=path, line=line, field=field)
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def field_name(options: LoadOptions, key: str, default: str) -> str:
    """The user's field name for ``key`` (``query``, ``answer``, ``id``, ``messages``) or ``default``."""
    return options.fields.get(key) or default


def local_file(options: LoadOptions, relative: str) -> Path | None:
    """The dataset file under the data dir, or None when no data dir is set.

    Raises:
        DataError: a data dir is set but the file is not in it (naming the expected path).
    """
    data_dir = options.resolved_data_dir()
    if data_dir is None:
        return None
    path = Path(data_dir) / relative
    if not path.is_file():
        raise DataError(f"file not found; --data-dir must hold '{relative}' in the dataset's original format",
                        path=str(path))
    return path


def hub_rows(repo: str, split: str, *, config: str | None = None, revision: str | None = None,
             streaming: bool = False) -> tuple[Iterator[dict[str, Any]], str]:
    """Rows of a Hugging Face dataset and the commit they were loaded at.

    Without ``revision`` the current commit of the repository is looked up first and then pinned,
    so the returned revision is the one the rows come from (record it in ``Item.meta``).

    Raises:
        ConfigError: the ``datasets`` package is missing.
        DataError: the hub cannot be reached or the dataset cannot be loaded.
    """
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            f"loading {repo} from the Hugging Face hub needs `pip install 'userturn[datasets]'`; "
            "or pass --data-dir DIR (or set $USERTURN_DATA_DIR) with local copies"
        ) from None
    try:
        if revision is None:
            from huggingface_hub import HfApi

            revision = HfApi().dataset_info(repo).sha or "main"
        rows = datasets.load_dataset(repo, config, split=split, revision=revision, streaming=streaming)
    except Exception as exc:  # network, auth and schema errors all mean "cannot load it from the hub"
        raise DataError(
            f"cannot load {repo} from the Hugging Face hub ({type(exc).__name__}: {exc}); "
            "pass --data-dir DIR (or set $USERTURN_DATA_DIR) to read local copies"
        ) from None
    return iter(rows), str(revision)


def normalize_messages(raw: Any, where: tuple[str, int], field: str) -> list[Message]:
    """Messages from ``[{"role", "content"}]`` or ShareGPT ``[{"from", "value"}]`` lists.

    Raises:
        DataError: not a list, a message without role/content, or an unknown role.
    """
    path, line = where
    if not isinstance(raw, list) or not raw:
        raise DataError("expected a non-empty list of messages", path=path, line=line, field=field)
    messages = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict):
            raise DataError("expected a message object", path=path, line=line, field=f"{field}[{index}]")
        role = message.get("role", message.get("from"))
        content = message.get("content", message.get("value"))
        if not isinstance(role, str) or role.lower() not in ROLE_ALIASES:
            raise DataError(f"unknown role {role!r} (use user/assistant/system or human/gpt)",
                            path=path, line=line, field=f"{field}[{index}].role")
        if not isinstance(content, str):
            raise DataError("missing text (content or value)", path=path, line=line, field=f"{field}[{index}].content")
        messages.append(Message(ROLE_ALIASES[role.lower()], content))  # type: ignore[arg-type]
    return messages


def _load(options: LoadOptions) -> Iterator[Item]:
    if options.path is None:
        raise ConfigError("dataset 'jsonl' reads your own file: pass --dataset-path FILE.jsonl")
    path = Path(options.path)
    query_field = field_name(options, "query", "query")
    messages_field = field_name(options, "messages", "messages")
    answer_field = field_name(options, "answer", "answer")
    id_field = field_name(options, "id", "id")
    reference_field = field_name(options, "reference", "reference_user_turn")
    for number, row in read_jsonl(path):
        where = (str(path), number)
        if messages_field in row:
            messages = normalize_messages(row[messages_field], where, messages_field)
            if messages[-1].role != "user":
                raise DataError("the conversation must end with a user turn (to cut conversations after an "
                                "assistant turn use --dataset conversations)", path=str(path), line=number,
                                field=messages_field)
        else:
            messages = [Message("user", require(row, query_field, str, where))]
        answer = row.get(answer_field)
        reference = row.get(reference_field)
        yield Item(
            id=str(row[id_field]) if row.get(id_field) is not None else str(number),
            dataset="jsonl",
            messages=tuple(messages),
            answer=None if answer is None else str(answer),
            reference_user_turn=reference if isinstance(reference, str) else None,
            meta={"source": str(path), "line": number},
        )


register_dataset(
    DatasetSpec(
        name="jsonl",
        description="your own JSONL (--dataset-path) with a field mapping: query or messages, answer, id",
        load=_load,
        verify=None,
        verifier_description="none (use a benchmark's name with --dataset-path to score with its verifier)",
        size=None,
    )
)
