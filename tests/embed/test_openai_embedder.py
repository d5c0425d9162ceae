"""OpenAIEmbedder against a real HTTP server on 127.0.0.1 (no mocks).

The server answers like an OpenAI-compatible ``/v1/embeddings`` endpoint with
deterministic, deliberately unnormalised vectors returned in *reverse* order, so
the client must sort by ``index`` and normalise. Its ``mode`` switches it into
the failure answers the client must turn into ``EmbeddingError``.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from engram.embed import OpenAIEmbedder, create_embedder
from engram.errors import ConfigError, EmbeddingError, InvalidArgument

DIM = 8
KEY = "sk-test-secret-1234"


def server_vector(text: str) -> list[float]:
    """The server's vector for ``text``: 8 digest bytes, shifted, scaled (not unit)."""
    digest = hashlib.blake2b(text.encode(), digest_size=DIM).digest()
    return [3.0 * (byte - 127.5) for byte in digest]


def expected(texts: list[str]) -> NDArray[np.float32]:
    rows = np.array([server_vector(text) for text in texts], dtype=np.float64)
    return np.asarray(rows / np.linalg.norm(rows, axis=1, keepdims=True), dtype=np.float32)


@dataclass
class FakeState:
    """What the server should answer and what it has received."""

    mode: str = "ok"
    requests: list[dict[str, Any]] = field(default_factory=list)


class Handler(BaseHTTPRequestHandler):
    state: FakeState

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        del format, args

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.state.requests.append({"path": self.path, "headers": dict(self.headers), **body})
        mode = self.state.mode
        if mode.startswith("status:"):
            self._send(int(mode.split(":")[1]), b'{"error": {"message": "boom"}}')
        elif mode == "not-json":
            self._send(200, b"<html>proxy error</html>")
        else:
            self._send(200, json.dumps(self._answer(body["input"], mode)).encode())

    def _answer(self, inputs: list[str], mode: str) -> dict[str, Any]:
        data: list[dict[str, Any]] = [
            {"object": "embedding", "index": i, "embedding": server_vector(text)}
            for i, text in enumerate(inputs)
        ]
        if mode == "short":
            data = data[:-1]
        if mode == "ragged":
            data[0]["embedding"] = data[0]["embedding"][:3]
        return {"object": "list", "data": data[::-1], "model": "fake"}

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[tuple[str, FakeState]]:
    state = FakeState()
    handler = type("BoundHandler", (Handler,), {"state": state})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_embeds_in_order_normalised(server: tuple[str, FakeState]) -> None:
    url, state = server
    texts = ["alpha", "beta", "gamma"]
    vectors = OpenAIEmbedder(url, "fake-model").embed(texts)
    assert vectors.dtype == np.float32
    assert vectors.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    (request,) = state.requests
    assert request["path"] == "/v1/embeddings"
    assert request["model"] == "fake-model"
    assert request["input"] == texts


def test_batches_requests(server: tuple[str, FakeState]) -> None:
    url, state = server
    texts = [f"text {i}" for i in range(5)]
    vectors = OpenAIEmbedder(url, "m", batch_size=2).embed(texts)
    assert [r["input"] for r in state.requests] == [texts[0:2], texts[2:4], texts[4:]]
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)


def test_sends_bearer_key_only_when_set(server: tuple[str, FakeState]) -> None:
    url, state = server
    OpenAIEmbedder(url, "m", api_key=KEY).embed(["a"])
    OpenAIEmbedder(url, "m").embed(["a"])
    assert state.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    assert "Authorization" not in state.requests[1]["headers"]


def test_empty_texts_are_zero_rows_and_not_sent(server: tuple[str, FakeState]) -> None:
    url, state = server
    vectors = OpenAIEmbedder(url, "m", dimension=DIM).embed(["", "word", ""])
    assert state.requests[0]["input"] == ["word"]
    assert not vectors[[0, 2]].any()
    np.testing.assert_allclose(vectors[1], expected(["word"])[0], atol=1e-6)
    assert OpenAIEmbedder(url, "m", dimension=DIM).embed([]).shape == (0, DIM)
    assert len(state.requests) == 1


def test_dimension_is_learned_or_probed(server: tuple[str, FakeState]) -> None:
    url, state = server
    embedder = OpenAIEmbedder(url, "m")
    embedder.embed(["x"])
    assert embedder.dimension == DIM
    assert len(state.requests) == 1
    assert OpenAIEmbedder(url, "m").dimension == DIM  # one probe request
    assert len(state.requests) == 2


def test_model_id_and_repr_hide_the_key(server: tuple[str, FakeState]) -> None:
    embedder = OpenAIEmbedder(server[0], "text-embedding-3-small", api_key=KEY)
    assert embedder.model_id == "openai:text-embedding-3-small"
    assert KEY not in repr(embedder)


@pytest.mark.parametrize(
    ("mode", "fragment"),
    [
        ("status:500", "HTTP 500"),
        ("status:401", "API key"),
        ("status:404", "base_url"),
        ("not-json", "JSON"),
        ("short", "2 vectors for 3 inputs"),
        ("ragged", "malformed"),
    ],
)
def test_bad_answers_raise_embedding_error(
    server: tuple[str, FakeState], mode: str, fragment: str
) -> None:
    url, state = server
    state.mode = mode
    with pytest.raises(EmbeddingError, match=fragment) as caught:
        OpenAIEmbedder(url, "m", api_key=KEY).embed(["a", "b", "c"])
    assert KEY not in str(caught.value)


def test_wrong_dimension_raises(server: tuple[str, FakeState]) -> None:
    with pytest.raises(EmbeddingError, match="dimension"):
        OpenAIEmbedder(server[0], "m", dimension=16).embed(["a"])


def test_connection_refused_raises_embedding_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(EmbeddingError, match="cannot reach"):
        OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "m", timeout=2).embed(["a"])


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"base_url": "ftp://example.org/v1"}, ConfigError),
        ({"model": ""}, ConfigError),
        ({"dimension": 0}, InvalidArgument),
        ({"batch_size": 0}, InvalidArgument),
        ({"timeout": 0}, InvalidArgument),
    ],
)
def test_rejects_bad_configuration(kwargs: dict[str, Any], error: type[Exception]) -> None:
    arguments: dict[str, Any] = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **kwargs}
    with pytest.raises(error):
        OpenAIEmbedder(**arguments)


def test_factory_reads_the_environment(
    server: tuple[str, FakeState], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, state = server
    monkeypatch.setenv("ENGRAM_OPENAI_BASE_URL", url)
    monkeypatch.setenv("ENGRAM_OPENAI_EMBED_MODEL", "env-model")
    monkeypatch.setenv("ENGRAM_OPENAI_API_KEY", KEY)
    embedder = create_embedder("openai", dimension=DIM)
    assert embedder.model_id == "openai:env-model"
    embedder.embed(["a"])
    assert state.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    assert create_embedder("openai", model="explicit").model_id == "openai:explicit"


def test_factory_needs_base_url_and_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("ENGRAM_OPENAI_BASE_URL", "ENGRAM_OPENAI_EMBED_MODEL"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigError, match="ENGRAM_OPENAI_BASE_URL"):
        create_embedder("openai", model="m")
    with pytest.raises(ConfigError, match="ENGRAM_OPENAI_EMBED_MODEL"):
        create_embedder("openai", base_url="http://127.0.0.1:1/v1")
