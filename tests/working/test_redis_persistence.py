"""Erasing a subject also rewrites what a Redis with persistence on keeps on disk.

A private ``redis-server`` (Debian's, started here on a free port in a temporary
directory, stopped at the end) runs with RDB snapshots and the append-only file
on. A working item written before the erasure is in both files; after
``erase_subject`` the receipt names ``redis persistence`` and no file of the
server's directory holds a byte of the item.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.backends import missing

from engram import Context, Engram

MARKER = "needle-5e1f-working-memory-value-in-redis-persistence"


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def persistent_redis(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A Redis with ``appendonly yes`` and snapshots, its URL and data directory."""
    binary = shutil.which("redis-server")
    if binary is None:
        missing("redis-server is not installed (Debian package redis-server)")
    try:
        import redis
    except ImportError:
        missing("redis-py is not installed (pip install 'engram[redis]')")
    port = _free_port()
    server = subprocess.Popen(
        [str(binary), "--bind", "127.0.0.1", "--port", str(port), "--dir", str(tmp_path),
         "--appendonly", "yes", "--save", "3600 1", "--daemonize", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
    try:
        for _ in range(100):
            with contextlib.suppress(redis.RedisError):
                if client.ping():
                    break
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0", tmp_path
    finally:
        client.close()
        server.terminate()
        server.wait(timeout=10)


def _holding(directory: Path) -> list[str]:
    return [p.name for p in directory.rglob("*") if p.is_file() and MARKER.encode()
            in p.read_bytes()]  # fmt: skip


def test_erasure_rewrites_the_snapshot_and_the_append_only_file(
    persistent_redis: tuple[str, Path], tmp_path: Path
) -> None:
    import redis

    url, directory = persistent_redis
    ctx = Context(tenant_id="acme", user_id="patient-3", session_id="s1")
    other = Context(tenant_id="acme", user_id="u2", session_id="s1")
    with Engram.open(f"sqlite:///{tmp_path}/store.db", embedder="hashing", working=url) as mem:
        mem.working(ctx).set("plan", MARKER)
        mem.working(other).set("plan", "water the plants")
        client = redis.Redis.from_url(url)
        client.bgsave()
        for _ in range(200):
            if not int(client.info("persistence")["rdb_bgsave_in_progress"]):
                break
            time.sleep(0.05)
        client.close()
        assert len(_holding(directory)) >= 2  # the snapshot and the append-only file

        receipt = mem.erase_subject("acme", "patient-3")

        assert receipt.verified, receipt.failed
        assert receipt.working == 1
        assert "redis persistence" in receipt.checked
        assert _holding(directory) == []
        assert mem.working(other).get("plan") is not None
