"""A concurrent workload on one store, and what must hold after it (issue 15, item 2).

``run(plan)`` forks ``plan.processes`` processes; each opens its own ``Engram`` on
the same store (a SQLite file, or one PostgreSQL database with Redis working
memory) and runs ``plan.threads`` threads that draw operations at random for
``plan.seconds``: single and bulk writes, SUPERSEDEs of a few shared keys, recalls,
sweeps, ``forget`` of the thread's own writes and ``erase_subject`` of a user
every process writes to. Each thread logs what was acknowledged (ids, with the
monotonic start and end of the call: ``CLOCK_MONOTONIC`` is one clock for every
process on Linux) and every exception a caller saw. ``concur_checks`` judges the
logs against the store afterwards.

Shared by ``tests/reliability/test_concur_*.py`` (a few seconds per backend) and
``benchmarks/concur.py`` (larger runs, throughput per operation kind).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import random
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from engram import Config, Context, Engram
from engram.config import SQLiteConfig, StoreConfig
from engram.errors import EngramError

__all__ = [
    "KINDS",
    "VICTIM",
    "Ack",
    "Failure",
    "Plan",
    "ThreadLog",
    "open_engram",
    "run",
    "user_context",
]

VICTIM = "victim"  # the user every process writes to and some thread erases now and then
KINDS = ("remember", "remember_many", "supersede", "recall", "sweep", "forget", "erase")
MIX = {"remember": 30, "remember_many": 8, "supersede": 25, "recall": 25, "sweep": 3,
       "forget": 6, "erase": 3}  # fmt: skip
WORDS = (
    "amber basalt cobalt delta ember fjord garnet harbor indigo juniper kestrel lagoon meadow"
    " nimbus onyx pebble quartz raven saffron tundra umber violet willow xenon yarrow zephyr"
).split()


@dataclass(frozen=True, slots=True)
class Plan:
    """One concurrent run: where, how many processes and threads, how long, what mix."""

    url: str
    processes: int = 3
    threads: int = 3
    seconds: float = 2.0
    working: str | None = None  # a redis:// URL for a server store
    redis_prefix: str | None = None
    busy_timeout_ms: int = 5000
    tenant: str = "concur"
    users: int = 2  # shared users u0.. (and VICTIM)
    keys: int = 2  # contended keys per user
    mix: tuple[tuple[str, int], ...] = tuple(MIX.items())
    seed: int = 15


@dataclass(frozen=True, slots=True)
class Ack:
    """A call that returned: what it wrote or removed, and when (monotonic seconds)."""

    kind: str
    user: str
    ids: tuple[str, ...]
    start: float
    end: float
    key: str | None = None
    ephemeral: bool = False  # past its retention when written: a sweep may delete it
    verified: bool = True  # an erasure receipt's verification
    unverified: tuple[str, ...] = ()  # the receipt's failed checks
    operation: str = ""  # what the write path decided (ADD, SUPERSEDE, ...)


@dataclass(frozen=True, slots=True)
class Failure:
    """An exception a caller saw: its class, whether Engram documents it, its text,
    when, and the ids the call was about (a failed ``forget`` may still have deleted)."""

    kind: str
    error: str
    documented: bool
    message: str
    start: float = 0.0
    end: float = 0.0
    ids: tuple[str, ...] = ()


@dataclass
class ThreadLog:
    """Everything one thread did."""

    process: int
    thread: int
    acks: list[Ack] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    times_ms: dict[str, list[float]] = field(default_factory=dict)
    foreign: list[str] = field(default_factory=list)  # recall items of another user


def user_context(plan: Plan, user: str) -> Context:
    """The caller context of one user of the run's tenant."""
    return Context(tenant_id=plan.tenant, user_id=user)


def open_engram(plan: Plan, **options: Any) -> Engram:
    """An Engram on the plan's store (hashing embedder, the plan's SQLite wait)."""
    sqlite = SQLiteConfig(busy_timeout_ms=plan.busy_timeout_ms)
    config = Config(store=StoreConfig(sqlite=sqlite))
    if plan.redis_prefix is not None:
        working = dataclasses.replace(config.working, redis_prefix=plan.redis_prefix)
        config = dataclasses.replace(config, working=working)
    return Engram.open(plan.url, embedder="hashing", config=config, working=plan.working,
                       **options)  # fmt: skip


class _Worker:
    """One thread's operations on one process's Engram."""

    def __init__(self, plan: Plan, mem: Engram, log: ThreadLog) -> None:
        self.plan, self.mem, self.log = plan, mem, log
        self.rng = random.Random(f"{plan.seed}-{log.process}-{log.thread}")
        self.mine: list[tuple[str, str]] = []  # (user, id) of own plain writes, to forget
        self.about: tuple[str, ...] = ()  # the ids the current call removes
        self.n = 0
        self.ops: dict[str, Callable[[], None]] = {
            "remember": self.remember, "remember_many": self.remember_many,
            "supersede": self.supersede, "recall": self.recall, "sweep": self.sweep,
            "forget": self.forget, "erase": self.erase,
        }  # fmt: skip

    def _text(self) -> str:
        """A new sentence no other call writes (no merge, no tombstone collision)."""
        self.n += 1
        words = " ".join(self.rng.sample(WORDS, 4))
        return f"Note {self.log.process}x{self.log.thread}x{self.n} mentions {words}."

    def _user(self, victim: float = 0.2) -> str:
        if self.rng.random() < victim:
            return VICTIM
        return f"u{self.rng.randrange(self.plan.users)}"

    def _ack(self, kind: str, user: str, ids: list[str], start: float, **extra: Any) -> None:
        self.log.acks.append(Ack(kind, user, tuple(ids), start, time.monotonic(), **extra))

    def remember(self) -> None:
        user, ephemeral = self._user(), self.rng.random() < 0.2
        ctx, start = user_context(self.plan, user), time.monotonic()
        if ephemeral:  # written two hours ago, kept one hour: due for the sweep
            past = self.mem.clock.now() - timedelta(hours=2)
            got = self.mem.remember(ctx, self._text(), retention="transient", now=past)
        else:
            got = self.mem.remember(ctx, self._text())
        assert got.record is not None, got
        self._ack("remember", user, [got.record.id], start, ephemeral=ephemeral)
        if user != VICTIM and not ephemeral:
            self.mine.append((user, got.record.id))

    def remember_many(self) -> None:
        user = self._user()
        ctx, start = user_context(self.plan, user), time.monotonic()
        got = self.mem.remember_many(ctx, [{"content": self._text()} for _ in range(5)])
        ids = [g.record.id for g in got if g.record is not None]
        assert len(ids) == 5, got
        self._ack("remember_many", user, ids, start)

    def supersede(self) -> None:
        user = self._user(victim=0.0)
        key = f"k{self.rng.randrange(self.plan.keys)}"
        value = f"{self.log.process}x{self.log.thread}x{self.n}"
        ctx, start = user_context(self.plan, user), time.monotonic()
        got = self.mem.remember(ctx, f"Setting {key} is {value} ({self._text()})", key=key,
                                value=value)  # fmt: skip
        assert got.record is not None, got
        self._ack("supersede", user, [got.record.id], start, key=key, operation=str(got.operation))

    def recall(self) -> None:
        user, start = self._user(), time.monotonic()
        result = self.mem.recall(user_context(self.plan, user), " ".join(self.rng.sample(WORDS, 3)))
        self._ack("recall", user, [item.record.id for item in result.items], start)
        for item in result.items:
            record = item.record
            if record.tenant_id != self.plan.tenant or record.user_id not in (user, None):
                self.log.foreign.append(f"{user} saw {record.id} of {record.user_id}")

    def sweep(self) -> None:
        self.mem.sweep(self.plan.tenant)

    def forget(self) -> None:
        if not self.mine:
            return self.remember()
        user, record_id = self.mine.pop(self.rng.randrange(len(self.mine)))
        start, self.about = time.monotonic(), (record_id,)
        receipt = self.mem.forget(user_context(self.plan, user), record_id)
        self._ack(
            "forget", user, [record_id], start, verified=receipt.verified, unverified=receipt.failed
        )

    def erase(self) -> None:
        start = time.monotonic()
        receipt = self.mem.erase_subject(self.plan.tenant, VICTIM)
        self._ack("erase", VICTIM, [], start, verified=receipt.verified, unverified=receipt.failed)

    def loop(self, deadline: float) -> None:
        kinds, weights = zip(*self.plan.mix, strict=True)
        while time.monotonic() < deadline:
            kind = self.rng.choices(kinds, weights)[0]
            start, self.about = time.monotonic(), ()
            try:
                self.ops[kind]()
            except EngramError as exc:
                self._failed(kind, exc, True, str(exc), start)
            except Exception as exc:  # the harness reports it: no caller may see one
                text = "".join(traceback.format_exception(exc))[-2000:]
                self._failed(kind, exc, False, text, start)
            self.log.times_ms.setdefault(kind, []).append((time.monotonic() - start) * 1000)

    def _failed(self, kind: str, exc: Exception, documented: bool, text: str,
                start: float) -> None:  # fmt: skip
        self.log.failures.append(Failure(kind, type(exc).__name__, documented, text, start,
                                         time.monotonic(), self.about))  # fmt: skip


def _process(plan: Plan, index: int, ready: Any, go: Any, out: Any) -> None:
    """One process: open, wait for every process, run the threads, send the logs."""
    logs = [ThreadLog(index, t) for t in range(plan.threads)]
    try:
        mem = open_engram(plan)
    except Exception as exc:
        logs[0].failures.append(Failure("open", type(exc).__name__,
                                        isinstance(exc, EngramError), str(exc)))  # fmt: skip
        ready.release()
        out.put(logs)
        return
    try:
        ready.release()
        go.wait(120)
        deadline = time.monotonic() + plan.seconds
        workers = [_Worker(plan, mem, log) for log in logs]
        threads = [threading.Thread(target=w.loop, args=(deadline,)) for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        mem.close()
    out.put(logs)


def run(plan: Plan) -> tuple[list[ThreadLog], float]:
    """Run the plan; every thread's log and the seconds the operations ran (all
    processes released together once each has opened the store)."""
    context = multiprocessing.get_context("fork")  # the parent has engram imported
    ready, go, out = context.Semaphore(0), context.Event(), context.Queue()
    procs = [context.Process(target=_process, args=(plan, i, ready, go, out))
             for i in range(plan.processes)]  # fmt: skip
    for proc in procs:
        proc.start()
    logs: list[ThreadLog] = []
    try:
        for _ in procs:
            assert ready.acquire(timeout=120), "a worker process never opened the store"
        start = time.monotonic()
        go.set()
        for _ in procs:
            logs += out.get(timeout=plan.seconds + 300)
        elapsed = time.monotonic() - start
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
                proc.join()
    return logs, elapsed
