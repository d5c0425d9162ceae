"""A store busy past its bound, through REST: 503 problem+json with ``Retry-After``.

Another connection holds the write lock longer than the store's bound (a raw
``sqlite3`` connection in ``BEGIN IMMEDIATE`` on the file; a raw ``psycopg``
connection holding the tenant's advisory writer lock on PostgreSQL, with
``statement_timeout_ms`` as the bound). ``POST /v1/memories``, ``:batch`` and
``/correct`` must answer 503 ``/problems/unavailable`` as ``application/problem+json``
with ``Retry-After: 1`` and a message saying nothing was written, never a 500 or a
hang, and write nothing; once the lock is released the same requests succeed.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from pathlib import Path

import httpx
from fastapi.testclient import TestClient
from tests.conftest import OpenMem

from engram import Config, Context
from engram.config import SQLiteConfig, StoreConfig
from engram.store.postgres.config import PostgresConfig
from engram.surfaces.rest import KeyFile, KeyRing, create_app

BOUND_MS = 300
TENANT = "busy"
ME = {"user_id": "u1"}


@contextmanager
def _sqlite_lock(url: str) -> Iterator[None]:
    path = url.removeprefix("sqlite:///")
    with closing(sqlite3.connect(path, isolation_level=None, check_same_thread=False)) as holder:
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("CREATE TABLE IF NOT EXISTS holder_mark (x)")  # a real pending write
        yield
        holder.execute("ROLLBACK")


@contextmanager
def _postgres_lock(url: str) -> Iterator[None]:
    import psycopg

    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(url) as conn, conn.transaction():
            name = json.dumps(["engram:tenant", TENANT])
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (name,))
            taken.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert taken.wait(10)
        yield
    finally:
        release.set()
        thread.join()


def _config(url: str) -> Config:
    if url.startswith("postgresql"):
        return Config(store=StoreConfig(postgres=PostgresConfig(statement_timeout_ms=BOUND_MS)))
    return Config(store=StoreConfig(sqlite=SQLiteConfig(busy_timeout_ms=BOUND_MS)))


def _busy(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"] == "1"
    problem = response.json()
    assert problem["type"] == "/problems/unavailable"
    assert "othing was written" in problem["detail"]


def test_a_store_busy_past_its_bound_answers_503_with_retry_after(
    shared_url: str, open_mem: OpenMem, tmp_path: Path
) -> None:
    mem = open_mem(shared_url, config=_config(shared_url))
    keys = KeyFile(tmp_path / "keys.json")
    headers = {"Authorization": f"Bearer {keys.create(TENANT)[1]}"}
    client = TestClient(create_app(mem, KeyRing(path=tmp_path / "keys.json")), headers=headers)
    first = client.post("/v1/memories", json={**ME, "content": "Busy test: the first note."})
    assert first.status_code == 200, first.text
    kept = first.json()["record"]["id"]
    postgres = shared_url.startswith("postgresql")
    lock: Callable[[str], AbstractContextManager[None]] = (
        _postgres_lock if postgres else _sqlite_lock
    )
    requests = [
        ("POST", "/v1/memories", {**ME, "content": "Busy test: a blocked note."}),
        ("POST", "/v1/memories:batch", {**ME, "items": [{"content": "Busy test: bulk."}]}),
        ("POST", f"/v1/memories/{kept}/correct", {**ME, "content": "Busy test: corrected."}),
    ]
    with lock(shared_url):
        for method, path, body in requests:
            start = time.monotonic()
            _busy(client.request(method, path, json=body))
            assert time.monotonic() - start < 10 * BOUND_MS / 1000  # bounded, no hang
    stored = mem.list(Context(tenant_id=TENANT, user_id="u1"), status=None)
    assert [r.id for r in stored] == [kept]  # the refused requests wrote nothing
    for method, path, body in requests:
        assert client.request(method, path, json=body).status_code == 200
    assert mem.audit_verify().ok
