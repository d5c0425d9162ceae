"""Concurrent changes to one memory: decisions are made on what the transaction sees.

Each writer is its own ``Engram`` on the same store (a SQLite file: its own
connection, so SQLite's file locks arbitrate as between processes; a PostgreSQL
database: its own pool, so the slot locks and constraints arbitrate). After every trial the
version graph must hold its invariants: at most one active, uncontested version
per key, no forked or cyclic chains, and a successful retraction or deletion is
never undone by a correction that raced it.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from tests.conftest import T0, OpenMem

from backends import RedisPrefixes
from engram import Config, Conflict, Context, Engram, NotFound, Status
from engram.config import SQLiteConfig, StoreConfig
from engram.working import WorkingConfig

KEY = "deploy.region"
ALL = [s.value for s in Status]


def _race(*calls: Callable[[], Any]) -> list[Any]:
    """Run ``calls`` at once (a barrier releases them together); results or exceptions."""
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(i: int, call: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            out[i] = call()
        except Exception as exc:  # the test inspects what each writer got
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return out


def _writers(open_mem: OpenMem, url: str, n: int) -> list[Engram]:
    config = Config(store=StoreConfig(sqlite=SQLiteConfig(busy_timeout_ms=30_000)))
    return [open_mem(url, config=config) for _ in range(n)]


def check_version_graph(mem: Engram, ctx: Context) -> None:
    """No two current values of one key, no forks, no cycles, links that resolve."""
    rows = {r.id: r for r in mem.list(ctx, status=None, limit=10_000)}
    current = [
        r for r in rows.values()
        if r.key == KEY and r.status == Status.ACTIVE and r.contested_with is None
    ]  # fmt: skip
    assert len(current) <= 1, f"{len(current)} active uncontested versions of {KEY}"
    parents = [r.supersedes for r in rows.values() if r.supersedes]
    assert len(parents) == len(set(parents)), "two versions supersede the same one (a fork)"
    for record in rows.values():
        seen = {record.id}
        link = record.supersedes
        while link is not None and link in rows:
            assert link not in seen, f"cycle through {link}"
            seen.add(link)
            link = rows[link].supersedes
        if record.status == Status.SUPERSEDED:
            assert record.superseded_by in rows, f"{record.id} superseded by a missing version"


def _seed(mem: Engram, ctx: Context) -> str:
    written = mem.remember(ctx, "Deploy to eu-west-1.", key=KEY, value="eu-west-1")
    assert written.record is not None
    return written.record.id


def test_two_racing_corrections_leave_one_active_version(
    shared_url: str, open_mem: OpenMem, ctx: Context
) -> None:
    a, b = _writers(open_mem, shared_url, 2)
    for trial in range(25):
        target = _seed(a, ctx)
        got = _race(
            partial(a.correct, ctx, target, f"Deploy to us-east-{trial}a.", value="a"),
            partial(b.correct, ctx, target, f"Deploy to us-west-{trial}b.", value="b"),
        )
        wins = [g for g in got if not isinstance(g, Exception)]
        assert len(wins) == 1, got
        assert all(isinstance(g, Conflict) for g in got if isinstance(g, Exception)), got
        check_version_graph(a, ctx)
        active = a.list(ctx, status="active", limit=1000)
        assert [r.id for r in active if r.key == KEY] == [wins[0].record.id]


def test_a_retraction_is_never_lost_to_a_racing_correction(
    shared_url: str, open_mem: OpenMem, ctx: Context
) -> None:
    a, b = _writers(open_mem, shared_url, 2)
    for trial in range(25):
        target = _seed(a, ctx)
        retracted, corrected = _race(
            partial(a.retract, ctx, target),
            partial(b.correct, ctx, target, f"Deploy to ap-{trial}."),
        )
        active = [r for r in a.list(ctx, status="active", limit=1000) if r.key == KEY]
        if isinstance(retracted, Exception):  # the correction came first: told, not silent
            assert isinstance(retracted, Conflict), retracted
            assert not isinstance(corrected, Exception)
            assert [r.id for r in active] == [corrected.record.id]
        else:  # retracted first: the correction must not resurrect the key
            assert isinstance(corrected, Conflict), corrected
            assert active == []
            assert a.get(ctx, target).status == Status.RETRACTED
        check_version_graph(a, ctx)
        for record in active:
            a.retract(ctx, record.id)


def test_an_expiry_racing_a_correction_is_never_overwritten(
    shared_url: str, open_mem: OpenMem, ctx: Context
) -> None:
    a, b = _writers(open_mem, shared_url, 2)
    for trial in range(20):
        target = _seed(a, ctx)
        expired, corrected = _race(
            partial(a.expire, ctx, target),
            partial(b.correct, ctx, target, f"Deploy to sa-{trial}."),
        )
        assert isinstance(expired, Conflict) != isinstance(corrected, Conflict)
        old = a.get(ctx, target)
        if isinstance(corrected, Conflict):
            assert old.status == Status.EXPIRED
            assert old.superseded_by is None
        else:
            assert old.status == Status.SUPERSEDED
            assert old.superseded_by == corrected.record.id
        check_version_graph(a, ctx)
        for record in a.list(ctx, status="active", limit=1000):
            if record.key == KEY:
                a.retract(ctx, record.id)


def test_a_forget_racing_a_correction_leaves_nothing_of_the_chain(
    shared_url: str, open_mem: OpenMem, ctx: Context
) -> None:
    a, b = _writers(open_mem, shared_url, 2)
    for trial in range(25):
        target = _seed(a, ctx)
        receipt, corrected = _race(
            partial(a.forget, ctx, target),
            partial(b.correct, ctx, target, f"Deploy to me-{trial}."),
        )
        assert not isinstance(receipt, Exception), receipt
        assert receipt.verified
        if isinstance(corrected, Exception):
            assert isinstance(corrected, (NotFound, Conflict)), corrected
        else:
            assert corrected.record.id in receipt.deleted
        assert [r for r in a.list(ctx, status=None, limit=1000) if r.key == KEY] == []


# What three other writers can legitimately defeat in a forget's physical checks: on
# PostgreSQL an open snapshot keeps dead rows past VACUUM, a held lock keeps VACUUM
# FULL from rewriting, so the files still hold the text; on a SQLite file another
# connection's open read keeps the WAL checkpoint from completing (the WAL's bytes
# are still scanned). The receipt says so (verified False); every logical check
# must still pass.
_CONTENDED = {"dead tuples", "rewrite", "relation file bytes", "wal checkpoint"}


def test_many_writers_on_one_key_keep_the_version_graph(
    shared_url: str, open_mem: OpenMem, ctx: Context
) -> None:
    writers = _writers(open_mem, shared_url, 4)
    _seed(writers[0], ctx)
    errors: list[BaseException] = []

    def work(mem: Engram, seed: int) -> None:
        rng = random.Random(seed)
        for step in range(40):
            active = [r for r in mem.list(ctx, status="active", limit=100) if r.key == KEY]
            op = rng.choice(["correct", "correct", "retract", "expire", "remember", "forget"])
            try:
                if op == "remember" or not active:
                    mem.remember(ctx, f"Deploy to r{seed}-{step}.", key=KEY, value=f"{seed}-{step}",
                                 now=T0 + timedelta(seconds=step))  # fmt: skip
                elif op == "correct":
                    mem.correct(ctx, active[0].id, f"Deploy to c{seed}-{step}.")
                elif op == "retract":
                    mem.retract(ctx, active[0].id)
                elif op == "expire":
                    mem.expire(ctx, active[0].id)
                else:
                    receipt = mem.forget(ctx, active[0].id)
                    assert set(receipt.failed) <= _CONTENDED, receipt.failed
            except (Conflict, NotFound):
                pass  # another writer changed it first: reported, nothing written
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=work, args=(m, i)) for i, m in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    check_version_graph(writers[0], ctx)


@pytest.mark.parametrize("op", ["retract", "expire", "correct"])
def test_a_stale_target_is_a_conflict_naming_the_current_version(
    mem: Engram, ctx: Context, op: str
) -> None:
    target = _seed(mem, ctx)
    newer = mem.correct(ctx, target, "Deploy to eu-central-1.")
    assert newer.record is not None
    args = (ctx, target, "Deploy to eu-north-1.") if op == "correct" else (ctx, target)
    with pytest.raises(Conflict, match=newer.record.id):
        getattr(mem, op)(*args)
    assert mem.get(ctx, newer.record.id).status == Status.ACTIVE


def _process_writer(url: str, seed: int, steps: int, working: tuple[str, str] | None) -> int:
    """One writer process: random changes to the key; returns the unexpected errors.
    ``working``: (Redis URL, key prefix) of a server store's working memory."""
    ctx = Context(tenant_id="acme", user_id="u1", agent_id="coder")
    rng = random.Random(seed)
    unexpected = 0
    patient = Config(
        store=StoreConfig(sqlite=SQLiteConfig(busy_timeout_ms=30_000)),
        working=WorkingConfig(redis_prefix=working[1] if working else "engram"),
    )
    spec = working[0] if working else None
    with Engram.open(url, embedder="hashing", config=patient, working=spec) as mem:
        for step in range(steps):
            active = [r for r in mem.list(ctx, status="active", limit=100) if r.key == KEY]
            try:
                if not active or rng.random() < 0.2:
                    mem.remember(ctx, f"Deploy to p{seed}-{step}.", key=KEY, value=f"{seed}{step}")
                elif rng.random() < 0.7:
                    mem.correct(ctx, active[0].id, f"Deploy to q{seed}-{step}.")
                else:
                    mem.retract(ctx, active[0].id)
            except (Conflict, NotFound):
                pass
            except Exception:
                unexpected += 1
    return unexpected


def test_writer_processes_keep_the_version_graph(
    shared_url: str, open_mem: OpenMem, redis_prefixes: RedisPrefixes
) -> None:
    import multiprocessing

    ctx = Context(tenant_id="acme", user_id="u1", agent_id="coder")
    _seed(open_mem(shared_url), ctx)
    options = redis_prefixes.options(shared_url, {})
    working = None
    if "working" in options:  # a server store: the processes share its Redis prefix
        working = (options["working"], options["config"].working.redis_prefix)
    spawn = multiprocessing.get_context("spawn")
    with spawn.Pool(3) as pool:
        jobs = [(shared_url, s, 30, working) for s in range(3)]
        unexpected = pool.starmap(_process_writer, jobs)
    assert unexpected == [0, 0, 0]
    check_version_graph(open_mem(shared_url), ctx)


def test_two_racing_imports_of_one_export_store_it_once(
    shared_url: str, open_mem: OpenMem, ctx: Context
) -> None:
    from tests.conformance.test_write_lock import SlowEmbedder

    slow = SlowEmbedder()
    config = Config(store=StoreConfig(sqlite=SQLiteConfig(busy_timeout_ms=30_000)))
    first = open_mem(shared_url, embedder=slow, config=config)
    second = open_mem(shared_url, config=config)
    source = Context(tenant_id=ctx.tenant_id, user_id="exporter")
    second.remember(source, "Deploy to eu-west-1.", key=KEY, value="eu-west-1")
    rows = [{**row, "status": "superseded"} for row in second.export(source)]
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(first.import_records(ctx, rows)))
    thread.start()
    assert slow.started.wait(10)  # the first import is embedding
    racer = threading.Thread(target=lambda: out.append(second.import_records(ctx, rows)))
    racer.start()
    racer.join(0.5)  # the second reads the store (and waits for the lock, if it is held)
    slow.release.set()
    thread.join(30)
    racer.join(30)
    assert len(out) == 2
    assert len(second.list(ctx, status=None, limit=100)) == 1


def test_batches_locking_slots_in_opposite_orders_both_commit(
    shared_url: str, open_mem: OpenMem, ctx: Context
) -> None:
    """A batch locks its slots in item order; two batches over the same keys in opposite
    orders must neither deadlock nor lose an item (on PostgreSQL, writers of one
    tenant take turns; SQLite has one writer at a time)."""
    a, b = _writers(open_mem, shared_url, 2)
    keys = [f"k{i}" for i in range(6)]
    for trial in range(5):
        forward = [{"content": f"Setting {k} is f{trial}.", "key": k, "value": f"f{trial}"}
                   for k in keys]  # fmt: skip
        backward = [{"content": f"Setting {k} is b{trial}.", "key": k, "value": f"b{trial}"}
                    for k in reversed(keys)]  # fmt: skip
        got = _race(partial(a.remember_many, ctx, forward), partial(b.remember_many, ctx, backward))
        assert not any(isinstance(g, Exception) for g in got), got
        active = [r for r in a.list(ctx, status="active", limit=1000) if r.key in keys]
        assert sorted(r.key for r in active if r.contested_with is None) == keys
