"""The client of the REST crash harness: the crash writer's workload over real HTTP.

``RestWorkload`` repeats the cycle of ``crash_writer`` (one user per kind, the same
contents, so ``crash_checks`` judges the store unchanged), each operation one
request to ``engram serve`` on loopback:

* ``single``: ``POST /v1/memories`` (user ``w-single``);
* ``bulk``: ``POST /v1/memories:batch`` of 20 to 64 items (``w-bulk``);
* ``supersede``: a new value for one of four keys (``w-keyed``), by turns
  ``POST /v1/memories`` with the key and ``POST /v1/memories/{id}/correct`` of the
  key's last acknowledged version;
* ``consolidate``: three episodes observed eight days ago (``:batch``), then
  ``POST /v1/consolidate`` for ``w-episodes`` (admin key);
* ``sweep``: two transient memories (retention one hour, ``w-sweep``), then
  ``POST /v1/sweep`` (admin key) at two hours past the clock, where they are due
  (the server keeps the real clock, so the sweep's ``now`` moves ahead instead of
  the writes being back-dated as the SDK writer does);
* ``forget``: a write, then ``DELETE /v1/memories/{id}`` (``w-forget``);
* ``erase``: a new user with three memories (``:batch``) and a working-memory item
  (``PUT /v1/working/draft``), then ``DELETE /v1/users/{id}`` (admin key).

The log is ``crash_writer.Log``:
a ``begin`` line before the request is sent, an ``ack`` line only once a 2xx answer
has arrived, naming the ids and the SHA-256 of each stored content as the answer
gives them. A transport error (the server was killed) ends the run; any other
answer that is not 2xx is logged as an ``error`` line and ends it too (the harness
fails the trial on one: nothing but a kill may interrupt the workload).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from crash_writer import KEYS, USERS, Log, bulk_content, digest

__all__ = ["KINDS", "HttpError", "RestWorkload"]

KINDS = ("single", "bulk", "supersede", "consolidate", "sweep", "forget", "erase")
SWEEP_AHEAD = timedelta(hours=2)  # past the one-hour retention of the transient writes
_WORDS = ("amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "harbor",
          "indigo", "juniper", "kelp", "lichen", "marble", "nickel", "onyx", "pewter")  # fmt: skip


class HttpError(RuntimeError):
    """The server answered, but not with a 2xx: the workload cannot go on."""


def _written(results: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"id": r["record"]["id"], "sha": digest(r["record"]["content"]),
             "op": r["operation"]} for r in results if r["record"] is not None]  # fmt: skip


class RestWorkload:
    """One client: an HTTP client of the server, the log, counters naming contents."""

    def __init__(self, client: httpx.Client, log: Log, trial: int, seed: int) -> None:
        self.client, self.log, self.trial = client, log, trial
        self.rng = random.Random(seed)
        self.cycle = 0
        self.heads: dict[str, str] = {}  # key -> id of its last acknowledged version

    def tag(self) -> str:
        return f"t{self.trial}c{self.cycle}"

    def run(self, cycles: int | None = None, stop: Any = None) -> None:
        """Cycles until ``cycles`` are done, ``stop`` (an Event) is set or a request
        fails; a transport error propagates (the caller expects it after a kill)."""
        steps = {"single": self.single, "bulk": self.bulk, "supersede": self.supersede,
                 "consolidate": self.consolidate, "sweep": self.sweep,
                 "forget": self.forget, "erase": self.erase}  # fmt: skip
        while cycles is None or self.cycle < cycles:
            for kind in KINDS:
                if stop is not None and stop.is_set():
                    return
                steps[kind]()
            self.cycle += 1

    def request(self, op: str, method: str, path: str, **options: Any) -> Any:
        """One request; its JSON answer, or an ``error`` line and ``HttpError``."""
        response = self.client.request(method, path, **options)
        if not 200 <= response.status_code < 300:
            self.log.line("error", op, status=response.status_code, body=response.text[:500])
            raise HttpError(f"{method} {path}: {response.status_code} {response.text[:500]}")
        return response.json()

    def write(self, op: str, user: str, content: str, **fields: Any) -> dict[str, Any]:
        """One acknowledged ``POST /v1/memories``; its answer."""
        out: dict[str, Any] = {}

        def call() -> dict[str, Any]:
            got = self.request(op, "POST", "/v1/memories",
                               json={"user_id": user, "content": content, **fields})  # fmt: skip
            out.update(got)
            return {"written": _written([got]), "superseded": got["superseded"]}

        self.log.call(op, {"user": user, "sha": digest(content), **fields}, call)
        return out

    def batch(self, op: str, begin: dict[str, Any], items: list[dict[str, Any]]) -> None:
        body = {"user_id": begin["user"], "items": items}
        self.log.call(op, begin, lambda: {"written": _written(
            self.request(op, "POST", "/v1/memories:batch", json=body)["results"])})  # fmt: skip

    def single(self) -> None:
        word = self.rng.choice(_WORDS)
        self.write("single", USERS["single"], f"Fact {self.tag()}: the {word} service answers "
                   f"on port {self.rng.randint(1024, 65000)}.")  # fmt: skip

    def bulk(self) -> None:
        tag, size = self.tag(), self.rng.randint(20, 64)
        items = [{"content": bulk_content(tag, i)} for i in range(size)]
        self.batch("bulk", {"user": USERS["bulk"], "tag": tag, "size": size}, items)

    def supersede(self) -> None:
        key = f"k{self.rng.randrange(KEYS)}"
        region = f"{self.rng.choice(_WORDS)}-{self.rng.randint(1, 99)}"
        content = f"The deploy target of {key} is region {region} ({self.tag()})."
        user, head = USERS["supersede"], self.heads.get(key)
        if head is None or self.rng.random() < 0.5:
            got = self.write("supersede", user, content, key=key)
        else:
            got = {}

            def call() -> dict[str, Any]:
                got.update(self.request("supersede", "POST", f"/v1/memories/{head}/correct",
                                        json={"user_id": user, "content": content}))  # fmt: skip
                return {"written": _written([got]), "superseded": got["superseded"],
                        "corrected": head}  # fmt: skip

            self.log.call("supersede", {"user": user, "sha": digest(content), "key": key}, call)
        if got.get("record") is not None:
            self.heads[key] = got["record"]["id"]

    def consolidate(self) -> None:
        user = USERS["consolidate"]
        observed = datetime.now(UTC) - timedelta(days=8)
        items = [{"content": f"Episode {self.tag()} step {i}: we debugged the {w} pipeline "
                             f"and restarted the {w} worker.", "type": "episode",
                  "observed_at": (observed + timedelta(minutes=i)).isoformat()}
                 for i, w in enumerate(self.rng.sample(_WORDS, 3))]  # fmt: skip
        self.batch("episodes", {"user": user}, items)
        self.log.call(
            "consolidate",
            {"user": user},
            lambda: {
                "summaries": list(
                    self.request("consolidate", "POST", "/v1/consolidate", json={"user_id": user})[
                        "summary_ids"
                    ]
                )
            },
        )

    def sweep(self) -> None:
        user = USERS["sweep"]
        for n in range(2):  # transient (one hour): due at the sweep's now
            word = self.rng.choice(_WORDS)
            self.write("due", user, f"Transient note {self.tag()} number {n} about the {word} "
                       "queue.", retention="transient")  # fmt: skip
        now = (datetime.now(UTC) + SWEEP_AHEAD).isoformat()
        self.log.call("sweep", {"at": now}, lambda: {"expired": self.request(
            "sweep", "POST", "/v1/sweep", json={"now": now})["expired"]})  # fmt: skip

    def forget(self) -> None:
        user = USERS["forget"]
        got = self.write("forgettable", user, f"Temporary secret {self.tag()}: locker code "
                         f"{self.rng.randint(1000, 9999)}.")  # fmt: skip
        target = got["record"]["id"]
        self.log.call(
            "forget",
            {"user": user, "id": target},
            lambda: {
                "verified": self.request(
                    "forget", "DELETE", f"/v1/memories/{target}", params={"user_id": user}
                )["verified"]
            },
        )

    def erase(self) -> None:
        user = f"w-erase-{self.tag()}"
        items = [{"content": f"Personal note {i} of {user}: allergic to {w}."}
                 for i, w in enumerate(self.rng.sample(_WORDS, 3))]  # fmt: skip
        self.batch("erasable", {"user": user}, items)
        self.request("working", "PUT", "/v1/working/draft",
                     json={"user_id": user, "session_id": "s1",
                           "value": f"unsent reply of {user}"})  # fmt: skip
        self.log.call(
            "erase",
            {"user": user},
            lambda: {"verified": self.request("erase", "DELETE", f"/v1/users/{user}")["verified"]},
        )
