"""The concurrent workload of ``concur_support`` through the REST API (issue 15, item 2).

``run_rest(plan, url, key)`` forks ``plan.processes`` client processes of
``plan.threads`` threads each; every thread sends requests to one ``engram serve``
(``restcrash_server.Server``, one process or ``--workers N`` on one socket) over
loopback HTTP for ``plan.seconds``: single writes (``POST /v1/memories``), bulk
writes of 5 (``:batch``), SUPERSEDEs of the shared keys (``POST /v1/memories`` with
``key`` and ``value``), corrections of the last version of a key the thread saw
(``POST /v1/memories/{id}/correct``: a stale one is 409 ``conflict``), recalls,
sweeps (``POST /v1/sweep``), ``DELETE /v1/memories/{id}`` of the thread's own writes
and ``DELETE /v1/users/victim``. The server keeps the real clock, so a write cannot
be back-dated as the SDK workload's are: one single write in five is transient
(retention one hour) and each sweep runs at two hours past the clock (``now``),
where those are due. Each thread logs the same ``ThreadLog`` as the SDK workload, so
``concur_checks.judge`` judges the store unchanged: no lost acknowledged write,
one active version per key on one line of versions, no recall of another user's
or a removed record, a verifying audit chain.

What a caller may see besides a 2xx is a 503 ``application/problem+json`` with
``Retry-After`` (a store busy past its bound) and, for a correction, 409
``conflict``: those are logged as documented failures. Anything else (a 500, a
503 without ``Retry-After``, another status, a dropped connection) is an
undocumented failure, which the judge reports as a problem.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from concur_support import VICTIM, WORDS, Plan, ThreadLog, _Worker

from engram.errors import EngramError

__all__ = ["REST_MIX", "SWEEP_AHEAD", "BadAnswer", "Refused", "run_rest"]

REST_MIX = (("remember", 30), ("remember_many", 8), ("supersede", 15), ("correct", 10),
            ("recall", 25), ("sweep", 3), ("forget", 6), ("erase", 3))  # fmt: skip
SWEEP_AHEAD = timedelta(hours=2)  # a sweep's now: the transient writes (one hour) are due
PROBLEM = "application/problem+json"


class Refused(EngramError):
    """A documented refusal: 503 problem+json with ``Retry-After``, or 409 conflict on a
    correction of a version another caller superseded first."""


class BadAnswer(RuntimeError):
    """An answer no caller may get: a 5xx other than such a 503, or an unexpected status."""


def _judged(kind: str, response: httpx.Response) -> Exception:
    """The failure a non-2xx answer is (documented or not)."""
    media = response.headers.get("content-type", "")
    text = f"{kind}: HTTP {response.status_code} {media} {response.text[:300]}"
    busy = response.status_code == 503 and media == PROBLEM and "retry-after" in response.headers
    stale = response.status_code == 409 and kind == "correct" and media == PROBLEM
    return Refused(text) if busy or stale else BadAnswer(text)


class _RestWorker(_Worker):
    """One thread's requests (the SDK worker's operations, each one HTTP request)."""

    def __init__(self, plan: Plan, http: httpx.Client, log: ThreadLog) -> None:
        super().__init__(plan, None, log)  # type: ignore[arg-type]  # no Engram: HTTP
        self.http = http
        self.heads: dict[tuple[str, str], str] = {}  # (user, key) -> last version seen
        self.ops["correct"] = self.correct

    def call(self, kind: str, method: str, path: str, **options: Any) -> Any:
        response = self.http.request(method, path, **options)
        if not 200 <= response.status_code < 300:
            raise _judged(kind, response)
        return response.json()

    def remember(self) -> None:
        user, ephemeral = self._user(), self.rng.random() < 0.2
        body = {"user_id": user, "content": self._text()}
        if ephemeral:  # due at every sweep's now: a sweep may delete it
            body["retention"] = "transient"
        start = time.monotonic()
        got = self.call("remember", "POST", "/v1/memories", json=body)
        self._ack("remember", user, [got["record"]["id"]], start, ephemeral=ephemeral)
        if user != VICTIM and not ephemeral:
            self.mine.append((user, got["record"]["id"]))

    def remember_many(self) -> None:
        user, start = self._user(), time.monotonic()
        items = [{"content": self._text()} for _ in range(5)]
        got = self.call("remember_many", "POST", "/v1/memories:batch",
                        json={"user_id": user, "items": items})["results"]  # fmt: skip
        ids = [g["record"]["id"] for g in got if g["record"] is not None]
        assert len(ids) == 5, got
        self._ack("remember_many", user, ids, start)

    def _keyed(self) -> tuple[str, str, str]:
        user = self._user(victim=0.0)
        key = f"k{self.rng.randrange(self.plan.keys)}"
        return user, key, f"{self.log.process}x{self.log.thread}x{self.n}"

    def _acked_version(self, user: str, key: str, got: dict[str, Any], start: float) -> None:
        self.heads[(user, key)] = got["record"]["id"]
        self._ack("supersede", user, [got["record"]["id"]], start, key=key,
                  operation=got["operation"])  # fmt: skip

    def supersede(self) -> None:
        user, key, value = self._keyed()
        start = time.monotonic()
        got = self.call("supersede", "POST", "/v1/memories", json={
            "user_id": user, "content": f"Setting {key} is {value} ({self._text()})",
            "key": key, "value": value})  # fmt: skip
        self._acked_version(user, key, got, start)

    def correct(self) -> None:
        user, key, value = self._keyed()
        head = self.heads.get((user, key))
        if head is None:
            return self.supersede()
        start = time.monotonic()
        got = self.call("correct", "POST", f"/v1/memories/{head}/correct", json={
            "user_id": user, "content": f"Setting {key} is {value} ({self._text()})",
            "value": value})  # fmt: skip
        self._acked_version(user, key, got, start)

    def recall(self) -> None:
        user, start = self._user(), time.monotonic()
        query = " ".join(self.rng.sample(WORDS, 3))
        got = self.call("recall", "POST", "/v1/recall", json={"user_id": user, "query": query})
        records = [item["record"] for item in got["items"]]
        self._ack("recall", user, [r["id"] for r in records], start)
        for record in records:
            if record["tenant_id"] != self.plan.tenant or record["user_id"] not in (user, None):
                self.log.foreign.append(f"{user} saw {record['id']} of {record['user_id']}")

    def sweep(self) -> None:
        start, now = time.monotonic(), datetime.now(UTC) + SWEEP_AHEAD
        self.call("sweep", "POST", "/v1/sweep", json={"now": now.isoformat()})
        self._ack("sweep", "", [], start)

    def forget(self) -> None:
        if not self.mine:
            return self.remember()
        user, record_id = self.mine.pop(self.rng.randrange(len(self.mine)))
        start, self.about = time.monotonic(), (record_id,)
        got = self.call("forget", "DELETE", f"/v1/memories/{record_id}",
                        params={"user_id": user})  # fmt: skip
        self._ack("forget", user, [record_id], start, verified=got["verified"],
                  unverified=tuple(got["failed"]))  # fmt: skip

    def erase(self) -> None:
        start = time.monotonic()
        got = self.call("erase", "DELETE", f"/v1/users/{VICTIM}")
        self._ack("erase", VICTIM, [], start, verified=got["verified"],
                  unverified=tuple(got.get("failed", ())))  # fmt: skip


def _thread(plan: Plan, url: str, key: str, log: ThreadLog, go: float) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        worker = _RestWorker(plan, http, log)
        time.sleep(max(0.0, go - time.monotonic()))
        worker.loop(go + plan.seconds)


def _process(plan: Plan, url: str, key: str, index: int, go: float, out: Any) -> None:
    """One client process: its threads from ``go`` (monotonic) for ``plan.seconds``."""
    logs = [ThreadLog(index, t) for t in range(plan.threads)]
    threads = [threading.Thread(target=_thread, args=(plan, url, key, log, go)) for log in logs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.put(logs)


def run_rest(plan: Plan, url: str, key: str) -> tuple[list[ThreadLog], float]:
    """Run the plan through the server at ``url`` with the admin key ``key``; every
    thread's log and the seconds the requests ran."""
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    go = time.monotonic() + 1.0  # every process forked and connected by then
    procs = [context.Process(target=_process, args=(plan, url, key, i, go, out))
             for i in range(plan.processes)]  # fmt: skip
    for proc in procs:
        proc.start()
    logs: list[ThreadLog] = []
    try:
        for _ in procs:
            logs += out.get(timeout=plan.seconds + 300)
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
                proc.join()
    return logs, time.monotonic() - go
