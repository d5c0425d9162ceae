"""The sweep runs while recalls and writes go on, on SQLite and on PostgreSQL.

Writers (separate ``Engram`` instances: separate connections to one file, or
separate pools on one database) remember, correct and recall while one sweep
deletes hundreds of due memories in small batches. Nothing fails; every memory
not due survives, every due one is gone unless a concurrent access renewed it;
the invariants of the version chains and the audit chain hold.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import timedelta

from tests.conftest import T0

from engram import Config, Context, Engram, FrozenClock
from engram.config import SweepConfig
from engram.errors import EngramError
from engram.store.predicate import Tenant

DAY = timedelta(days=1)
NOW = T0 + 8 * DAY


def test_a_sweep_during_concurrent_writes_and_recalls_keeps_every_invariant(
    shared_url: str, open_mem: Callable[..., Engram]
) -> None:
    clock = FrozenClock(NOW)
    config = Config(sweep=SweepConfig(batch_size=25))
    sweeper = open_mem(shared_url, config=config, clock=clock)
    ctx = Context(tenant_id="acme", user_id="u1", agent_id="coder")
    due = sweeper.remember_many(ctx, [
        {"content": f"Short-lived note {i} about the kettle rota.", "retention": "short_term"}
        for i in range(300)], now=T0)  # fmt: skip
    lasting = sweeper.remember_many(ctx, [
        {"content": f"Lasting fact {i}: the build farm has {i} racks.", "key": f"farm.{i}",
         "value": i} for i in range(40)], now=T0)  # fmt: skip
    errors: list[BaseException] = []
    stop = threading.Event()

    def work(n: int) -> None:
        mem = open_mem(shared_url, config=config, clock=clock)
        try:
            i = 0
            while not stop.is_set() and i < 60:
                mem.remember(ctx, f"Writer {n} note {i} written during the sweep.")
                mem.recall(ctx, f"How many racks does the build farm have? {i}")
                target = lasting[(n * 7 + i) % len(lasting)].record
                assert target is not None
                # superseded meanwhile by the other writer: Conflict, as it should be
                with contextlib.suppress(EngramError):
                    mem.correct(ctx, target.id, f"Writer {n}: the farm has {i} racks.", value=i)
                i += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    report = sweeper.sweep(now=NOW)
    stop.set()
    for thread in threads:
        thread.join()

    assert errors == []
    assert report.batches >= 12
    assert report.expired <= 300
    tenant = Tenant("acme")
    left = {r.id for r in sweeper.store.records_of(tenant, [w.record.id for w in due
                                                            if w.record])}  # fmt: skip
    for kept in sweeper.store.records_of(tenant, list(left)):
        assert kept.expires_at is not None
        assert kept.expires_at > NOW
    assert report.expired == 300 - len(left)
    assert sweeper.sweep(now=NOW).expired == 0
    active = sweeper.list(ctx, limit=10_000)
    keys = [r.key for r in active if r.key]
    assert len(keys) == len(set(keys)) == len(lasting)  # one current value per key
    every = sweeper.list(ctx, status=None, limit=10_000)
    ids = {r.id for r in every}
    assert all(r.superseded_by in ids for r in every if r.superseded_by)
    assert sweeper.audit_verify().ok
