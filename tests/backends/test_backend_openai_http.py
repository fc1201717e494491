"""Retries, errors, URL spreading and key handling of the OpenAI-compatible transport.

The server here is a small scripted HTTP server on 127.0.0.1 (it answers 503/429/401 on demand), so the
retry paths run over real sockets; generation against a real model server is in test_backend_openai.py.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("httpx")
pytest.importorskip("tenacity")

from userturn.backends.openai_backend import ChatClient, OpenAIHttp  # noqa: E402
from userturn.errors import BackendError  # noqa: E402


class Script:
    """What the scripted server answers: a queue of statuses for POSTs, then 200s; it records every hit."""

    def __init__(self) -> None:
        self.failures: list[tuple[int, dict[str, str]]] = []
        self.hits: list[str] = []
        self.auth: list[str | None] = []
        self.lock = threading.Lock()


def start_server(script: Script) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _reply(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            self._reply(200, {"object": "list", "data": [{"id": "scripted"}]})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length) or b"{}")
            with script.lock:
                script.hits.append(self.path)
                script.auth.append(self.headers.get("Authorization"))
                failure = script.failures.pop(0) if script.failures else None
            if failure is not None:
                status, headers = failure
                self._reply(status, {"error": {"message": f"scripted {status}"}}, headers)
                return
            if self.path.endswith("/chat/completions"):
                text = "judge says " + request["messages"][-1]["content"]
                self._reply(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                               "finish_reason": "stop"}]})
            else:
                self._reply(200, {"choices": [{"index": 0, "text": "ok", "finish_reason": "stop"}]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def scripted() -> Iterator[tuple[Script, str]]:
    script = Script()
    server = start_server(script)
    try:
        yield script, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_503_and_429_are_retried_honouring_retry_after(scripted):
    script, url = scripted
    script.failures = [(503, {}), (429, {"Retry-After": "0"}), (502, {})]
    http = OpenAIHttp([url], backoff_base=0.01, max_backoff=0.05)
    answer = http.request("POST", "/completions", {"prompt": "x"})
    assert answer["choices"][0]["text"] == "ok"
    assert http.retries == 3 and len(script.hits) == 4
    http.close()


def test_retries_run_out_into_one_backend_error(scripted):
    script, url = scripted
    script.failures = [(503, {})] * 10
    http = OpenAIHttp([url], max_retries=2, backoff_base=0.01, max_backoff=0.02)
    with pytest.raises(BackendError, match=r"gave up after 3 attempt\(s\).*HTTP 503"):
        http.request("POST", "/completions", {"prompt": "x"})
    assert len(script.hits) == 3
    http.close()


def test_401_fails_at_once_and_never_shows_the_key(scripted, monkeypatch, caplog):
    script, url = scripted
    monkeypatch.setenv("USERTURN_API_KEY", "sk-secret-123")
    script.failures = [(503, {}), (401, {})]
    http = OpenAIHttp([url], backoff_base=0.01, max_backoff=0.02)
    with caplog.at_level(logging.DEBUG), pytest.raises(BackendError, match="HTTP 401") as error:
        http.request("POST", "/completions", {"prompt": "x"})
    assert len(script.hits) == 2  # one retry for the 503, none for the 401
    assert script.auth[0] == "Bearer sk-secret-123"
    assert "sk-secret-123" not in str(error.value) and "sk-secret-123" not in caplog.text
    http.close()


def test_requests_spread_over_base_urls_and_retry_on_the_next():
    scripts = [Script(), Script()]
    servers = [start_server(s) for s in scripts]
    try:
        urls = [f"http://127.0.0.1:{s.server_address[1]}/v1" for s in servers]
        scripts[0].failures = [(503, {})]
        http = OpenAIHttp(urls, concurrency=4, backoff_base=0.01, max_backoff=0.02)
        results: dict[int, str] = {}
        http.run_all([lambda slot: http.request("POST", "/completions", {}, slot=slot)] * 8,
                     lambda i, answer: results.__setitem__(i, answer["choices"][0]["text"]))
        assert sorted(results) == list(range(8))
        # 8 requests + 1 retry; the retry of the failed one went to the other server
        assert (len(scripts[0].hits), len(scripts[1].hits)) == (4, 5)
        assert http.retries == 1
        http.close()
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_unreachable_server_is_one_clear_error_at_start():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(BackendError, match=f"cannot reach http://127.0.0.1:{port}/v1"):
        ChatClient("any", base_url=f"http://127.0.0.1:{port}/v1")


def test_chat_client_answers_in_order(scripted):
    script, url = scripted
    client = ChatClient("scripted", base_url=url, concurrency=3)
    replies = client.chat_many([[{"role": "user", "content": str(i)}] for i in range(5)], max_tokens=8)
    assert replies == [f"judge says {i}" for i in range(5)]
    assert all(hit.endswith("/chat/completions") for hit in script.hits)
    with pytest.raises(BackendError, match="does not serve model 'other'"):
        ChatClient("other", base_url=url)
    client.close()
