"""A fault-injecting HTTP proxy in front of a real OpenAI-compatible server, for the reliability tests.

It runs an aiohttp app on 127.0.0.1 in a background thread. ``GET /v1/models`` is passed through;
each ``POST /v1/completions`` attempt is either passed through or, for a seeded share of attempts,
answered with a fault. Whether an attempt is faulted depends only on the seed, the request body and how
many times that body was seen before, so a run's faults do not depend on thread timing.

Faults (taken in turn, so that every kind occurs): 429 with ``Retry-After``, 500, 503, a 200 whose JSON
is cut in half, a response slower than the client's timeout, and a connection dropped without an answer.
A proxy can also turn permanent: after ``fail_after`` good answers every request gets ``fail_status``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web

FAULTS = ("429", "500", "503", "truncated", "slow", "drop")
SESSION = web.AppKey("session", ClientSession)


@dataclass
class Event:
    when: float
    key: str
    attempt: int
    outcome: str  # a fault name, "ok", or "permanent"


@dataclass
class FaultProxy:
    upstream: str  # e.g. http://127.0.0.1:8080 (no /v1)
    seed: int = 0
    rate: float = 0.2
    slow_seconds: float = 6.0
    retry_after: int = 1
    api_key: str | None = None  # when set, requests without "Authorization: Bearer <key>" get 401
    fail_after: int | None = None
    fail_status: int = 401
    events: list[Event] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: Counter[str] = Counter()
        self._faults_given = 0
        self._good = 0
        self._granted = 0  # attempts let through while counting down to fail_after
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # --- bookkeeping -------------------------------------------------------------------------------------

    def outcomes(self) -> Counter[str]:
        return Counter(e.outcome for e in self.events)

    def faults(self) -> Counter[str]:
        return Counter(e.outcome for e in self.events if e.outcome in FAULTS)

    def answered_keys(self) -> Counter[str]:
        """How many good answers each distinct request body got."""
        return Counter(e.key for e in self.events if e.outcome == "ok")

    def _decide(self, key: str) -> tuple[int, str]:
        with self._lock:
            self._attempts[key] += 1
            attempt = self._attempts[key]
            if self.fail_after is not None:
                if self._granted >= self.fail_after:
                    return attempt, "permanent"
                self._granted += 1
            draw = int(hashlib.sha256(f"{self.seed}|{key}|{attempt}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
            if draw < self.rate:
                kind = FAULTS[self._faults_given % len(FAULTS)]
                self._faults_given += 1
                return attempt, kind
            return attempt, "ok"

    def _record(self, key: str, attempt: int, outcome: str) -> None:
        with self._lock:
            self.events.append(Event(time.monotonic(), key, attempt, outcome))
            if outcome == "ok":
                self._good += 1

    # --- the app -----------------------------------------------------------------------------------------

    async def _forward(self, session: Any, method: str, path: str, body: bytes | None) -> tuple[int, bytes, str]:
        async with session.request(method, self.upstream + path, data=body,
                                   headers={"Content-Type": "application/json"}) as response:
            return response.status, await response.read(), response.headers.get("Content-Type", "application/json")

    def _app(self) -> Any:

        async def models(request: web.Request) -> web.Response:
            status, body, ctype = await self._forward(request.app[SESSION], "GET", "/v1/models", None)
            return web.Response(status=status, body=body, content_type=ctype.split(";")[0])

        async def completions(request: web.Request) -> web.StreamResponse:
            raw = await request.read()
            key = hashlib.sha256(raw).hexdigest()[:16]
            if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
                self._record(key, 0, "unauthorized")
                return web.json_response({"error": {"message": "missing or wrong API key"}}, status=401)
            attempt, outcome = self._decide(key)
            if outcome == "permanent":
                self._record(key, attempt, "permanent")
                message = {401: "invalid API key", 404: "The model `x` does not exist"}.get(self.fail_status, "no")
                return web.json_response({"error": {"message": message}}, status=self.fail_status)
            if outcome in ("429", "500", "503"):
                self._record(key, attempt, outcome)
                headers = {"Retry-After": str(self.retry_after)} if outcome == "429" else {}
                return web.json_response({"error": {"message": f"injected {outcome}"}}, status=int(outcome),
                                         headers=headers)
            if outcome == "drop":
                self._record(key, attempt, outcome)
                assert request.transport is not None
                request.transport.abort()
                return web.Response(status=200)  # never sent: the connection is gone
            if outcome == "slow":
                self._record(key, attempt, outcome)
                await asyncio.sleep(self.slow_seconds)
            status, body, ctype = await self._forward(request.app[SESSION], "POST", "/v1/completions", raw)
            if outcome == "truncated":
                self._record(key, attempt, outcome)
                return web.Response(status=200, body=body[: len(body) // 2], content_type="application/json")
            if outcome == "ok":
                self._record(key, attempt, "ok" if status == 200 else f"upstream-{status}")
            return web.Response(status=status, body=body, content_type=ctype.split(";")[0])

        async def start_session(app: web.Application) -> None:
            app[SESSION] = ClientSession(timeout=ClientTimeout(total=600))

        async def close_session(app: web.Application) -> None:
            await app[SESSION].close()

        app = web.Application()
        app.router.add_get("/v1/models", models)
        app.router.add_post("/v1/completions", completions)
        app.on_startup.append(start_session)
        app.on_cleanup.append(close_session)
        return app

    def start(self) -> FaultProxy:
        def serve() -> None:
            try:
                run()
            except BaseException as exc:  # reported by start(), not lost in the thread
                self._error = exc
                self._ready.set()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            runner = web.AppRunner(self._app(), handle_signals=False)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", self.port)
            loop.run_until_complete(site.start())
            sockets = site._server.sockets if site._server else []  # the bound port when 0 was asked for
            self.port = sockets[0].getsockname()[1]
            self._runner = runner
            self._ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="fault-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None:
            raise RuntimeError(f"the fault proxy did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=30)

    def summary(self) -> str:
        return json.dumps(dict(self.outcomes()), sort_keys=True)
