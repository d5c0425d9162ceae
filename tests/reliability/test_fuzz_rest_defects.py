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
