"""``engram serve``: the REST API on uvicorn, ready for a first-time user.

``serve`` opens the store (SQLite by default, PostgreSQL by URL, working
memory beside SQLite or on Redis), loads the API keys, and on a first start
with no key file creates one admin key for the tenant ``default``. Once the
socket listens it prints the URL, that key (shown this once: only its digest
is stored), the dashboard's URL and a curl line to try. The banner is printed only after uvicorn
is listening, so a port already in use never shows a URL that does not answer.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.errors import ConfigError
from engram.store.url import scheme_of, sqlite_path
from engram.surfaces import collector
from engram.surfaces.collector import DEFAULT_RESCAN_SECONDS
from engram.surfaces.rest.keys import ENV_KEYS, ENV_KEYS_FILE, KeyFile, KeyRing

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["Launch", "banner", "default_keys_path", "first_key", "listening_url", "run_server"]

DEFAULT_TENANT = "default"


def default_keys_path(db_url: str) -> Path | None:
    """``$ENGRAM_KEYS_FILE``, else ``<db path>-keys.json`` beside a SQLite file store;
    None for a server or in-memory store (it needs ``--keys`` or the environment)."""
    named = os.environ.get(ENV_KEYS_FILE)
    if named:
        return Path(named)
    if scheme_of(db_url) != "sqlite":
        return None
    path = sqlite_path(db_url)
    return None if path == ":memory:" else Path(f"{path}-keys.json")


def first_key(path: Path, tenant: str) -> str | None:
    """On a first start (no key file, no ``ENGRAM_API_KEYS``), an admin key for
    ``tenant``, returned to be shown once; otherwise None."""
    if os.environ.get(ENV_KEYS) is not None or KeyFile(path).exists():
        return None
    _, secret = KeyFile(path).create(tenant, admin=True, note="created by the first engram serve")
    return secret


@dataclass(frozen=True, slots=True)
class Launch:
    """What the banner reports about one start."""

    url: str
    keys: KeyRing
    new_key: str | None
    tenant: str
    ui_path: str = "/ui"
    mcp_path: str | None = None  # where the MCP endpoint is mounted (None: it is not)


def banner(launch: Launch) -> str:
    """The lines printed once the server listens."""
    lines = [f"Engram REST API on {launch.url}  (schema: {launch.url}/openapi.json)"]
    where = f" in {launch.keys.path}" if launch.keys.path else f" from ${ENV_KEYS}"
    key = launch.new_key
    if key is not None:
        lines += [f"A first API key, admin of tenant {launch.tenant!r} (shown only now; "
                  f"stored hashed{where}):", f"  {key}"]  # fmt: skip
    else:
        active = len(launch.keys.active())
        lines.append(f"{active} active API key(s){where}; a key is shown only when created: "
                     f"engram keys create --tenant {launch.tenant} --admin")  # fmt: skip
        key = "<your API key>"
    lines.append(f"Dashboard: {launch.url}{launch.ui_path}/  (paste an API key there)")
    if launch.mcp_path is not None:
        lines.append(f"MCP (streamable HTTP, the same API keys): {launch.url}{launch.mcp_path}")
    body = '{"user_id": "u1", "content": "I prefer dark mode in every editor."}'
    auth = shlex.quote(f"Authorization: Bearer {key}")
    ask = '{"user_id": "u1", "query": "Which editor theme do I like?"}'
    lines += ["Try it:", f"  curl -s -H {auth} -H 'Content-Type: application/json' "
              f"-d {shlex.quote(body)} {launch.url}/v1/memories",
              f"  curl -s -H {auth} -H 'Content-Type: application/json' "
              f"-d {shlex.quote(ask)} {launch.url}/v1/recall"]  # fmt: skip
    return "\n".join(lines)


async def _serve(server: object, announce: Callable[[str], None]) -> None:
    """Run ``server`` (a ``uvicorn.Server``) and announce its URL once it listens."""
    import uvicorn

    assert isinstance(server, uvicorn.Server)
    task = asyncio.create_task(server.serve())
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    if server.started:
        sockets = [s for srv in server.servers for s in srv.sockets]
        announce(listening_url(sockets[0].getsockname()))
    await task


def listening_url(address: tuple[str, int] | Any) -> str:
    """The base URL of a listening socket's address."""
    host, port = address[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def run_server(app: FastAPI, host: str, port: int, access_log: bool,
               announce: Callable[[str], None],
               gc_rescan_seconds: float = DEFAULT_RESCAN_SECONDS) -> int:  # fmt: skip
    """Serve ``app`` until interrupted; the exit status. While it serves, full garbage
    collections skip what survived the last one (``surfaces.collector``)."""
    try:
        import uvicorn
    except ImportError:
        raise ConfigError("engram serve needs the server extra: "
                          "pip install 'engram-governed[server]'") from None  # fmt: skip
    level = "info" if access_log else "warning"  # the banner says where it listens
    # the lifespan runs the MCP endpoint's transport
    config = uvicorn.Config(app, host=host, port=port, access_log=access_log, log_level=level,
                            lifespan="on")  # fmt: skip
    server = uvicorn.Server(config)
    uninstall = collector.install(gc_rescan_seconds)
    try:
        # uvicorn's own choice of event loop (uvloop when installed, as its workers use);
        # a bare asyncio.run would always take the slower default loop.
        with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
            runner.run(_serve(server, announce))
    finally:
        uninstall()
    return 0 if server.started else 1
