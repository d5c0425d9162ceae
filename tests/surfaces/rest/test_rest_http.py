"""Through a real socket: uvicorn on a free loopback port, httpx as the client."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator

import httpx
import pytest
from rest_support import Api

ME = {"user_id": "u1", "agent_id": "coder", "session_id": "s1"}


def headers(api: Api, key: str = "user") -> dict[str, str]:
    return api.headers(key)


def test_remember_and_recall_over_http(api: Api, served: str) -> None:
    with httpx.Client(base_url=served, headers=headers(api), timeout=30) as client:
        written = client.post(
            "/v1/memories",
            json={**ME, "content": "I prefer dark mode in every editor.", "type": "preference"},
        )
        assert written.status_code == 200, written.text
        found = client.post("/v1/recall", json={**ME, "query": "Which editor theme?"})
        assert found.status_code == 200
        assert found.json()["items"][0]["record"]["id"] == written.json()["record"]["id"]
        assert client.get("/readyz").json() == {"status": "ready"}


def test_concurrent_clients_each_get_their_own_answers(api: Api, served: str) -> None:
    users = [f"u{n}" for n in range(6)]

    def work(user: str) -> list[str]:
        with httpx.Client(base_url=served, headers=headers(api), timeout=60) as client:
            ids = []
            for n in range(4):
                body = {"user_id": user, "content": f"Project {user} uses port {8000 + n}."}
                ids.append(client.post("/v1/memories", json=body).json()["record"]["id"])
            listed = client.get(f"/v1/memories?user_id={user}&limit=100").json()["items"]
            assert {r["user_id"] for r in listed} == {user}
            return sorted(ids)

    with concurrent.futures.ThreadPoolExecutor(len(users)) as pool:
        results = dict(zip(users, pool.map(work, users), strict=True))
    for user, ids in results.items():
        assert api.stored(user) == ids


def _chunks(total: int) -> Iterator[bytes]:
    yield b'{"user_id": "u1", "content": "'
    sent = 0
    while sent < total:
        yield b"x" * 65536
        sent += 65536
    yield b'"}'


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_an_oversized_body_is_refused_before_it_is_parsed(
    api: Api, served: str, declared: bool
) -> None:
    body = b"".join(_chunks(2 * 1024 * 1024))
    with httpx.Client(base_url=served, headers=headers(api), timeout=60) as client:
        response = client.post(
            "/v1/memories",
            content=body if declared else _chunks(2**21),
            headers={"Content-Type": "application/json"},
        )
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert api.stored() == []


def test_a_body_just_under_the_limit_is_read(api: Api, served: str) -> None:
    text = "The long note says: " + "word " * 150_000  # ~750 KB, under 1 MiB
    with httpx.Client(base_url=served, headers=headers(api), timeout=60) as client:
        response = client.post("/v1/memories", json={**ME, "content": text})
    assert response.status_code == 200, response.text
