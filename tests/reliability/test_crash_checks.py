"""The crash checks fail on the faults they exist to find.

One cycle of the writer's workload runs in this process on a SQLite file (no kill:
the log and the store agree, so the checks pass). Then each test plants one fault
behind the store's back (raw SQL on a copy of the file) or in the log, and the
check that exists for it must report it: a lost or altered acknowledged write, a
torn bulk write, a record without its vector, a vector that no longer matches
its content, a tampered audit chain, an acknowledged deletion undone, a key whose
active version is not the last one acknowledged.
"""

from __future__ import annotations

import copy
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from crash_checks import Findings, check
from crash_support import read_log
from crash_writer import BASE, USERS, Log, Workload, config

from engram import Engram, FrozenClock

Event = dict[str, Any]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Event]]:
    """A store after two cycles of the workload, closed, and its log."""
    folder = tmp_path_factory.mktemp("crash-clean")
    path, log = folder / "clean.db", folder / "clean.jsonl"
    clock = FrozenClock(BASE)
    mem = Engram.open(f"sqlite:///{path}", embedder="hashing", config=config(), clock=clock)
    with open(log, "a", encoding="utf-8") as out:
        Workload(mem, clock, Log(out), trial=0, seed=7).run(2)
    mem.close()
    return path, read_log(log)


def _check(path: Path, events: list[Event]) -> Findings:
    url = f"sqlite:///{path}"
    return check(lambda: Engram.open(url, embedder="hashing", config=config()), events)


def _copy(clean: tuple[Path, list[Event]], tmp_path: Path) -> tuple[Path, list[Event]]:
    path = tmp_path / "planted.db"
    shutil.copy(clean[0], path)
    return path, copy.deepcopy(clean[1])


def _acked(events: list[Event], op: str) -> list[Event]:
    return [e for e in events if e["ev"] == "ack" and e["op"] == op]


def _sql(path: Path, *statements: str) -> None:
    with sqlite3.connect(path) as conn:
        for statement in statements:
            conn.execute(statement)


def test_the_untouched_store_passes_every_check(clean: tuple[Path, list[Event]],
                                               tmp_path: Path) -> None:  # fmt: skip
    found = _check(*_copy(clean, tmp_path))
    assert found.failures == []
    assert found.acknowledged > 50
    assert found.deletions > 0


def _delete_single(path: Path, events: list[Event]) -> list[Event]:
    target = _acked(events, "single")[0]["written"][0]["id"]
    _sql(path, f"DELETE FROM records WHERE id = '{target}'")
    return events


def _alter_content(path: Path, events: list[Event]) -> list[Event]:
    target = _acked(events, "single")[0]["written"][0]["id"]
    _sql(path, f"UPDATE records SET content = content || ' (altered)' WHERE id = '{target}'")
    return events


def _tear_bulk(path: Path, events: list[Event]) -> list[Event]:
    target = _acked(events, "bulk")[0]["written"][3]["id"]
    _sql(path, f"DELETE FROM records WHERE id = '{target}'")
    return events


def _drop_vector(path: Path, events: list[Event]) -> list[Event]:
    target = _acked(events, "supersede")[0]["written"][0]["id"]
    _sql(path, f"DELETE FROM vectors WHERE record_id = '{target}'")
    return events


def _zero_vector(path: Path, events: list[Event]) -> list[Event]:
    target = _acked(events, "bulk")[0]["written"][0]["id"]
    _sql(path, f"UPDATE vectors SET vector = zeroblob(length(vector)) WHERE record_id = '{target}'")
    return events


def _tamper_audit(path: Path, events: list[Event]) -> list[Event]:
    _sql(
        path,
        "DROP TRIGGER audit_no_update",
        "UPDATE audit SET reason = reason || '!' WHERE seq = (SELECT max(seq) FROM audit)",
    )
    return events


def _undo_forget(path: Path, events: list[Event]) -> list[Event]:
    kept = _acked(events, "single")[0]["written"][0]["id"]  # claim it was forgotten
    return [*events, {"ev": "ack", "op": "forget", "n": 999, "user": USERS["forget"], "id": kept,
                      "verified": True, "seconds": 0.0}]  # fmt: skip


def _stale_key(path: Path, events: list[Event]) -> list[Event]:
    key = _acked(events, "supersede")[-1]["key"]  # a later version acknowledged, not stored
    return [*events, {"ev": "ack", "op": "supersede", "n": 999, "user": USERS["supersede"],
                      "key": key, "sha": "0" * 64, "written": [], "superseded": [],
                      "seconds": 0.0}]  # fmt: skip


def _unmark_episode(path: Path, events: list[Event]) -> list[Event]:
    first = "(SELECT min(episode_id) FROM consolidated)"
    _sql(path, f"DELETE FROM consolidated WHERE episode_id = {first}")
    return events


FAULTS: dict[str, tuple[Callable[[Path, list[Event]], list[Event]], str]] = {
    "an acknowledged write deleted": (_delete_single, "lost"),
    "an acknowledged content altered": (_alter_content, "lost"),
    "one item of a bulk chunk missing": (_tear_bulk, "partial"),
    "a record without its vector": (_drop_vector, "partial"),
    "a vector that is not its content's": (_zero_vector, "index"),
    "an audit entry rewritten": (_tamper_audit, "audit"),
    "an acknowledged forget undone": (_undo_forget, "resurrected"),
    "a key whose active version is not the last": (_stale_key, "partial"),
    "a summarised episode left unmarked": (_unmark_episode, "partial"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_planted_fault_is_reported(clean: tuple[Path, list[Event]], tmp_path: Path,
                                     fault: str) -> None:  # fmt: skip
    path, events = _copy(clean, tmp_path)
    plant, kind = FAULTS[fault]
    found = _check(path, plant(path, events))
    assert getattr(found, kind), f"{fault}: not reported as {kind}: {found.counts()}"
