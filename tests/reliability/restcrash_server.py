"""A real ``engram serve`` process for the REST reliability harnesses.

``Server`` runs ``python -m engram serve`` (the command an operator runs) on a free
loopback port over one store (a SQLite file, or PostgreSQL with working memory on
Redis), with the hashing embedder, the rate limit off (the harnesses measure the
store, not the key buckets) and the API keys of a key file. It runs in a process
group of its own, so ``kill`` (SIGKILL) and ``stop`` (SIGTERM) reach every worker
of ``--workers N``. The banner names the URL once the socket listens; its output
goes to files beside the store, not pipes, so a server is never blocked writing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from engram.surfaces.rest.keys import ENV_KEYS, ENV_KEYS_FILE, KeyFile

__all__ = ["Server", "ServerFailed", "admin_key", "clear_working"]

SRC = Path(__file__).resolve().parents[2] / "src"
_BANNER = "Engram REST API on "


class ServerFailed(RuntimeError):
    """The server did not start, or did not become ready."""


def admin_key(keys: Path, tenant: str) -> str:
    """A new admin key of ``tenant`` in the key file ``keys`` (the key itself)."""
    return KeyFile(keys).create(tenant, admin=True, note="reliability harness")[1]


def clear_working(redis_url: str, tenant: str, prefix: str = "engram") -> None:
    """Delete the working-memory keys ``engram serve`` left for ``tenant`` on Redis
    (it uses the default prefix; the harness's tenants are its own)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        for pattern in (f"{prefix}:wm:{tenant}:*", f"{prefix}:wmi:{tenant}:*"):
            keys = list(client.scan_iter(match=pattern, count=1000))
            if keys:
                client.delete(*keys)
    finally:
        client.close()


@dataclass
class Server:
    """``engram serve`` over ``db`` with the keys of ``keys``; output under ``folder``."""

    db: str
    keys: Path
    folder: Path
    working: str | None = None
    workers: int = 1
    start_timeout_s: float = 60.0
    process: subprocess.Popen[bytes] | None = None
    url: str = ""
    starts: int = 0
    start_seconds: list[float] = field(default_factory=list)

    def command(self) -> list[str]:
        out = [sys.executable, "-m", "engram", "serve", "--port", "0", "--db", self.db,
               "--keys", str(self.keys), "--embedder", "hashing", "--rate-limit", "0",
               "--workers", str(self.workers)]  # fmt: skip
        return out + ([] if self.working is None else ["--working", self.working])

    def start(self) -> str:
        """Start the server and wait until ``/readyz`` answers 200; its base URL."""
        tick = time.perf_counter()
        self.starts += 1
        out = self.folder / f"server-{self.starts:04d}.out"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(SRC), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
        env.pop(ENV_KEYS, None)
        env.pop(ENV_KEYS_FILE, None)
        with open(out, "wb") as sink:
            self.process = subprocess.Popen(self.command(), stdout=sink,
                                            stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)  # fmt: skip
        self.url = self._banner(out)
        self._ready()
        self.start_seconds.append(time.perf_counter() - tick)
        return self.url

    def _banner(self, out: Path) -> str:
        deadline = time.monotonic() + self.start_timeout_s
        assert self.process is not None
        while time.monotonic() < deadline:
            for line in out.read_text(errors="replace").splitlines():
                if line.startswith(_BANNER):
                    return line[len(_BANNER) :].split()[0]
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        self.kill()
        raise ServerFailed(f"engram serve printed no URL:\n{out.read_text(errors='replace')}")

    def _ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=10).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.kill()
        raise ServerFailed(f"{self.url}/readyz never answered 200")

    def output(self) -> str:
        """What the latest start printed (banner, warnings, tracebacks)."""
        path = self.folder / f"server-{self.starts:04d}.out"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the server's whole process group and reap it."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None

    def stop(self) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL after 20 s."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=20)
        self.kill()

    def workers_cpu(self, store: Path) -> dict[int, float]:
        """CPU seconds used so far by each child of the server that holds ``store``
        open (a ``--workers`` worker that opened its Engram); Linux ``/proc``."""
        assert self.process is not None
        tick = os.sysconf("SC_CLK_TCK")
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        out: dict[int, float] = {}
        for pid in (int(p) for p in children.read_text().split()):
            with contextlib.suppress(OSError):
                fds = [os.readlink(f) for f in Path(f"/proc/{pid}/fd").iterdir()]
                if os.path.realpath(store) in fds:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    out[pid] = (int(fields[11]) + int(fields[12])) / tick
        return out

    def wait_workers(self, store: Path) -> dict[int, float]:
        """Wait until every one of ``workers`` holds ``store`` open; their CPU seconds."""
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            found = self.workers_cpu(store)
            if len(found) >= self.workers:
                return found
            time.sleep(0.1)
        raise ServerFailed(f"fewer than {self.workers} workers opened {store}")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None
