"""The MCP endpoint mounted in the REST app queues its recalls in the app's own gate.

One queue per process for both surfaces: an MCP ``recall`` waits behind the REST
recalls already running (and they behind it), so mixed traffic does not share the
core all at once. A recall the gate refuses is a tool error naming ``unavailable``,
and the tool still answers once the slot is free. Over real HTTP, with the SDK's client.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp_support import http_client, serving, structured
from tests.surfaces.gate_support import hold_recalls, wait_until_full

from engram import Context, Engram
from engram.surfaces.rest import KeyFile, KeyRing, RestSettings, create_app


def test_mcp_recall_waits_in_the_rest_gate(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    _, key = KeyFile(keys).create("acme")
    mem = Engram.open(f"sqlite:///{tmp_path / 'm.db'}", embedder="hashing")
    mem.remember(Context(tenant_id="acme", user_id="u1"), "The deploy target is Fly.io.")
    go = hold_recalls(mem)
    settings = RestSettings(recall_concurrency=1, recall_queue_seconds=0.3)
    app = create_app(mem, KeyRing(path=keys), settings)
    auth = {"Authorization": f"Bearer {key}"}

    async def mcp_recall(url: str) -> Any:
        async with http_client(f"{url}/mcp", Engram_User="u1", **auth) as client:
            return await client.call_tool("recall", {"query": "where do we deploy?"})

    try:
        with serving(app) as url, ThreadPoolExecutor(1) as pool:
            body = {"user_id": "u1", "query": "where do we deploy?"}
            running = pool.submit(httpx.post, f"{url}/v1/recall", headers=auth, json=body,
                                  timeout=30)  # fmt: skip
            wait_until_full(app.state.recall_gate)  # the REST recall holds the only slot
            refused = anyio.run(mcp_recall, url)
            go.set()
            assert refused.is_error
            assert "unavailable" in refused.content[0].text
            assert "busy" in refused.content[0].text
            assert running.result(30).status_code == 200
            answered = structured(anyio.run(mcp_recall, url))
            assert "Fly.io" in answered["prompt"]
    finally:
        mem.close()
