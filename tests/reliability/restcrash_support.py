"""The REST crash harness: SIGKILL ``engram serve`` mid-traffic, restart it, check.

A trial (``RestHarness.kill_trial``):

1. starts ``engram serve`` on the store (``restcrash_server.Server``) and a client
   thread running ``restcrash_client.RestWorkload`` over real HTTP on loopback,
   logging each acknowledgement only once its 2xx answer has arrived;
2. waits until the client begins the operation chosen for the trial (its first or
   second time), sleeps a random time up to 1.2 times that operation's median so
   far, and SIGKILLs the **server** (its process group); the client's request in
   flight fails and the client stops;
3. restarts the server on the same store, waits for ``/readyz``, and reads back
   through ``GET /v1/memories/{id}`` every record this trial's log acknowledged
   for a user whose records are never deleted (single, bulk, supersede, episodes):
   each must answer 200 with the acknowledged content;
4. leaves it running for the next trial. ``check`` stops it (SIGTERM) and runs
   ``crash_checks.check`` on the store against every log so far, as for the SDK
   writer (``RestHarness`` is a ``crash_support.Harness``:
   the same log, kill moments, durations and checks).

Used by ``tests/reliability/test_restcrash_kills.py`` (a few trials per backend) and
``benchmarks/crash.py --surface rest`` (a hundred or more).
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from crash_checks import Findings
from crash_support import Harness, Kill, WriterFailed, read_log
from crash_writer import TENANT, Log, digest
from restcrash_client import KINDS, HttpError, RestWorkload
from restcrash_server import Server, admin_key

__all__ = ["KINDS", "RestHarness"]

_DEFAULT_SECONDS = 0.05
_KEPT = ("single", "bulk", "supersede", "episodes")  # users whose records stay


@dataclass
class _Client:
    """The client thread of one trial, and how it ended."""

    thread: threading.Thread
    stop: threading.Event
    ended: list[BaseException] = field(default_factory=list)


@dataclass
class RestHarness(Harness):
    """Trials through ``engram serve`` on one store (see the module docstring)."""

    server: Server | None = None
    key: str = ""
    unserved: list[str] = field(default_factory=list)  # read-backs that failed
    served: int = 0  # acknowledged records read back through the restarted server

    def __post_init__(self) -> None:
        super().__post_init__()
        keys = self.folder / "keys.json"
        self.key = admin_key(keys, TENANT)
        self.server = Server(self.url, keys, self.folder, working=self.redis_url)

    def _client(self, trial: int, log_path: Path, cycles: int | None) -> _Client:
        stop = threading.Event()
        client = _Client(threading.Thread(target=lambda: None), stop)
        assert self.server is not None
        base = self.server.url

        def work() -> None:
            headers = {"Authorization": f"Bearer {self.key}"}
            with open(log_path, "a", encoding="utf-8") as out, \
                    httpx.Client(base_url=base, headers=headers, timeout=120) as http:  # fmt: skip
                log = Log(out)
                log.line("ready", "open")
                try:
                    RestWorkload(http, log, trial, seed=trial).run(cycles, stop)
                    log.line("done", "close")
                except BaseException as exc:  # a transport error is expected after a kill
                    client.ended.append(exc)

        client.thread = threading.Thread(target=work, name=f"rest-client-{trial}", daemon=True)
        client.thread.start()
        return client

    def _failed_rest(self, trial: int, why: str) -> WriterFailed:
        assert self.server is not None
        return WriterFailed(f"trial {trial}: {why}\nserver output:\n{self.server.output()[-2000:]}")

    def clean_run(self, trial: int, cycles: int) -> None:
        """``cycles`` cycles through a server that is then stopped (no kill)."""
        assert self.server is not None
        log_path = self.folder / f"trial-{trial:04d}.jsonl"
        self.server.start()
        try:
            client = self._client(trial, log_path, cycles)
            client.thread.join(self.timeout_s)
            if client.thread.is_alive() or client.ended:
                raise self._failed_rest(trial, f"the clean run failed: {client.ended}")
        finally:
            self.server.stop()
        self._take(read_log(log_path))

    def kill_trial(self, trial: int, target: str) -> Kill:
        """Kill the server during (or just after) ``target``, restart it, read back."""
        assert self.server is not None
        log_path = self.folder / f"trial-{trial:04d}.jsonl"
        occurrence = self.rng.randint(1, 2)
        known = self.durations.get(target)
        delay = self.rng.uniform(0, 1.2 * (statistics.median(known) if known else
                                           _DEFAULT_SECONDS))  # fmt: skip
        if not self.server.running:  # else the server restarted after the last kill
            self.server.start()
        client = self._client(trial, log_path, None)
        deadline = time.monotonic() + self.timeout_s
        try:
            while self._begun(log_path, target) < occurrence:
                if not client.thread.is_alive():
                    raise self._failed_rest(trial, f"the client stopped early: {client.ended}")
                if time.monotonic() > deadline:
                    raise self._failed_rest(trial, f"no {target} within {self.timeout_s} s")
                time.sleep(0.001)
            time.sleep(delay)
        finally:
            self.server.kill()
            client.stop.set()
            client.thread.join(60)
        events = read_log(log_path)
        refused = [e for e in events if e["ev"] == "error"]
        if refused or any(isinstance(e, HttpError) for e in client.ended):
            raise self._failed_rest(trial, f"an answer that was not 2xx: {refused[:3]}")
        self._take(events)
        self._read_back(events)
        return self._killed(trial, target, delay, events)

    def _read_back(self, events: list[dict[str, Any]]) -> None:
        """Restart the server on the killed store; every acknowledged record of a kept
        user must be served with its content. The server stays up for the next trial."""
        assert self.server is not None
        wanted = [(e["user"], row["id"], row["sha"]) for e in events
                  if e["ev"] == "ack" and e["op"] in _KEPT for row in e["written"]]  # fmt: skip
        base = self.server.start()
        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
            for user, record_id, sha in wanted:
                got = http.get(f"/v1/memories/{record_id}", params={"user_id": user})
                self.served += 1
                if got.status_code != 200:
                    self.unserved.append(f"{record_id}: {got.status_code} after restart")
                elif digest(got.json()["content"]) != sha:
                    self.unserved.append(f"{record_id}: content changed after restart")

    def check(self) -> Findings:
        """Stop the restarted server (SIGTERM), then ``crash_checks`` on the store,
        plus the read-backs through the restarted servers (a failed one counts as
        lost). The next trial starts a server again."""
        assert self.server is not None
        self.server.stop()
        findings = super().check()
        findings.lost += self.unserved
        return findings

    def close(self) -> None:
        """Make sure no server is left running."""
        if self.server is not None:
            self.server.kill()
