"""The writer process of the crash harness: runs the workload until it is killed.

Run as a script (``python crash_writer.py --url ... --log ... --trial N``) with the
package importable. It opens the store and repeats a cycle of operations, one user
per kind so each kind's expectations stay separate:

* ``single``: one ``remember`` (user ``w-single``);
* ``bulk``: one ``remember_many`` of 20 to 64 items, several chunks (``w-bulk``);
* ``supersede``: a ``remember`` to one of four keys, replacing its value (``w-keyed``);
* ``consolidate``: three episodes observed eight days ago, then ``consolidate``
  (``w-episodes``);
* ``sweep``: two memories whose retention has already ended (``w-sweep``), then the
  tenant's ``sweep`` (which also consolidates the owners of due episodes);
* ``forget``: a ``remember`` then ``forget`` of it (``w-forget``);
* ``erase``: a new user with three memories and a working-memory item, then
  ``erase_subject``.

Before each call it appends a ``begin`` line to the log, and after the call returns
an ``ack`` line naming what was acknowledged (ids and SHA-256 of contents), each
line flushed to the OS at once: a SIGKILL loses no line already written, so the
log is what the caller was told. The clock is a fake stepping one second per
call from ``BASE + trial hours``, so consolidation and the sweep see time move
forward across trials. ``--cycles N`` stops after N cycles (a run without a kill);
without it the writer stops after ``MAX_CYCLES`` or when its parent is gone, so
a harness that dies leaves no writer running.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import IO, Any

from engram import Config, Context, Engram, FrozenClock
from engram.config import ConsolidationConfig, WritePolicy
from engram.types import WriteResult

TENANT = "crash"
BASE = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
BATCH_ITEMS = 16  # chunk size of remember_many: a bulk write spans several chunks
KEYS = 4
MAX_CYCLES = 1000  # a writer nobody kills stops by itself (a trial kills it within seconds)
KINDS = ("single", "bulk", "supersede", "consolidate", "sweep", "forget", "erase")
USERS = {"single": "w-single", "bulk": "w-bulk", "supersede": "w-keyed",
         "consolidate": "w-episodes", "sweep": "w-sweep", "forget": "w-forget"}  # fmt: skip
_WORDS = ("amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "harbor",
          "indigo", "juniper", "kelp", "lichen", "marble", "nickel", "onyx", "pewter")  # fmt: skip


def digest(text: str) -> str:
    """The SHA-256 of a content, as the log records it."""
    return hashlib.sha256(text.encode()).hexdigest()


def config(redis_prefix: str | None = None) -> Config:
    """The harness's configuration: small chunks, a lease that a killed consolidator
    holds for one second only (the next trial's consolidation must not wait ten
    minutes for it), working memory under ``redis_prefix`` when given."""
    base = Config(write=WritePolicy(batch_items=BATCH_ITEMS),
                  consolidation=ConsolidationConfig(lease_seconds=1.0))  # fmt: skip
    if redis_prefix is None:
        return base
    return dataclasses.replace(
        base, working=dataclasses.replace(base.working, redis_prefix=redis_prefix)
    )


def bulk_content(tag: str, index: int) -> str:
    """Item ``index`` of the bulk write ``tag`` (the checker parses both back)."""
    word = _WORDS[index % len(_WORDS)]
    return f"Bulk {tag} item {index:03d}: the {word} cache node {index} keeps shard {index * 7}."


class Log:
    """The acknowledgement log: one JSON object per line, flushed as written."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.n = 0

    def line(self, event: str, op: str, **fields: Any) -> None:
        self.out.write(json.dumps({"ev": event, "op": op, "n": self.n, **fields}) + "\n")
        self.out.flush()

    def call(self, op: str, begin: dict[str, Any], call: Callable[[], dict[str, Any]]) -> None:
        """Log ``begin``, run ``call``, log its acknowledgement with its duration."""
        self.n += 1
        self.line("begin", op, **begin)
        tick = time.perf_counter()
        acked = call()
        self.line("ack", op, seconds=round(time.perf_counter() - tick, 6), **begin, **acked)


def _written(results: list[WriteResult]) -> list[dict[str, str]]:
    return [{"id": r.record.id, "sha": digest(r.record.content), "op": r.operation.value}
            for r in results if r.record is not None]  # fmt: skip


class Workload:
    """One writer: the store, its clock, the log and the counters naming contents."""

    def __init__(self, mem: Engram, clock: FrozenClock, log: Log, trial: int, seed: int) -> None:
        self.mem, self.clock, self.log, self.trial = mem, clock, log, trial
        self.rng = random.Random(seed)
        self.cycle = 0

    def ctx(self, user: str) -> Context:
        return Context(tenant_id=TENANT, user_id=user)

    def now(self) -> datetime:
        return self.clock.advance(seconds=1)

    def tag(self) -> str:
        return f"t{self.trial}c{self.cycle}"

    def run(self, cycles: int | None) -> None:
        steps = {"single": self.single, "bulk": self.bulk, "supersede": self.supersede,
                 "consolidate": self.consolidate, "sweep": self.sweep,
                 "forget": self.forget, "erase": self.erase}  # fmt: skip
        parent = os.getppid()
        while self.cycle < (MAX_CYCLES if cycles is None else cycles):
            if os.getppid() != parent:  # the harness died without killing this writer
                return
            for kind in KINDS:
                steps[kind]()
            self.cycle += 1

    def remember(self, user: str, content: str, op: str, **fields: Any) -> str:
        """One acknowledged ``remember``; its id."""
        ctx, now = self.ctx(user), self.now()
        out: dict[str, Any] = {}

        def call() -> dict[str, Any]:
            result = self.mem.remember(ctx, content, now=now, **fields)
            out.update(written=_written([result]), superseded=result.superseded)
            return out

        self.log.call(op, {"user": user, "sha": digest(content), **fields}, call)
        return str(out["written"][0]["id"])

    def single(self) -> None:
        word = self.rng.choice(_WORDS)
        self.remember(USERS["single"], f"Fact {self.tag()}: the {word} service answers on "
                      f"port {self.rng.randint(1024, 65000)}.", "single")  # fmt: skip

    def bulk(self) -> None:
        tag, size, ctx, now = self.tag(), self.rng.randint(20, 64), self.ctx("w-bulk"), self.now()
        items = [{"content": bulk_content(tag, i)} for i in range(size)]
        self.log.call("bulk", {"user": "w-bulk", "tag": tag, "size": size},
                      lambda: {"written": _written(self.mem.remember_many(ctx, items,
                                                                          now=now))})  # fmt: skip

    def supersede(self) -> None:
        key = f"k{self.rng.randrange(KEYS)}"
        region = f"{self.rng.choice(_WORDS)}-{self.rng.randint(1, 99)}"
        self.remember(USERS["supersede"], f"The deploy target of {key} is region {region} "
                      f"({self.tag()}).", "supersede", key=key)  # fmt: skip

    def consolidate(self) -> None:
        ctx, observed = self.ctx(USERS["consolidate"]), self.clock.now() - timedelta(days=8)
        items = [{"content": f"Episode {self.tag()} step {i}: we debugged the {w} pipeline "
                             f"and restarted the {w} worker.", "type": "episode",
                  "observed_at": observed + timedelta(minutes=i)}
                 for i, w in enumerate(self.rng.sample(_WORDS, 3))]  # fmt: skip
        now = self.now()
        self.log.call("episodes", {"user": ctx.user_id},
                      lambda: {"written": _written(self.mem.remember_many(ctx, items,
                                                                          now=now))})  # fmt: skip
        now = self.now()
        self.log.call("consolidate", {"user": ctx.user_id},
                      lambda: {"summaries": list(self.mem.consolidate(
                          TENANT, ctx.user_id, now, progress=False).summary_ids)})  # fmt: skip

    def sweep(self) -> None:
        ctx = self.ctx(USERS["sweep"])
        for n in range(2):  # written two hours ago, transient (one hour): due now
            word = self.rng.choice(_WORDS)
            content = f"Transient note {self.tag()} number {n} about the {word} queue."
            past = self.now() - timedelta(hours=2)
            self.log.call("due", {"user": ctx.user_id, "sha": digest(content)},
                          lambda c=content, p=past: {"written": _written([self.mem.remember(
                              ctx, c, now=p, retention="transient")])})  # fmt: skip
        now = self.now()
        self.log.call(
            "sweep",
            {"at": now.isoformat()},
            lambda: {"expired": self.mem.sweep(TENANT, now=now).expired},
        )

    def forget(self) -> None:
        user = USERS["forget"]
        target = self.remember(user, f"Temporary secret {self.tag()}: locker code "
                               f"{self.rng.randint(1000, 9999)}.", "forgettable")  # fmt: skip
        self.log.call(
            "forget",
            {"user": user, "id": target},
            lambda: {"verified": self.mem.forget(self.ctx(user), target).verified},
        )

    def erase(self) -> None:
        user = f"w-erase-{self.tag()}"
        ctx, now = self.ctx(user), self.now()
        items = [{"content": f"Personal note {i} of {user}: allergic to {w}."}
                 for i, w in enumerate(self.rng.sample(_WORDS, 3))]  # fmt: skip
        self.log.call(
            "erasable",
            {"user": user},
            lambda: {"written": _written(self.mem.remember_many(ctx, items, now=now))},
        )
        session = Context(tenant_id=TENANT, user_id=user, session_id="s1")
        self.mem.working(session).set("draft", f"unsent reply of {user}")
        self.log.call(
            "erase",
            {"user": user},
            lambda: {"verified": self.mem.erase_subject(TENANT, user).verified},
        )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="the crash harness's writer")
    parser.add_argument("--url", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--trial", type=int, required=True)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--redis-prefix", default=None)
    parser.add_argument("--cycles", type=int, default=None)
    args = parser.parse_args(argv)
    clock = FrozenClock(BASE + timedelta(hours=args.trial))
    mem = Engram.open(args.url, embedder="hashing", config=config(args.redis_prefix),
                      clock=clock, working=args.redis_url)  # fmt: skip
    with open(args.log, "a", encoding="utf-8") as out:
        log = Log(out)
        log.line("ready", "open")
        Workload(mem, clock, log, args.trial, seed=args.trial).run(args.cycles)
        log.line("done", "close")
    mem.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
