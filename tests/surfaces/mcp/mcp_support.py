"""What the MCP tests share: an ``Authenticator`` of fixed keys, a uvicorn server on a
free loopback port in a thread, and a client with headers for streamable HTTP.

The MCP SDK is an extra: without it these tests skip (and fail under ``CI=true``,
where every extra is installed)."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest

try:
    import httpx
    import httpx2
    import uvicorn
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS
except ImportError as exc:  # pragma: no cover - the extra is in the test environment
    if os.environ.get("CI", "").lower() == "true":
        raise
    pytest.skip(
        f"the MCP SDK is not installed ({exc.name}): pip install 'engram-governed[mcp,server]'",
        allow_module_level=True,
    )

from engram.errors import Forbidden
from engram.surfaces.principal import Principal

__all__ = [
    "INVALID_PARAMS",
    "KEYS",
    "Keys",
    "MCPError",
    "free_port",
    "http_client",
    "list_tools",
    "serving",
    "structured",
]

KEYS = {
    "key-u1": Principal("acme", "k1", users=frozenset({"u1"})),
    "key-u2": Principal("acme", "k2", users=frozenset({"u2"})),
    "key-team": Principal("acme", "k3", users=frozenset({"u1", "u2"}), agents=frozenset({"coder"})),
    "key-globex": Principal("globex", "k4", users=frozenset({"u1"})),
}


class Keys:
    """An ``Authenticator`` over ``KEYS`` that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def authenticate(self, credential: str) -> Principal:
        """The principal of ``credential``; ``Forbidden`` for any other."""
        self.calls += 1
        found = KEYS.get(credential)
        if found is None:
            raise Forbidden("unknown or revoked API key")
        return found


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped before it started"
        assert time.monotonic() < deadline, "uvicorn did not start in 30 s"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@asynccontextmanager
async def http_client(url: str, **headers: str) -> AsyncIterator[Client]:
    """A connected MCP client of the streamable HTTP endpoint at ``url`` sending
    ``headers`` (``Authorization="Bearer ..."``; ``Engram_User="u2"`` is sent as
    ``Engram-User``)."""
    named = {name.replace("_", "-"): value for name, value in headers.items()}
    async with (
        httpx2.AsyncClient(headers=named, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def structured(result: Any) -> Any:
    """A tool result's structured content, failing on a tool error with its text."""
    assert not result.is_error, result.content[0].text
    return result.structured_content


def list_tools(url: str, key: str | None, **headers: str) -> httpx.Response:
    """A raw ``tools/list`` POST to the streamable HTTP endpoint at ``url`` with ``key``
    as the bearer key (None: no Authorization header): to see the HTTP answer itself."""
    sent = {"Accept": "application/json, text/event-stream", **headers}
    if key is not None:
        sent["Authorization"] = f"Bearer {key}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    return httpx.post(url, json=body, headers=sent, timeout=30)
