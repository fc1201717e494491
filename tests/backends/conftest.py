"""Fixtures for the backend tests: the embedded tokenizer, llama.cpp in process, and a real llama.cpp server.

The server is ``python -m llama_cpp.server`` serving the embedded SmolLM2 GGUF on 127.0.0.1 at a free
port, under the model alias ``embedded`` so that ``--model embedded`` names it on the server and
renders with the embedded tokenizer locally.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from userturn.records import Message

# ggml's worker threads spin while they wait for each other, so on a busy CI box more threads than free
# cores makes llama.cpp many times slower; one thread is the safe default for tests.
LLAMA_THREADS = os.environ.get("USERTURN_TEST_LLAMA_THREADS", "1")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def needs_llama_cpp() -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'userturn[llamacpp]')")


class LlamaServer:
    """A ``llama_cpp.server`` child process that can be stopped and started again on the same port."""

    def __init__(self, gguf: Path, port: int, log_path: Path) -> None:
        self.gguf, self.port, self.log_path = gguf, port, log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 120.0) -> None:
        import httpx

        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(self.gguf), "--model_alias", "embedded",
             "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "4096",
             "--n_threads", LLAMA_THREADS, "--n_threads_batch", LLAMA_THREADS,
             "--verbose", "false"],
            stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.process.returncode}: "
                                   f"{self.log_path.read_text()[-2000:]}")
            try:
                if httpx.get(self.base_url + "/models", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {timeout:.0f} s")

    def stop(self, hard: bool = False) -> None:
        """Terminate the server (SIGKILL when ``hard``: in-flight requests then fail mid-answer)."""
        if self.process is not None and self.process.poll() is None:
            if hard:
                self.process.kill()
            else:
                self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        self.process = None


@pytest.fixture(scope="session")
def embedded_tokenizer() -> Any:
    from userturn.backends.common import load_render_tokenizer

    return load_render_tokenizer("embedded")[0]


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    needs_llama_cpp()
    from userturn.models import embedded_gguf_path

    server = LlamaServer(embedded_gguf_path(), free_port(), tmp_path_factory.mktemp("llama") / "server.log")
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llamacpp_backend() -> Iterator[Any]:
    needs_llama_cpp()
    from userturn.backends import load_backend

    backend = load_backend("llamacpp", "embedded", threads=int(LLAMA_THREADS))
    try:
        yield backend
    finally:
        backend.close()


@pytest.fixture(scope="session")
def demo_contexts() -> list[tuple[Message, ...]]:
    """``[query, short answer]`` pairs for the first demo items: the context the user-turn stage continues."""
    from userturn.datasets import load_items

    items = load_items("demo", limit=4)
    return [(*item.messages, Message("assistant", "Here is my answer: 42.")) for item in items]
