"""Defects the API fuzzing found (``test_fuzz_schema.py``), each pinned here.

1. A working-memory key with a line break: Starlette's ``path`` convertor stopped
   at it and its route pattern's ``$`` matched before a final one, so
   ``PUT /v1/working/step%0A`` set ``step`` (an alias of a key the SDK refuses) and
   ``/v1/working/a%0Ab`` had no route (an undocumented 404)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the REST API needs the server extra")

from fuzz_calls_support import AsgiClient

from engram import Context, Engram
from engram.surfaces.rest import KeyFile, KeyRing, create_app

ME = {"user_id": "u1", "session_id": "s1"}


@pytest.mark.parametrize("path", ["step%0A", "a%0Ab", "%0D%0Astep", "step%0A%0A"])
def test_a_working_key_with_a_line_break_is_refused_not_aliased(
    sqlite_file_url: str, open_mem: Callable[..., Engram], tmp_path: Path, path: str
) -> None:
    mem = open_mem(sqlite_file_url)
    key = KeyFile(tmp_path / "keys.json").create("acme")[1]
    client = AsgiClient(create_app(mem, KeyRing(path=tmp_path / "keys.json")))
    auth = {"Authorization": f"Bearer {key}"}
    try:
        answer = client.put(f"/v1/working/{path}", json={**ME, "value": 1}, headers=auth)
        assert answer.status_code == 422, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert "key" in answer.json()["detail"]
        for stem in ("step", "a", "b"):
            found = client.get(f"/v1/working/{stem}", params=ME, headers=auth)
            assert found.status_code == 404, (stem, found.text)  # nothing set under an alias
    finally:
        client.close()
    assert mem.working(Context("acme", "u1", session_id="s1")).list() == []


@pytest.mark.parametrize("route", ["remember", "correct", "observe", "batch"])
def test_a_nul_in_content_is_the_same_answer_on_every_backend(
    shared_url: str, open_mem: Callable[..., Engram], tmp_path: Path, route: str
) -> None:
    """2. A NUL character in a memory's content: PostgreSQL's text type cannot hold
    one, so ``POST .../correct`` with one answered 500 (``store-error``) there while
    SQLite stored it (found by the stateful fuzzing, ``test_fuzz_stateful.py``)."""
    mem = open_mem(shared_url)
    key = KeyFile(tmp_path / "keys.json").create("acme")[1]
    client = AsgiClient(create_app(mem, KeyRing(path=tmp_path / "keys.json")))
    auth = {"Authorization": f"Bearer {key}"}
    text = "Deploys\x00 on Fridays."
    try:
        first = client.post("/v1/memories", json={**ME, "content": "Deploys on Mondays."},
                            headers=auth)  # fmt: skip
        assert first.status_code == 200, first.text
        target = first.json()["record"]["id"]
        path, body = {
            "remember": ("/v1/memories", {**ME, "content": text}),
            "correct": (f"/v1/memories/{target}/correct", {**ME, "content": text}),
            "observe": ("/v1/observe", {**ME, "turns": [{"role": "user", "text": text}]}),
            "batch": ("/v1/memories:batch", {**ME, "items": [{"content": text}]}),
        }[route]
        answer = client.post(path, json=body, headers=auth)
    finally:
        client.close()
    assert answer.status_code == 422, answer.text
    assert "NUL" in answer.json()["detail"]
    assert [r.content for r in mem.list(Context("acme", "u1"), status=None)] == [
        "Deploys on Mondays."
    ]
