"""The MCP server over streamable HTTP (uvicorn on a free loopback port): identity from
each request's bearer key through an ``Authenticator``, and the endpoint mounted in
another app the way the REST app mounts it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI
from mcp_support import Keys, http_client, serving, structured

from engram import Context, Engram
from engram.surfaces.mcp import create_http_app, http_endpoint

MEMORY = {"content": "Prefers Python for data scripts.", "type": "preference"}


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Engram]:
    engine = Engram.open(f"sqlite:///{tmp_path / 'http.db'}", embedder="hashing")
    yield engine
    engine.close()


@pytest.fixture
def keys() -> Keys:
    return Keys()


@pytest.fixture
def url(mem: Engram, keys: Keys) -> Iterator[str]:
    with serving(create_http_app(mem, keys)) as base:
        yield f"{base}/mcp"


def _call(url: str, tool: str, arguments: dict[str, Any], **headers: str) -> Any:
    async def main() -> Any:
        async with http_client(url, **headers) as client:
            return await client.call_tool(tool, arguments)

    return anyio.run(main)


def test_each_key_acts_for_its_own_user_only(url: str, mem: Engram, keys: Keys) -> None:
    added = structured(_call(url, "remember", MEMORY, Authorization="Bearer key-u1"))
    assert added["operation"] == "ADD"
    assert [r.id for r in mem.list(Context("acme", "u1"))] == [added["id"]]
    seen = structured(_call(url, "list", {}, Authorization="Bearer key-u2"))
    assert seen["memories"] == []
    other = _call(url, "get", {"memory_id": added["id"]}, Authorization="Bearer key-u2")
    assert other.is_error
    assert "not-found:" in other.content[0].text
    other_tenant = structured(_call(url, "list", {}, Authorization="Bearer key-globex"))
    assert other_tenant["memories"] == []
    mine = structured(_call(url, "get", {"memory_id": added["id"]}, Authorization="Bearer key-u1"))
    assert mine["content"] == MEMORY["content"]
    assert keys.calls >= 4


def test_headers_choose_among_the_users_and_agents_a_key_allows(url: str, mem: Engram) -> None:
    team = {"Authorization": "Bearer key-team", "Engram_Agent": "coder"}
    added = structured(_call(url, "remember", MEMORY, Engram_User="u2", **team))
    assert added["id"] in [r.id for r in mem.list(Context("acme", "u2"))]
    assert mem.list(Context("acme", "u1")) == []


def _post(url: str, **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    named = {name.replace("_", "-"): value for name, value in headers.items()}
    wanted = {"Accept": "application/json, text/event-stream", **named}
    return httpx.post(url, json=body, headers=wanted, timeout=30)


def test_a_request_without_a_good_key_or_a_user_it_allows_is_refused(url: str) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic a2V5"}):
        refused = _post(url, **headers)
        assert refused.status_code == 401, headers
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.headers["content-type"] == "application/problem+json"
    foreign = _post(url, Authorization="Bearer key-u1", Engram_User="u2")
    assert foreign.status_code == 403
    assert "may not act for user 'u2'" in foreign.json()["detail"]
    wrong_agent = _post(
        url, Authorization="Bearer key-team", Engram_User="u1", Engram_Agent="planner"
    )
    assert wrong_agent.status_code == 403
    unnamed = _post(url, Authorization="Bearer key-team")
    assert unnamed.status_code == 422
    assert "Engram-User" in unnamed.json()["detail"]
    assert _post(url, Authorization="Bearer key-u1").status_code == 200


def test_the_endpoint_mounts_in_a_fastapi_app(mem: Engram, keys: Keys) -> None:
    endpoint = http_endpoint(mem, keys)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with endpoint.running():
            yield

    app = FastAPI(lifespan=lifespan)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    app.router.add_route("/mcp", endpoint)
    with serving(app) as base:
        assert httpx.get(f"{base}/healthz", timeout=30).json() == {"status": "ok"}
        added = structured(_call(f"{base}/mcp", "remember", MEMORY, Authorization="Bearer key-u1"))
        assert added["operation"] == "ADD"
        assert _post(f"{base}/mcp").status_code == 401


def test_the_rest_apps_mcp_endpoint_spends_the_keys_rate_limit(mem: Engram, keys: Keys) -> None:
    """``/mcp`` in the REST app takes a token of the key's bucket per request, the same
    bucket as ``/v1``: past the burst it is 429 problem+json with ``Retry-After``."""
    from engram.surfaces.rest import RestSettings, create_app

    settings = RestSettings(rate_limit=0.01, rate_burst=2)
    with serving(create_app(mem, keys, settings)) as base:
        url = f"{base}/mcp"
        passed = [_post(url, Authorization="Bearer key-u1").status_code for _ in range(2)]
        assert passed == [200, 200]
        refused = _post(url, Authorization="Bearer key-u1")
        assert refused.status_code == 429
        assert refused.headers["content-type"] == "application/problem+json"
        assert int(refused.headers["retry-after"]) >= 1
        problem = refused.json()
        assert problem["type"] == "urn:engram:problem:rate-limited"
        assert "rate limit" in problem["detail"]
        assert _post(url, Authorization="Bearer key-u2").status_code == 200  # its own bucket
        rest = httpx.get(f"{base}/v1/memories?user_id=u1", timeout=30,
                         headers={"Authorization": "Bearer key-u1"})  # fmt: skip
        assert rest.status_code == 429  # one bucket per key across both surfaces
        assert _post(url).status_code == 401  # no key: refused before any bucket


class _DownKeyStore:
    """An ``Authenticator`` whose key store cannot be reached."""

    def authenticate(self, credential: str) -> Any:
        from engram.errors import Unavailable

        raise Unavailable("the key store at redis://127.0.0.1:1 does not answer")


def test_a_key_store_that_cannot_answer_is_503_with_retry_after(mem: Engram) -> None:
    with serving(create_http_app(mem, _DownKeyStore())) as base:
        refused = _post(f"{base}/mcp", Authorization="Bearer key-u1")
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.headers["content-type"] == "application/problem+json"
    assert "does not answer" in refused.json()["detail"]
    assert mem.list(Context("acme", "u1")) == []


class _BrokenKeyStore:
    """An ``Authenticator`` with a bug: it raises what is not an Engram error."""

    def authenticate(self, credential: str) -> Any:
        raise RuntimeError("secret internals: /etc/engram/keys.db row 7")


def test_an_authenticator_that_fails_is_a_500_problem_that_hides_its_message(
    mem: Engram,
) -> None:
    with serving(create_http_app(mem, _BrokenKeyStore())) as base:
        refused = _post(f"{base}/mcp", Authorization="Bearer key-u1")
    assert refused.status_code == 500
    assert refused.headers["content-type"] == "application/problem+json"
    assert "secret internals" not in refused.text
    assert refused.json()["type"] == "urn:engram:problem:internal-error"
