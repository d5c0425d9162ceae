"""A flush's touches coalesced into one ``Accesses`` per visibility (``store.accesses``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engram import Context, Engram, Record
from engram.scope import resolve
from engram.store.accesses import Accesses, coalesce
from engram.store.contract import Touch
from engram.store.predicate import Visibility
from engram.store.rows import to_micros
from engram.store.sqlite import statements_write

A = Visibility("acme", "u1", "coder", ("session:s1", None, None, None))
B = Visibility("acme", "u1", "coder", ("session:s2", None, None, None))
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _us(minutes: int) -> int:
    micros = to_micros(_at(minutes))
    assert micros is not None
    return micros


def test_each_id_once_per_visibility_with_its_count_and_latest_access() -> None:
    touches = [Touch(A, ("x", "y"), _at(1)), Touch(B, ("x",), _at(2)),
               Touch(A, ("z", "x"), _at(3)), Touch(A, ("y",), _at(2))]  # fmt: skip
    assert coalesce(touches) == [
        Accesses(A, ("x", "y", "z"), (2, 2, 1), (_us(3), _us(2), _us(3))),
        Accesses(B, ("x",), (1,), (_us(2),)),
    ]


def test_an_id_named_twice_by_one_touch_counts_once() -> None:
    assert coalesce([Touch(A, ("x", "x", "y"), _at(1))]) == [
        Accesses(A, ("x", "y"), (1, 1), (_us(1), _us(1)))
    ]


def test_the_latest_access_wins_whatever_the_order() -> None:
    (accesses,) = coalesce([Touch(A, ("x",), _at(5)), Touch(A, ("x",), _at(4))])
    assert accesses.ats == (_us(5),)


def test_nothing_to_write_is_no_statement() -> None:
    assert coalesce([]) == []
    assert coalesce([Touch(A, (), _at(1))]) == []


def test_older_sqlite_writes_the_same_accesses_one_record_at_a_time(
    tmp_path: Any, open_mem: Callable[..., Engram], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before SQLite 3.35 a flush runs one statement per record (``touch_one``);
    it leaves the records exactly as the single statement does, visibility included."""
    ctx = Context(tenant_id="acme", user_id="u1", agent_id="coder", session_id="s1")
    other = Context(tenant_id="acme", user_id="u2", agent_id="coder")
    held: dict[bool, list[Record]] = {}
    for in_one in (True, False):
        monkeypatch.setattr(statements_write, "ACCESSES_IN_ONE", in_one)
        mem = open_mem(f"sqlite:///{tmp_path / f'{in_one}.db'}")
        written = mem.remember_many(ctx, [{"content": f"Note {i} about the cache.",
                                           "type": "episode"} for i in range(8)])  # fmt: skip
        ids = [w.record.id for w in written if w.record is not None]
        vis, foreign = Visibility.of(resolve(ctx)), Visibility.of(resolve(other))
        mem.store.apply([Touch(vis, tuple(ids[:5]), _at(60 * 24 * 30)),
                         Touch(vis, tuple(ids[3:]), _at(60 * 24 * 40)),
                         Touch(foreign, tuple(ids), _at(60 * 24 * 50))])  # fmt: skip
        held[in_one] = [mem.get(ctx, record_id) for record_id in ids]
    one, each = held[True], held[False]
    assert [(r.access_count, r.last_accessed_at, r.expires_at) for r in one] == [
        (r.access_count, r.last_accessed_at, r.expires_at) for r in each
    ]
    assert [r.access_count for r in one] == [1, 1, 1, 2, 2, 1, 1, 1]
