"""Rewriting what a Redis server persisted, after an erasure deleted keys.

Deleting a key removes its value from memory, but a server with persistence on
still has it on disk: in the last RDB snapshot (``dump.rdb``) until the next one,
and in the append-only file (the ``SET``/``HSET`` that wrote it) until the file is
rewritten. ``rewrite`` asks for both now (``BGSAVE``, ``BGREWRITEAOF``) and waits
until the server reports them finished and successful. It proves nothing about
copies outside the server: replicas (they apply the ``DEL`` too, with lag),
copied snapshots and backups (``docs/erasure.md``).
"""

from __future__ import annotations

import time
from typing import Any

from engram.errors import StoreError

__all__ = ["CHECK", "rewrite"]

CHECK = "redis persistence"
_POLL_SECONDS = 0.05


def _config(client: Any) -> tuple[bool, bool]:
    """Whether RDB snapshots and the append-only file are on; ``StoreError`` when the
    server refuses ``CONFIG GET`` (a managed Redis may rename or disable it)."""
    from redis import exceptions

    try:
        save = client.config_get("save").get("save", "")
        aof = client.config_get("appendonly").get("appendonly", "no")
    except exceptions.RedisError as exc:
        raise StoreError(f"Redis refused CONFIG GET ({type(exc).__name__})") from None
    return bool(str(save).strip()), str(aof) == "yes"


def rewrite(client: Any, timeout_seconds: float) -> bool:
    """Rewrite the snapshot and the append-only file that are on, waiting up to
    ``timeout_seconds``; True when nothing is persisted or every rewrite succeeded."""
    snapshots, appends = _config(client)
    wanted = [name for name, on in (("rdb", snapshots), ("aof", appends)) if on]
    deadline = time.monotonic() + timeout_seconds
    return all(_run(client, kind, deadline) for kind in wanted)


def _run(client: Any, kind: str, deadline: float) -> bool:
    """One background rewrite (``rdb`` or ``aof``), started once nothing else runs."""
    from redis import exceptions

    busy = f"{'rdb_bgsave' if kind == 'rdb' else 'aof_rewrite'}_in_progress"
    if not _idle(client, deadline):
        return False
    try:
        client.bgsave() if kind == "rdb" else client.bgrewriteaof()
    except exceptions.ResponseError:
        return False
    while time.monotonic() < deadline:
        info = client.info("persistence")
        if not int(info.get(busy, 0)) and not int(info.get("aof_rewrite_scheduled", 0)):
            status = "rdb_last_bgsave_status" if kind == "rdb" else "aof_last_bgrewrite_status"
            return str(info.get(status, "")) == "ok"
        time.sleep(_POLL_SECONDS)
    return False


def _idle(client: Any, deadline: float) -> bool:
    """Wait until no snapshot or rewrite runs (a new one would be refused)."""
    while time.monotonic() < deadline:
        info = client.info("persistence")
        if not int(info.get("rdb_bgsave_in_progress", 0)) and not int(
            info.get("aof_rewrite_in_progress", 0)
        ):
            return True
        time.sleep(_POLL_SECONDS)
    return False
