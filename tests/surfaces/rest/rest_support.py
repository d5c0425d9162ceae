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

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip("fastapi", reason="the REST API needs the server extra")

import httpx
import uvicorn
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import TypeAdapter
from starlette.routing import Match

from backends import table_rows
from engram import Context, Engram
from engram.surfaces.rest import KeyFile, KeyRing, RestSettings, create_app
from engram.surfaces.rest.problems import Problem
from engram.surfaces.rest.routes import ROUTERS

TENANT = "acme"
OTHER = "globex"


def make_keys(path: Path) -> dict[str, str]:
    """The test keys (name -> the key itself) in a new key file at ``path``."""
    file = KeyFile(path)
    made = {
        "admin": file.create(TENANT, admin=True)[1],
        "user": file.create(TENANT)[1],
        "scoped": file.create(TENANT, users=["u1"], agents=["coder"])[1],
        "other": file.create(OTHER, admin=True)[1],
    }
    revoked, made["revoked"] = file.create(TENANT)
    file.revoke(revoked.key_id)
    return made


@dataclass
class Api:
    """An app under test, its SDK instance and its keys."""

    app: FastAPI
    mem: Engram
    keys: dict[str, str]
    client: TestClient

    def headers(self, key: str | None = "user") -> dict[str, str]:
        """Request headers for the key named ``key`` (None: no Authorization)."""
        return {} if key is None else {"Authorization": f"Bearer {self.keys.get(key, key)}"}

    def conform(self, method: str, url: str, response: httpx.Response) -> None:
        """Fail unless ``response`` matches what the schema declares for its route: a
        200 body its ``response_model`` accepts (no field missing or extra), an
        error a ``Problem`` document."""
        kind = response.headers.get("content-type", "")
        if kind == "application/problem+json":
            Problem.model_validate(response.json())
            return
        if kind.startswith("application/x-ndjson"):  # the export file: a JSON object a line
            assert all(isinstance(json.loads(line), dict) for line in response.text.splitlines())
            return
        if response.status_code != 200 or not url.startswith("/v1/"):
            return
        scope = {"type": "http", "method": method, "path": urlsplit(url).path}
        routes = [route for router in ROUTERS for route in router.routes]
        route = next(r for r in routes if r.matches(scope)[0] == Match.FULL)
        assert isinstance(route, APIRoute)
        TypeAdapter(route.response_model).validate_python(response.json())

    def call(
        self,
        method: str,
        path: str,
        key: str | None = "user",
        **kwargs: Any,
    ) -> httpx.Response:
        """One request through the app."""
        headers = {**self.headers(key), **kwargs.pop("headers", {})}
        response = self.client.request(method, path, headers=headers, **kwargs)
        self.conform(method, path, response)
        return response

    def stored(self, user: str = "u1", tenant: str = TENANT) -> list[str]:
        """Ids of every record of ``user`` in ``tenant`` in any status, not the tenant's
        global ones (the store read through the SDK: what a bad request must have
        left unchanged)."""
        self.mem.flush()
        ctx = Context(
            tenant_id=tenant,
            user_id=user,
            agent_id="coder",
            session_id="s1",
            project_id="p1",
            repository_id="r1",
            task_id="t1",
        )
        found = self.mem.list(ctx, status=None, limit=10_000)
        found += self.mem.list(Context(tenant_id=tenant, user_id=user), status=None, limit=10_000)
        return sorted({r.id for r in found if r.user_id == user})

    def audit_size(self) -> int:
        """Entries in the audit log (every change writes one)."""
        self.mem.flush()
        return len(table_rows(self.mem.store, "audit"))


def build_app(mem: Engram, keys_path: Path, settings: RestSettings | None = None) -> FastAPI:
    """The REST app over ``mem`` with the keys of ``keys_path``."""
    return create_app(mem, KeyRing(path=keys_path), settings)


def serve(app: FastAPI) -> Iterator[str]:
    """Run ``app`` on uvicorn on a free loopback port; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("uvicorn did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)
