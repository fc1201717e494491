"""The one narrow interface every generation engine implements.

Prompts are rendered to strings by userturn itself (see ``userturn.templates``); a backend
only turns prompt strings plus sampling parameters into completions. Nothing above this
layer knows which engine runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from userturn.records import Completion, GenerationRequest


@dataclass(frozen=True)
class ModelIdentity:
    """What makes two generations comparable: the store key includes all of it.

    Args:
        name: what the user asked for (``embedded``, a hub id, a path).
        revision: a content hash or hub commit of the weights; changes when the weights change.
        backend: the engine name (``transformers``, ``llamacpp``, ...). Different engines never share
            stored generations, since their numerics differ.
        dtype: the compute dtype, for the same reason.
        engine: the version of the backend's own generation code (decode loop, sampler), where it has
            one; a new version never reuses generations stored by an old one. Empty: not in the key.
    """

    name: str
    revision: str
    backend: str
    dtype: str = "auto"
    engine: str = ""

    def key(self) -> dict[str, str]:
        key = {"name": self.name, "revision": self.revision, "backend": self.backend, "dtype": self.dtype}
        if self.engine:
            key["engine"] = self.engine
        return key


ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(finished_requests, generated_tokens)`` after each chunk of work."""


@runtime_checkable
class Backend(Protocol):
    """A loaded model that generates completions for rendered prompts.

    Implementations live in one file each under ``userturn/backends`` and register a
    factory with :func:`userturn.backends.register_backend`.
    """

    identity: ModelIdentity

    @property
    def tokenizer(self) -> Any:
        """A Hugging Face tokenizer whose ``apply_chat_template`` renders prompts for this model."""
        ...

    def generate(
        self,
        requests: Sequence[GenerationRequest],
        progress: ProgressCallback | None = None,
    ) -> list[list[Completion]]:
        """Generate ``request.params.n`` completions for each request, in request order.

        Args:
            requests: prompts rendered by userturn (special tokens included as text, no BOS added
                unless the template wrote it) with their sampling parameters.
            progress: optional callback, see :data:`ProgressCallback`.

        Returns:
            One list of ``n`` completions per request. Completion ``i`` of a request is sampled
            with seed ``params.seed + i`` so that it does not depend on batching.
        """
        ...

    def close(self) -> None:
        """Free the engine's resources; the backend is unusable afterwards."""
        ...
