"""OpenAI-compatible servers (vLLM serve, SGLang, llama.cpp server, TGI) through raw ``/v1/completions``.

The prompt is rendered locally by userturn with the model's own tokenizer and chat template and sent
verbatim as ``prompt``: chat endpoints always open an *assistant* turn, so they cannot ask a model
for the next *user* turn. :class:`ChatClient` wraps ``/v1/chat/completions`` for the LLM judge,
where an assistant answer is what is wanted.

Options (keyword arguments of ``load_backend("openai", model, ...)``; ``userturn run`` flags in brackets,
anything else as ``--engine-arg key=value``):
    base_url (``--base-url``, repeatable): one URL or a list, each ending in ``/v1``; requests are spread
        over them round-robin and a retry goes to the next one. Default ``http://127.0.0.1:8000/v1``.
    tokenizer (``--engine-arg tokenizer=...``): where the rendering tokenizer comes from when ``model`` is a name only
        the server knows (folder, ``.gguf`` file, hub id, ``embedded``). Default: ``model`` itself.
    api_key_env: the environment variable holding the API key. Default: ``USERTURN_API_KEY``, then
        ``OPENAI_API_KEY``. The key is only ever sent in the ``Authorization`` header, never logged.
    concurrency: requests in flight at once, over all URLs (default 8).
    timeout: seconds to wait for one response (default 600; connecting times out after 10).
    max_retries: retries of one request on 408/429/5xx and connection errors (default 8), with
        exponential backoff and full jitter capped at ``max_backoff`` seconds (default 30); a server's
        ``Retry-After`` is honoured (capped the same way).
    n_per_request: ask for all ``n`` samples of a prompt in one request (``n`` and ``seed``), as vLLM serve
        and SGLang support. Off by default: one request per sample with seed ``seed + i``, which is the
        backend contract on every server (vLLM's own ``n`` uses ``seed + i`` too, so both agree there).
    engine_args: extra JSON fields for every request body, e.g. ``top_k=20``; ``key=none`` removes a field
        userturn sends by default. ``--engine-arg key=value`` pairs that are not one of these options
        land here (``--engine-arg concurrency=32`` is the option, ``--engine-arg top_k=20`` a body field).
    revision: the weights revision recorded in the store key (a server cannot report it); default ``served``.
    trust_remote_code: passed to the tokenizer.

Errors: 401/403/404 and other 4xx raise :class:`~userturn.errors.BackendError` at once; a server that
cannot be reached when the backend starts raises at once too; during a run the same failures are retried.
"""

from __future__ import annotations

import email.utils
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from userturn.backends import register_backend
from userturn.backends.base import ModelIdentity, ProgressCallback
from userturn.backends.common import (
    as_list,
    cut_at_markers,
    load_render_tokenizer,
    parse_engine_args,
    route_engine_args,
    stop_strings,
)
from userturn.errors import BackendError, ConfigError
from userturn.models import is_embedded
from userturn.records import Completion, GenerationRequest, SamplingParams
from userturn.templates import require_chat_template, turn_end

log = logging.getLogger("userturn.backends.openai")

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
API_KEY_ENVS = ("USERTURN_API_KEY", "OPENAI_API_KEY")
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# Sampler fields that open-source servers default to something other than plain temperature/top-p
# sampling (llama.cpp: top_k 40, min_p 0.05, repeat_penalty 1.1); sent so that greedy means greedy.
NEUTRAL_SAMPLING: dict[str, Any] = {"top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0, "repetition_penalty": 1.0}


class RetryableError(Exception):
    """A failure worth retrying (429, 5xx, connection trouble); ``retry_after`` is the server's hint."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: a number of seconds or an HTTP date.

    Args:
        value: the header value; None, empty or unparsable gives None; a date in the past gives 0.
        now: the current UNIX time (for tests); default ``time.time()``.
    """
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def api_key_from_env(api_key_env: str | None = None) -> str | None:
    """The API key from ``api_key_env`` (which must then be set), else the first of :data:`API_KEY_ENVS` set."""
    if api_key_env:
        if not os.environ.get(api_key_env):
            raise ConfigError(f"api_key_env names ${api_key_env}, but that environment variable is not set")
        return os.environ[api_key_env]
    for name in API_KEY_ENVS:
        if os.environ.get(name):
            return os.environ[name]
    return None


def normalize_base_url(url: str) -> str:
    """Strip trailing slashes; refuse URLs without a scheme (a common copy-paste slip)."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"--base-url '{url}' must start with http:// or https:// (e.g. http://127.0.0.1:8000/v1)")
    return url


def completion_body(model: str, prompt: str, params: SamplingParams, *, seed: int, n: int,
                    stop: Sequence[str], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of one ``/v1/completions`` request.

    Args:
        model: the model name the server knows.
        prompt: the rendered prompt, sent verbatim (the server must not add a BOS: userturn's templates
            already wrote one where the model wants it).
        params: sampling parameters; ``temperature`` 0 is greedy, and ``top_p`` is then sent as 1.
        seed: the seed of this request (``params.seed + i`` for sample ``i`` when samples are split).
        n: completions asked for in this request.
        stop: stop strings (the caller adds the model's end-of-turn markers).
        extra: more fields (``--engine-arg``); a None value removes a field.
    """
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "max_tokens": int(params.max_tokens),
        "temperature": float(params.temperature),
        "top_p": 1.0 if params.greedy else float(params.top_p),
        "n": int(n),
        "seed": int(seed),
        "stream": False,
        "stop": list(stop),
        **NEUTRAL_SAMPLING,
    }
    for key, value in (extra or {}).items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def _short_error(response: Any) -> str:
    """The server's error message, one line, at most 300 characters."""
    try:
        data = response.json()
        error = data.get("error", data) if isinstance(data, dict) else data
        message = error.get("message", error) if isinstance(error, dict) else error
        text = str(message)
    except Exception:
        text = response.text
    return " ".join(text.split())[:300] or f"HTTP {response.status_code}"


class OpenAIHttp:
    """HTTP transport shared by the completions backend and the chat client: retries, URLs, key, limits.

    Args:
        base_urls: one or more URLs ending in ``/v1``; request ``slot`` goes to ``base_urls[slot % len]``
            and its ``k``-th retry to the next URL along, so one dead server does not stall a run.
        api_key_env: see :func:`api_key_from_env`.
        concurrency: the most requests in flight (and HTTP connections).
        timeout: seconds per response; connecting times out after at most 10 s.
        max_retries: retries per request after the first attempt.
        max_backoff: the longest wait between attempts, in seconds (also caps ``Retry-After``).
        backoff_base: the first backoff's scale in seconds.
    """

    def __init__(self, base_urls: Sequence[str], *, api_key_env: str | None = None, concurrency: int = 8,
                 timeout: float = 600.0, max_retries: int = 8, max_backoff: float = 30.0,
                 backoff_base: float = 0.5) -> None:
        import httpx

        urls = [normalize_base_url(u) for u in base_urls] or [DEFAULT_BASE_URL]
        if concurrency < 1:
            raise ConfigError("concurrency must be at least 1")
        if max_retries < 0:
            raise ConfigError("max_retries must be 0 or more")
        self.base_urls = list(dict.fromkeys(urls))
        self.concurrency = int(concurrency)
        self.max_retries = int(max_retries)
        self.max_backoff = float(max_backoff)
        self.backoff_base = float(backoff_base)
        self._key = api_key_from_env(api_key_env)
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(float(timeout), connect=min(10.0, float(timeout))),
            limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
        )
        self._lock = threading.Lock()
        self.retries = 0
        self.aborted = threading.Event()

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def _count_retry(self, retry_state: Any) -> None:
        with self._lock:
            self.retries += 1
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        log.warning("retrying (attempt %d of %d): %s", retry_state.attempt_number + 1, self.max_retries + 1,
                    self._scrub(str(exc)))

    def _sleep(self, seconds: float) -> None:
        # Wakes early when another request failed for good, so that the run stops promptly.
        self.aborted.wait(seconds)

    def _wait(self, retry_state: Any) -> float:
        from tenacity import wait_random_exponential

        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, RetryableError) and exc.retry_after is not None:
            return min(exc.retry_after, self.max_backoff)
        return wait_random_exponential(multiplier=self.backoff_base, max=self.max_backoff)(retry_state)

    def _send(self, method: str, url: str, path: str, body: dict[str, Any] | None) -> Any:
        import httpx

        if self.aborted.is_set():
            raise BackendError("the run was aborted after another request failed")
        try:
            response = self._client.request(method, url + path, json=body)
        except httpx.TimeoutException as exc:
            raise RetryableError(f"{url}{path}: no answer in time ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise RetryableError(f"{url}{path}: {type(exc).__name__}: {self._scrub(str(exc))}") from exc
        status = response.status_code
        if status == 200:
            try:
                answer = response.json()
            except ValueError as exc:
                if response.text.lstrip().startswith(("{", "[")):  # JSON cut short on the way: ask again
                    raise RetryableError(f"{url}{path}: HTTP 200 with truncated or malformed JSON") from exc
                raise BackendError(f"{url}{path} answered HTTP 200 with a body that is not JSON; "
                                   "is --base-url an OpenAI-compatible server ending in /v1?") from exc
            if path.endswith("completions") and not (isinstance(answer, dict)
                                                     and isinstance(answer.get("choices"), list)):
                raise RetryableError(f"{url}{path}: HTTP 200 without a list of choices")
            return answer
        message = self._scrub(_short_error(response))
        if status in RETRYABLE_STATUS or status >= 500:
            raise RetryableError(f"{url}{path}: HTTP {status}: {message}",
                                 parse_retry_after(response.headers.get("retry-after")))
        if status in (401, 403):
            raise BackendError(f"{url}{path} refused the request (HTTP {status}): {message}; set the API key "
                               f"in ${API_KEY_ENVS[0]} (or name another variable with api_key_env)")
        if status == 404:
            raise BackendError(f"{url}{path} was not found (HTTP 404): {message}; check that --base-url ends "
                               "in /v1 and that the server serves this model")
        raise BackendError(f"{url}{path} rejected the request (HTTP {status}): {message}")

    def request(self, method: str, path: str, body: dict[str, Any] | None = None, *, slot: int = 0,
                retries: int | None = None) -> Any:
        """Send one request with retries; returns the decoded JSON.

        Raises:
            BackendError: a non-retryable answer (at once), or the last failure once retries ran out.
        """
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

        attempts = (self.max_retries if retries is None else retries) + 1
        retrying = Retrying(
            stop=stop_after_attempt(attempts),
            wait=self._wait,
            retry=retry_if_exception_type(RetryableError),
            before_sleep=self._count_retry,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    url = self.base_urls[(slot + attempt.retry_state.attempt_number - 1) % len(self.base_urls)]
                    return self._send(method, url, path, body)
        except RetryableError as exc:
            raise BackendError(f"gave up after {attempts} attempt(s): {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def served_models(self, url: str) -> list[str] | None:
        """The model ids ``url`` serves (``GET /models``), None when the server has no such listing.

        Raises:
            BackendError: the server cannot be reached, or refuses the key.
        """
        import httpx

        try:
            response = self._client.get(url + "/models", timeout=10.0)
        except httpx.TransportError as exc:
            raise BackendError(f"cannot reach {url} ({type(exc).__name__}: {self._scrub(str(exc))}); is the "
                               "server running, and does --base-url end in /v1?") from exc
        if response.status_code in (401, 403):
            raise BackendError(f"{url}/models refused the request (HTTP {response.status_code}); set the API "
                               f"key in ${API_KEY_ENVS[0]}")
        if response.status_code != 200:
            return None
        try:
            data = response.json().get("data", [])
            return [str(entry["id"]) for entry in data if isinstance(entry, dict) and "id" in entry]
        except (ValueError, AttributeError) as exc:
            raise BackendError(f"{url}/models did not answer with JSON; is --base-url an OpenAI-compatible "
                               "server ending in /v1?") from exc

    def check_model(self, model: str) -> None:
        """Fail at once when a server is unreachable or does not list ``model``."""
        for url in self.base_urls:
            served = self.served_models(url)
            if served is not None and served and model not in served:
                raise BackendError(f"{url} does not serve model '{model}'; it serves: {', '.join(served)} "
                                   "(pass that name as --model and the tokenizer source as --tokenizer)")

    def run_all(self, jobs: Sequence[Callable[[int], Any]],
                on_done: Callable[[int, Any], None]) -> None:
        """Run ``jobs[i](slot=i)`` with at most ``concurrency`` in flight; ``on_done(i, result)`` in this thread.

        The first job that fails stops the others (no new attempts start) and its error is raised.
        """
        self.aborted.clear()
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="userturn-http") as pool:
            pending: dict[Future, int] = {pool.submit(job, i): i for i, job in enumerate(jobs)}
            try:
                while pending:
                    done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                    for future in done:
                        index = pending.pop(future)
                        on_done(index, future.result())
            except BaseException:
                self.aborted.set()
                for future in pending:
                    future.cancel()
                raise

    def close(self) -> None:
        self._client.close()


def choice_to_completion(choice: dict[str, Any], markers: Sequence[str],
                         encode: Callable[[str], list[int]]) -> Completion:
    """One ``choices[i]`` of a completions (or chat) answer as a :class:`Completion`.

    The text is cut at the first end-of-turn marker in case the server printed one instead of
    stopping; ``finish_reason`` is ``length`` only when the server says so and nothing was cut.
    """
    text = choice.get("text")
    if text is None:
        text = (choice.get("message") or {}).get("content") or ""
    text, cut = cut_at_markers(str(text), markers)
    reason = "length" if choice.get("finish_reason") == "length" and not cut else "stop"
    return Completion(text=text, token_ids=tuple(encode(text)), finish_reason=reason)


class OpenAIBackend:
    """Generate through an OpenAI-compatible ``/v1/completions`` endpoint (see the module docstring)."""

    def __init__(self, model: str, *, base_url: str | Sequence[str] | None = None, tokenizer: str | None = None,
                 api_key_env: str | None = None, concurrency: int = 8, timeout: float = 600.0,
                 max_retries: int = 8, max_backoff: float = 30.0, backoff_base: float = 0.5,
                 n_per_request: bool = False, engine_args: Any = None, revision: str | None = None,
                 trust_remote_code: bool = False) -> None:
        self.model = model
        self.http = OpenAIHttp(as_list(base_url), api_key_env=api_key_env, concurrency=concurrency,
                               timeout=timeout, max_retries=max_retries, max_backoff=max_backoff,
                               backoff_base=backoff_base)
        self.extra = parse_engine_args(engine_args)
        self.n_per_request = bool(n_per_request)
        try:
            self.http.check_model(model)
            self._tokenizer, resolved = load_render_tokenizer(model, tokenizer, trust_remote_code=trust_remote_code)
        except BaseException:
            self.http.close()
            raise
        require_chat_template(self._tokenizer, tokenizer or model)
        self.turn_end = turn_end(self._tokenizer)
        self.identity = ModelIdentity(
            name=resolved.name if is_embedded(model) else model,
            revision=revision or (resolved.revision if is_embedded(model) else "served"),
            backend="openai",
            dtype="server",
        )

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def retries(self) -> int:
        """Retries made so far (all requests together), for the run report."""
        return self.http.retries

    def _encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False)

    def generate(self, requests: Sequence[GenerationRequest],
                 progress: ProgressCallback | None = None) -> list[list[Completion]]:
        # (request index, first sample index, body)
        jobs: list[tuple[int, int, dict[str, Any]]] = []
        for ri, request in enumerate(requests):
            p = request.params
            stop = stop_strings(self.turn_end, self._tokenizer, p.stop)
            if self.n_per_request or p.n == 1:
                jobs.append((ri, 0, completion_body(self.model, request.prompt, p, seed=p.seed, n=p.n,
                                                    stop=stop, extra=self.extra)))
            else:
                for i in range(p.n):
                    jobs.append((ri, i, completion_body(self.model, request.prompt, p, seed=p.seed + i, n=1,
                                                        stop=stop, extra=self.extra)))
        results: list[list[Completion | None]] = [[None] * r.params.n for r in requests]
        missing = [r.params.n for r in requests]
        state = {"done": 0, "tokens": 0}

        def make_job(body: dict[str, Any]) -> Callable[[int], Any]:
            return lambda slot: self.http.request("POST", "/completions", body, slot=slot)

        def on_done(index: int, answer: Any) -> None:
            ri, first, body = jobs[index]
            markers = body["stop"]
            choices = sorted(answer.get("choices", []), key=lambda c: c.get("index", 0))
            if len(choices) != body["n"]:
                raise BackendError(f"the server returned {len(choices)} completion(s) where {body['n']} were asked "
                                   "for; turn n_per_request off for this server")
            for offset, choice in enumerate(choices):
                completion = choice_to_completion(choice, markers, self._encode)
                results[ri][first + offset] = completion
                state["tokens"] += len(completion.token_ids)
            missing[ri] -= len(choices)
            if missing[ri] == 0:
                state["done"] += 1
                if progress:
                    progress(state["done"], state["tokens"])

        self.http.run_all([make_job(body) for _, _, body in jobs], on_done)
        return [[c for c in per if c is not None] for per in results]

    def close(self) -> None:
        self.http.close()


class ChatClient:
    """``/v1/chat/completions`` with the same retries, URLs and key handling, for the LLM judge.

    Args:
        model: the served model name.
        base_url, api_key_env, concurrency, timeout, max_retries, max_backoff: as for the backend.
        check: list the server's models at start and fail at once on a bad URL or model name.

    Example:
        ``ChatClient("judge", base_url="http://127.0.0.1:8000/v1").chat([{"role": "user", "content": "hi"}])``
    """

    def __init__(self, model: str, *, base_url: str | Sequence[str] | None = None, api_key_env: str | None = None,
                 concurrency: int = 8, timeout: float = 600.0, max_retries: int = 8, max_backoff: float = 30.0,
                 check: bool = True) -> None:
        self.model = model
        self.http = OpenAIHttp(as_list(base_url), api_key_env=api_key_env, concurrency=concurrency,
                               timeout=timeout, max_retries=max_retries, max_backoff=max_backoff)
        if check:
            try:
                self.http.check_model(model)
            except BaseException:
                self.http.close()
                raise

    @property
    def retries(self) -> int:
        return self.http.retries

    def chat(self, messages: Sequence[dict[str, str]], *, temperature: float = 0.0, max_tokens: int = 512,
             seed: int = 0, extra: dict[str, Any] | None = None, slot: int = 0) -> str:
        """The assistant's reply to ``messages`` (a list of ``{"role", "content"}``)."""
        body: dict[str, Any] = {"model": self.model, "messages": list(messages), "temperature": float(temperature),
                                "max_tokens": int(max_tokens), "seed": int(seed), "stream": False, **(extra or {})}
        answer = self.http.request("POST", "/chat/completions", body, slot=slot)
        choices = answer.get("choices") or []
        if not choices:
            raise BackendError(f"{self.http.base_urls[0]}/chat/completions returned no choices")
        return str((choices[0].get("message") or {}).get("content") or "")

    def chat_many(self, conversations: Sequence[Sequence[dict[str, str]]], **kwargs: Any) -> list[str]:
        """:meth:`chat` for many conversations at once (``concurrency`` in flight), in input order."""
        replies: list[str] = [""] * len(conversations)

        def make_job(messages: Sequence[dict[str, str]]) -> Callable[[int], str]:
            return lambda slot: self.chat(messages, slot=slot, **kwargs)

        def on_done(index: int, reply: str) -> None:
            replies[index] = reply

        self.http.run_all([make_job(m) for m in conversations], on_done)
        return replies

    def close(self) -> None:
        self.http.close()


OPTIONS = {"base_url", "tokenizer", "api_key_env", "concurrency", "timeout", "max_retries", "max_backoff",
           "backoff_base", "n_per_request", "engine_args", "revision", "trust_remote_code"}


@register_backend("openai")
def _factory(model: str, **options: Any) -> OpenAIBackend:
    options = route_engine_args(options, OPTIONS)
    return OpenAIBackend(model, **options)
