"""After an erasure in one process, no other process serving the store returns the
erased content from its caches, keeps it in them, or writes usage naming it.

Process B (``multiprocessing``, spawned: a fresh interpreter) opens the same store
(a SQLite file, or PostgreSQL with Redis working memory), recalls the memory so its
caches hold it (vector and lexical partitions on SQLite, rerank and embedder text
caches on both) and queues that recall's trace. Process A then erases. B recalls
again: nothing erased is returned, its caches no longer hold the erased texts, its
queued trace is never written, and ``get`` is ``NotFound``. A second test shows the
case the generation counter exists for in one process with two instances: after
an erasure resets a user's partition counters and new writes bring them back to
the same values, the other instance's cached partition is not taken for current.
"""

from __future__ import annotations

import dataclasses
import gc
import multiprocessing
from collections.abc import Callable
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from typing import Any

import pytest
from tests.backends import REDIS_URL, RedisPrefixes, table_rows

from engram import Config, Context, Engram, FrozenClock, NotFound
from engram.config import RecallConfig
from engram.scope import resolve
from engram.store.contract import Listing
from engram.store.predicate import Visibility

CONTENT = "Axolotl escrow passphrase is kept in the locked grey cabinet."
OTHER = "The grey cabinet key hangs by the kitchen door."
QUERY = "Where is the axolotl escrow passphrase kept?"
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)  # tests.conftest.T0, without importing it
CTX = Context(tenant_id="acme", user_id="patient-77", agent_id="coder", session_id="s1")


def _cached_strings(function: object) -> list[str]:
    """The string keys an ``lru_cache`` holds (its cache dict is a referent)."""
    caches = [r for r in gc.get_referents(function) if isinstance(r, dict)]
    return [key for cache in caches for key in cache if isinstance(key, str)]


def _texts_cached() -> set[str]:
    from engram.recall import rerank

    return set(_cached_strings(rerank._stems))


def _open(url: str, prefix: str | None) -> Engram:
    recall = RecallConfig(usage_flush_seconds=3600)  # traces stay queued until flushed
    config, clock = Config(recall=recall), FrozenClock(T0)  # the test clock of process A
    if prefix is None:
        return Engram.open(url, embedder="hashing", config=config, clock=clock)
    working = dataclasses.replace(config.working, redis_prefix=prefix)
    return Engram.open(url, embedder="hashing", config=dataclasses.replace(config,
                       working=working), working=REDIS_URL, clock=clock)  # fmt: skip


def serve(url: str, prefix: str | None, memory_id: str, pipe: Connection) -> None:
    """Process B: cache, wait for the erasure, look again; report what it saw."""
    mem = _open(url, prefix)
    seen: dict[str, Any] = {}
    try:
        before = mem.recall(CTX, QUERY)
        seen["before"] = [item.record.content for item in before.items]
        seen["before_trace"] = before.trace.trace_id
        seen["cached_before"] = CONTENT in _texts_cached()
        seen["partitions_before"] = mem.store.holds_cached(CTX.tenant_id)
        pipe.send(("ready", seen))
        assert pipe.recv() == "erased"
        after = mem.recall(CTX, QUERY)
        seen["after"] = [item.record.content for item in after.items]
        seen["after_trace"] = after.trace.trace_id
        seen["prompt_after"] = after.prompt
        seen["cached_after"] = CONTENT in _texts_cached()
        try:
            mem.trace(CTX, before.trace.trace_id)
            seen["old_trace"] = "served"
        except NotFound:
            seen["old_trace"] = "gone"
        try:
            mem.get(CTX, memory_id)
            seen["get"] = "found"
        except NotFound:
            seen["get"] = "gone"
        mem.flush()  # the queued trace of the first recall must not be written now
        pipe.send(("done", seen))
    finally:
        mem.close()


def _prefix(url: str, prefixes: RedisPrefixes) -> str | None:
    if not url.startswith("postgresql"):
        return None
    options = prefixes.options(url, {})
    return str(options["config"].working.redis_prefix)


def test_another_process_never_serves_or_keeps_what_this_one_erased(
    shared_url: str, open_mem: Callable[..., Engram], redis_prefixes: RedisPrefixes
) -> None:
    prefix = _prefix(shared_url, redis_prefixes)
    mem = open_mem(shared_url)
    target = mem.remember(CTX, CONTENT).record
    assert target is not None
    mem.remember(CTX, OTHER)
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    child = context.Process(target=serve, args=(shared_url, prefix, target.id, theirs))
    child.start()
    try:
        assert ours.poll(120), "process B did not start"
        state, seen = ours.recv()
        if state != "ready" or CONTENT not in seen["before"] or not seen["cached_before"]:
            ours.send("erased")  # let B finish before failing
            pytest.fail(f"process B did not cache the memory: {seen}")

        receipt = mem.erase_subject(CTX.tenant_id, CTX.user_id)

        assert receipt.verified, receipt.failed
        ours.send("erased")
        assert ours.poll(120), "process B did not answer"
        state, seen = ours.recv()
    finally:
        child.join(timeout=60)
        if child.is_alive():
            child.kill()
    assert state == "done"
    assert seen["after"] == []
    assert CONTENT not in seen["prompt_after"]
    assert not seen["cached_after"]
    assert (seen["old_trace"], seen["get"]) == ("gone", "gone")
    assert child.exitcode == 0
    # B flushed its queue after the erasure: its recall from before it was dropped; the
    # one it made after (the user is back, and found nothing) is new and stays
    stored = {str(row["trace_id"]): row for row in table_rows(mem.store, "traces")}
    assert seen["before_trace"] not in stored
    assert seen["after_trace"] in stored
    assert not any(target.id in str(row["ids"]) for row in stored.values())


def test_a_cached_partition_is_not_taken_for_current_when_counters_start_again(
    sqlite_file_url: str, open_mem: Callable[..., Engram]
) -> None:
    """Erasing a user deletes their partition counters; as many new writes bring them
    back to the same numbers. Without the generation, the other instance's cached
    partition (erased rows, none of the new) would match them and be kept."""
    writer, reader = open_mem(sqlite_file_url), open_mem(sqlite_file_url)
    old = [writer.remember(CTX, f"{CONTENT} Copy {i}.").record for i in range(3)]
    assert reader.recall(CTX, QUERY).items
    reader_partitions = reader.store._vector_engine._cache._parts  # type: ignore[attr-defined]
    assert reader_partitions

    writer.erase_subject(CTX.tenant_id, CTX.user_id)
    new = [writer.remember(CTX, f"Replacement note {i} about the escrow.").record
           for i in range(3)]  # fmt: skip

    found = reader.recall(CTX, "replacement note about the escrow")
    assert {item.record.id for item in found.items} <= {r.id for r in new if r}
    held = {i for part in reader_partitions.values() for i in part.rows_by_id}
    assert held.isdisjoint({r.id for r in old if r})
    assert {r.id for r in new if r} <= held
    assert len(reader.store.listing(Visibility.of(resolve(CTX)), Listing())) == 3
    with pytest.raises(NotFound):
        reader.get(CTX, old[0].id)  # type: ignore[union-attr]
