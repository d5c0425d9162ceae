"""``engram serve`` mounts the MCP endpoint at ``/mcp``: the SDK's own client reaches the
same store as the REST routes, with the same API keys (over real HTTP, in a process),
and a missing, wrong or revoked key is refused."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp_support import http_client, list_tools, structured

from engram.surfaces.rest import KeyFile

REPO = Path(__file__).resolve().parents[3]
MEMORY = {"content": "Prefers Python for data scripts.", "type": "preference"}


@contextmanager
def _serve(db: Path) -> Iterator[tuple[str, str, list[str]]]:
    """``engram serve`` on a free port: (base URL, the first admin key, banner lines)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env["PYTHONPATH"] = str(REPO / "src")
    command = [
        sys.executable,
        "-m",
        "engram",
        "--embedder",
        "hashing",
        "--db",
        f"sqlite:///{db}",
        "serve",
        "--port",
        "0",
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline and not any("/v1/recall" in line for line in lines):
            line = process.stdout.readline()
            assert line, "engram serve stopped:\n" + "\n".join(lines)
            lines.append(line.rstrip("\n"))
        url = lines[0].split(" on ", 1)[1].split()[0]
        yield url, lines[2].strip(), lines
    finally:
        process.terminate()
        process.wait(30)


def _remember(url: str, **headers: str) -> Any:
    async def main() -> Any:
        async with http_client(f"{url}/mcp", **headers) as client:
            return await client.call_tool("remember", MEMORY)

    return anyio.run(main)


def test_serve_mounts_mcp_on_the_rest_api_keys(tmp_path: Path) -> None:
    with _serve(tmp_path / "e.db") as (url, admin, lines):
        assert f"MCP (streamable HTTP, the same API keys): {url}/mcp" in lines
        added = structured(_remember(url, Authorization=f"Bearer {admin}", Engram_User="u1"))
        assert added["operation"] == "ADD"
        rest = httpx.get(
            f"{url}/v1/memories/{added['id']}?user_id=u1",
            timeout=30,
            headers={"Authorization": f"Bearer {admin}"},
        )
        assert rest.status_code == 200
        assert rest.json()["tenant_id"] == "default"  # the key's tenant, as over REST
        keys = KeyFile(tmp_path / "e.db-keys.json")
        coder = keys.create("default", users=["u2"], agents=["coder"])[1]  # made while running
        mine = structured(_remember(url, Authorization=f"Bearer {coder}"))
        seen = httpx.get(
            f"{url}/v1/memories/{mine['id']}?user_id=u2&agent_id=coder",
            headers={"Authorization": f"Bearer {admin}"},
            timeout=30,
        ).json()
        assert seen["user_id"] == "u2"  # the key's only user (and its only agent: no 403)
        for refused in (None, "egm_0000000000000000_nope", "not-a-key"):
            answer = list_tools(f"{url}/mcp", refused)
            assert answer.status_code == 401, refused
            assert answer.headers["content-type"] == "application/problem+json"
        other_user = list_tools(f"{url}/mcp", coder, **{"Engram-User": "u1"})
        assert other_user.status_code == 403
        revoked = next(k for k in keys.read() if coder.split("_")[1] == k.key_id)
        keys.revoke(revoked.key_id)
        assert list_tools(f"{url}/mcp", coder).status_code == 401
        assert list_tools(f"{url}/mcp", admin, **{"Engram-User": "u1"}).status_code == 200
