"""Fixtures for the REST API: an app over a real store on every backend, real keys.

``api`` is the app on a fresh store of the current backend (SQLite file, SQLite
in memory, PostgreSQL with working memory on Redis), with a key file holding:
``admin`` (admin of tenant acme), ``user`` (acme), ``scoped`` (acme, only user u1
and agent coder), ``other`` (admin of tenant globex) and ``revoked`` (acme,
revoked). ``api.call`` goes through the ASGI app in process (``TestClient``) and checks
each answer against the schema (``Api.conform``);
``served`` runs the same app on uvicorn on a free loopback port for the tests
that must cross a real socket (with its lifespan, which runs the MCP endpoint at
``/mcp``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the REST API needs the server extra")

from fastapi.testclient import TestClient
from rest_support import Api, build_app, make_keys, serve

from engram import Engram


@pytest.fixture
def keys_path(tmp_path: Path) -> Path:
    """Where the test keys live."""
    return tmp_path / "keys.json"


@pytest.fixture
def api(store_url: str, open_mem: Callable[..., Engram], keys_path: Path) -> Iterator[Api]:
    """The app on a fresh store of the current backend."""
    mem = open_mem(store_url)
    keys = make_keys(keys_path)
    app = build_app(mem, keys_path)
    with TestClient(app) as client:
        yield Api(app, mem, keys, client)


@pytest.fixture
def sqlite_api(
    sqlite_file_url: str, open_mem: Callable[..., Engram], keys_path: Path
) -> Iterator[Api]:
    """The app on a SQLite file store only (for tests about the HTTP layer itself)."""
    mem = open_mem(sqlite_file_url)
    keys = make_keys(keys_path)
    app = build_app(mem, keys_path)
    with TestClient(app) as client:
        yield Api(app, mem, keys, client)


@pytest.fixture
def served(api: Api) -> Iterator[str]:
    """``api``'s app behind a real socket."""
    yield from serve(api.app)
