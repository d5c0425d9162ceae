"""Working memory on both backends: set/get/list/delete/clear, expiry, limits, persistence."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from tests.conftest import T0
from tests.working.conftest import OpenWorking

from engram import Config, Context, Engram, FrozenClock, InvalidArgument
from engram.config import SQLiteConfig, StoreConfig

CTX = Context(tenant_id="acme", user_id="u1", agent_id="coder", session_id="s1", task_id="t1")


def let_pass(backend: str, clock: FrozenClock, seconds: float) -> None:
    """Time passes: the frozen clock for SQLite, the wall clock for Redis (native TTL)."""
    if backend == "sqlite":
        clock.advance(seconds=seconds)
    else:
        time.sleep(seconds)


def test_set_get_list_delete_clear(wmem: Engram) -> None:
    wm = wmem.working(CTX)
    item = wm.set("step", {"done": 3}, ttl=timedelta(hours=1))
    scope = item.scope
    scope = item.scope
    assert (item.key, item.value, scope.kind, scope.scope_id) == ("step", {"done": 3}, "task", "t1")
    got = wm.get("step")
    assert got is not None
    assert got.value == {"done": 3}
    wm.set("goal", "fix the login bug")
    assert {i.key for i in wm.list()} == {"step", "goal"}
    assert wm.delete("step") is True
    assert wm.delete("step") is False
    assert wm.get("step") is None
    assert wm.clear() == 1
    assert wm.list() == []
    assert wm.clear() == 0


def test_set_replaces_the_value_and_renews_the_time_to_live(
    wmem: Engram, backend: str, clock: FrozenClock
) -> None:
    wm = wmem.working(CTX)
    wm.set("step", 1, ttl=0.3)
    let_pass(backend, clock, 0.2)
    wm.set("step", 2, ttl=0.6)
    let_pass(backend, clock, 0.25)
    got = wm.get("step")
    assert got is not None
    assert got.value == 2
    assert [i.value for i in wm.list()] == [2]


def test_items_expire_by_themselves(wmem: Engram, backend: str, clock: FrozenClock) -> None:
    wm = wmem.working(CTX)
    wm.set("brief", "short", ttl=0.2)
    wm.set("long", "stays", ttl=timedelta(minutes=5))
    assert wm.get("brief") is not None
    let_pass(backend, clock, 0.4)
    assert wm.get("brief") is None
    assert [i.key for i in wm.list()] == ["long"]
    assert wm.delete("brief") is False
    assert wm.clear() == 1


def test_the_default_time_to_live_comes_from_the_configuration(
    open_working_mem: OpenWorking,
) -> None:
    mem = open_working_mem(default_ttl_hours=2.0)
    item = mem.working(CTX).set("k", None)
    assert item.expires_at - item.set_at == timedelta(hours=2)


def test_the_list_is_newest_first(wmem: Engram, backend: str, clock: FrozenClock) -> None:
    wm = wmem.working(CTX)
    for key in ("a", "b", "c"):
        wm.set(key, key)
        let_pass(backend, clock, 0.01)
    assert [i.key for i in wm.list()] == ["c", "b", "a"]


def test_kind_chooses_the_task_or_the_session(wmem: Engram) -> None:
    wmem.working(CTX).set("k", "task")
    wmem.working(CTX, kind="session").set("k", "session")
    task = wmem.working(CTX, kind="task").get("k")
    session = wmem.working(CTX, kind="session").get("k")
    assert task is not None
    assert task.value == "task"
    assert session is not None
    assert session.value == "session"
    only_session = Context(tenant_id="acme", user_id="u1", agent_id="coder", session_id="s1")
    default = wmem.working(only_session).get("k")
    assert default is not None
    assert default.value == "session"


def test_a_scope_holds_at_most_max_items(open_working_mem: OpenWorking) -> None:
    wm = open_working_mem(max_items=3).working(CTX)
    for key in ("a", "b", "c"):
        wm.set(key, 1)
    with pytest.raises(InvalidArgument, match="limit"):
        wm.set("d", 1)
    wm.set("a", 2)  # replacing an item is not a new one
    assert wm.get("d") is None
    assert len(wm.list()) == 3
    wm.delete("b")
    wm.set("d", 1)
    assert {i.key for i in wm.list()} == {"a", "c", "d"}


def test_expired_items_free_their_place(
    open_working_mem: OpenWorking, backend: str, clock: FrozenClock
) -> None:
    wm = open_working_mem(max_items=2).working(CTX)
    wm.set("a", 1, ttl=0.2)
    wm.set("b", 1, ttl=0.2)
    let_pass(backend, clock, 0.4)
    wm.set("c", 1)
    wm.set("d", 1)
    assert {i.key for i in wm.list()} == {"c", "d"}


def test_concurrent_writers_never_exceed_max_items(open_working_mem: OpenWorking) -> None:
    """Two instances (two connections) and four threads race for 20 places."""
    first, second = open_working_mem(max_items=20), open_working_mem(max_items=20)
    outcomes: list[bool] = []
    lock = threading.Lock()

    def writer(mem: Engram, start: int) -> None:
        wm = mem.working(CTX)
        for n in range(start, start + 10):
            try:
                wm.set(f"k{n}", n)
                done = True
            except InvalidArgument:
                done = False
            with lock:
                outcomes.append(done)

    threads = [threading.Thread(target=writer, args=(mem, start))
               for mem, start in ((first, 0), (second, 10), (first, 20), (second, 30))]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count(True) == 20
    assert len(first.working(CTX).list()) == 20


def test_items_survive_a_reopen(open_working_mem: OpenWorking) -> None:
    first = open_working_mem()
    first.working(CTX).set("step", {"done": 3})
    first.close()
    again = open_working_mem().working(CTX).get("step")
    assert again is not None
    assert again.value == {"done": 3}


def test_the_sqlite_clock_is_the_injected_one() -> None:
    """SQLite judges expiry by the instance's clock, to the microsecond."""
    clock = FrozenClock(T0)
    mem = Engram.open("sqlite://:memory:", embedder="hashing", clock=clock)
    try:
        wm = mem.working(CTX)
        wm.set("k", 1, ttl=1)
        clock.advance(microseconds=999_999)
        assert wm.get("k") is not None
        clock.advance(microseconds=1)
        assert wm.get("k") is None
        assert wm.list() == []
    finally:
        mem.close()


def test_a_sqlite_working_write_never_waits_for_a_record_transaction(
    open_mem: Callable[..., Engram], tmp_path: Path
) -> None:
    """Working memory has its own file: a record transaction holding the store's write
    lock (a bulk chunk, an index rebuild) does not delay it."""
    config = Config(store=StoreConfig(sqlite=SQLiteConfig(busy_timeout_ms=100)))
    mem = open_mem(f"sqlite:///{tmp_path}/own.db", config=config)
    other = open_mem(f"sqlite:///{tmp_path}/own.db", config=config)
    assert Path(f"{tmp_path}/own.db-working").exists()
    with mem.store.transaction():  # BEGIN IMMEDIATE on the records' file
        start = time.perf_counter()
        other.working(CTX).set("step", 1)
        assert (time.perf_counter() - start) < 0.1
    item = mem.working(CTX).get("step")
    assert item is not None
