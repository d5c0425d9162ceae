"""What the crash harness checks after a writer was killed: from the writer's log (what
it was told) and the reopened store (what is there).

* lost: an acknowledged write (id and SHA-256 of its content) that is missing or
  whose content changed; it may only be gone when a deletion of it began later (a
  ``forget`` naming it, an ``erase`` of its user, a ``sweep`` after it was due);
* resurrected: an acknowledged deletion (``forget``, ``erase``, ``sweep``) whose
  records are still there;
* partial: a bulk write whose chunks did not land whole and in order, an erasable
  user with some but not all of its records, a key with other than one active
  version (or an active version no caller was answered or still waiting for), a
  record without its vector or a vector without its record;
* index: the lexical and vector candidates of every user for a few queries, and
  each record's stored vector against its content embedded again, differ before
  and after ``rebuild_index``; on SQLite also ``PRAGMA integrity_check`` and the
  stored vector total;
* audit: the hash chain does not verify.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from crash_writer import BATCH_ITEMS, TENANT, USERS, digest

from engram import Context, Engram
from engram.errors import EngramError
from engram.scope import resolve
from engram.store.contract import LexicalProbe, Listing, VectorProbe
from engram.store.predicate import Subject, Tenant, Visibility
from engram.store.sqlite import SQLiteStore

__all__ = ["Findings", "check"]

Event = dict[str, Any]
_BULK = re.compile(r"Bulk (\S+) item (\d{3}):")
_QUERIES = ("cache node shard", "service answers on port", "deploy target region",
            "debugged the pipeline worker", "locker code")  # fmt: skip
_RECORD_KINDS = ("single", "bulk", "supersede", "episodes", "erasable", "forgettable", "due")


@dataclass
class Findings:
    """Counts and the first few details of each kind of failure."""

    acknowledged: int = 0
    deletions: int = 0
    lost: list[str] = field(default_factory=list)
    resurrected: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    index: list[str] = field(default_factory=list)
    audit: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {"acknowledged": self.acknowledged, "acknowledged_deletions": self.deletions,
                "lost": len(self.lost), "resurrected": len(self.resurrected),
                "partial": len(self.partial), "index_mismatches": len(self.index),
                "audit_failures": len(self.audit)}  # fmt: skip

    @property
    def failures(self) -> list[str]:
        return self.lost + self.resurrected + self.partial + self.index + self.audit


@dataclass
class Expected:
    """What the log promises: records that must be there (id -> SHA-256 or None for a
    summary), those that may be gone, and deletions that must have happened."""

    present: dict[str, str | None] = field(default_factory=dict)
    exempt: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)
    erased_users: set[str] = field(default_factory=set)
    bulks: dict[str, int] = field(default_factory=dict)  # tag -> size, every bulk begun
    keyed: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))
    _by_user: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    _due: list[str] = field(default_factory=list)
    _sweeping: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, events: Iterable[Event]) -> Expected:
        out = cls()
        for event in events:
            out.add(event)
        return out

    def add(self, event: Event) -> None:
        """Take one log line into account (lines come in the order written)."""
        op, acked = event["op"], event["ev"] == "ack"
        if event["ev"] == "begin":
            self._begun(event)
        elif acked and op in _RECORD_KINDS:
            for row in event["written"]:
                self.present[row["id"]] = row["sha"]
                self._by_user[event["user"]].append(row["id"])
                self._due += [row["id"]] if op == "due" else []
        elif acked and op == "consolidate":
            self.present.update(dict.fromkeys(event["summaries"]))
        elif acked and op == "forget":
            self.gone.add(event["id"])
        elif acked and op == "erase":
            self.erased_users.add(event["user"])
        elif acked and op == "sweep":
            self.gone.update(self._sweeping)
        if op == "supersede" and event["ev"] in ("begin", "ack"):
            self.keyed[event["key"]].append((event["ev"], event["sha"]))

    def _begun(self, event: Event) -> None:
        if event["op"] == "bulk":
            self.bulks[event["tag"]] = event["size"]
        elif event["op"] == "forget":
            self.exempt.add(event["id"])
        elif event["op"] == "erase":
            self.exempt.update(self._by_user[event["user"]])
        elif event["op"] == "sweep":  # every due record acknowledged so far may go
            self._sweeping = list(self._due)
            self.exempt.update(self._due)


def _scalar(store: Any, sql: str) -> Any:
    """One value of a raw query (a check reading what storage holds, past the contract)."""
    if isinstance(store, SQLiteStore):
        return store._conn.execute(sql).fetchone()[0]
    with store.connection("crash check") as conn:
        return conn.execute(sql).fetchone()[0]


def _vis(user: str) -> Visibility:
    return Visibility.of(resolve(Context(tenant_id=TENANT, user_id=user)))


def check(open_engram: Callable[[], Engram], events: list[Event]) -> Findings:
    """Every check on the store ``open_engram`` reopens, against ``events`` (the logs of
    every trial on this store, in order)."""
    expected, found = Expected.of(events), Findings()
    mem = open_engram()
    try:
        _presence(mem, expected, found)
        _partial(mem, expected, found)
        before = _snapshot(mem)
        report = mem.audit_verify()
        if not report.ok:
            found.audit.append(f"audit chain: entry {report.first_bad_seq}: {report.problem}")
        mem.rebuild_index()
    finally:
        mem.close()
    mem = open_engram()  # fresh caches: nothing of the first instance is compared
    try:
        after = _snapshot(mem)
    finally:
        mem.close()
    found.index += [f"{what} differs after rebuild" for what in sorted(before)
                    if not _same(before[what], after.get(what))]  # fmt: skip
    found.index += [f"{what}: {value}" for what, value in before.items()
                    if what.startswith("vectors ") and value]  # fmt: skip
    return found


def _presence(mem: Engram, expected: Expected, found: Findings) -> None:
    tenant = Tenant(TENANT)
    wanted = [i for i in expected.present if i not in expected.exempt]
    held = {r.id: r for r in mem.store.records_of(tenant, wanted)}
    found.acknowledged = len(wanted)
    for record_id in wanted:
        sha = expected.present[record_id]
        if record_id not in held:
            found.lost.append(f"{record_id} acknowledged, missing")
        elif sha is not None and digest(held[record_id].content) != sha:
            found.lost.append(f"{record_id} acknowledged, content changed")
    still = mem.store.records_of(tenant, sorted(expected.gone))
    found.resurrected += [f"{r.id} deleted (acknowledged), still there" for r in still]
    for user in sorted(expected.erased_users):
        left = mem.store.subject_ids(Subject(TENANT, user))
        if left:
            found.resurrected.append(f"user {user} erased (acknowledged), {len(left)} records")
    found.deletions = len(expected.gone) + len(expected.erased_users)


def _records(mem: Engram) -> list[Any]:
    return [r for batch in mem.store.iter_all(500) for r in batch]


def _partial(mem: Engram, expected: Expected, found: Findings) -> None:
    records = _records(mem)
    _bulks(records, expected, found)
    erasable = defaultdict[str, int](int)
    for record in records:
        if record.user_id and record.user_id.startswith("w-erase-"):
            erasable[record.user_id] += 1
    found.partial += [f"user {u}: {n} of 3 records" for u, n in erasable.items() if n != 3]
    _keys(records, expected, found)
    _consolidation(mem, records, found)
    store: Any = mem.store
    if isinstance(store, SQLiteStore):
        integrity = _scalar(store, "PRAGMA integrity_check")
        found.index += [] if integrity == "ok" else [f"integrity_check: {integrity}"]
        orphans = _scalar(store, "SELECT count(*) FROM vectors v WHERE NOT EXISTS"
                                 " (SELECT 1 FROM records r WHERE r.id = v.record_id)")  # fmt: skip
        total = _scalar(store, "SELECT rows FROM index_totals WHERE name = 'vectors'")
        stored = _scalar(store, "SELECT count(*) FROM vectors")
        found.index += [] if total == stored else [f"vector total {total}, {stored} stored"]
        bare = _scalar(store, "SELECT count(*) FROM records r WHERE NOT EXISTS"
                              " (SELECT 1 FROM vectors v WHERE v.record_id = r.id)")  # fmt: skip
    else:
        orphans = 0  # PostgreSQL keeps the vector in the record's row
        bare = _scalar(store, "SELECT count(*) FROM records WHERE embedding IS NULL")
    found.partial += [f"{bare} records without a vector"] if bare else []
    found.partial += [f"{orphans} vectors without a record"] if orphans else []


def _bulks(records: list[Any], expected: Expected, found: Findings) -> None:
    """Each bulk write's chunks landed whole, and only a prefix of them."""
    items = defaultdict[str, set[int]](set)
    for record in records:
        match = _BULK.match(record.content)
        if match:
            items[match.group(1)].add(int(match.group(2)))
    for tag in sorted(set(items) - set(expected.bulks)):
        found.partial.append(f"bulk {tag}: items of a write never begun")
    for tag, size in expected.bulks.items():
        chunks = [set(range(k, min(k + BATCH_ITEMS, size))) for k in range(0, size, BATCH_ITEMS)]
        whole = [chunk <= items[tag] for chunk in chunks]
        torn = [c for c in chunks if c & items[tag] and not c <= items[tag]]
        landed = sum(whole)
        if torn or whole != [True] * landed + [False] * (len(chunks) - landed):
            found.partial.append(f"bulk {tag}: items {sorted(items[tag])} of {size}")


def _rows(store: Any, sql: str) -> list[Any]:
    """Every row of a raw query (a check reading what storage holds, past the contract)."""
    if isinstance(store, SQLiteStore):
        return list(store._conn.execute(sql).fetchall())
    with store.connection("crash check") as conn:
        return list(conn.execute(sql).fetchall())


def _consolidation(mem: Engram, records: list[Any], found: Findings) -> None:
    """A consolidated group landed whole: the episodes marked consolidated are exactly
    those a stored summary was derived from."""
    user = USERS["consolidate"]
    episodes = {r.id for r in records if r.user_id == user and r.type == "episode"}
    summaries = [r for r in records if r.user_id == user and r.type == "summary"]
    summarised = {e for r in summaries for e in r.source.derived_from} & episodes
    sql = f"SELECT episode_id FROM consolidated WHERE tenant_id = '{TENANT}' AND user_id = '{user}'"
    marked = {str(row[0]) for row in _rows(mem.store, sql)}
    if marked != summarised:
        extra, missing = len(marked - summarised), len(summarised - marked)
        found.partial.append(f"consolidation: {extra} episodes marked without a summary, "
                             f"{missing} summarised and not marked")  # fmt: skip


def _keys(records: list[Any], expected: Expected, found: Findings) -> None:
    """One active version per key, the last acknowledged or one still unanswered."""
    active = defaultdict[str, list[Any]](list)
    for record in records:
        if record.user_id == USERS["supersede"] and record.key:
            active[record.key] += [record] if record.status.value == "active" else []
    for key, log in expected.keyed.items():
        acks = [sha for ev, sha in log if ev == "ack"]
        last = max((i for i, (ev, _) in enumerate(log) if ev == "ack"), default=-1)
        allowed = set(acks[-1:]) | {sha for ev, sha in log[last + 1 :] if ev == "begin"}
        heads = active.get(key, [])
        if len(heads) != 1 and (acks or heads):
            found.partial.append(f"key {key}: {len(heads)} active versions")
        elif heads and digest(heads[0].content) not in allowed:
            found.partial.append(f"key {key}: the active version is no caller's last")


def _snapshot(mem: Engram) -> dict[str, Any]:
    """Candidates of each harness user per query and channel, and how many stored
    vectors differ from (or miss) their content embedded again."""
    out: dict[str, Any] = {}
    model = mem.embedder.model_id
    queries = mem.embedder.embed(list(_QUERIES))
    for user in sorted(set(USERS.values())):
        vis = _vis(user)
        for text, vector in zip(_QUERIES, queries, strict=True):
            probes = [LexicalProbe(text, ("active",), 10),
                      VectorProbe(vector, model, ("active",), 10)]  # fmt: skip
            for channel, hits in zip(("lexical", "vector"), mem.store.candidates(vis, probes),
                                     strict=True):  # fmt: skip
                if isinstance(hits, EngramError):
                    raise hits
                out[f"{channel} {user} {text!r}"] = [(r.id, round(s, 4)) for r, s in hits]
        rows = mem.store.listing(vis, Listing())
        stored = mem.store.vectors(vis, [r.id for r in rows], model)
        fresh = mem.embedder.embed([r.content for r in rows]) if rows else []
        bad = sum(1 for r, v in zip(rows, fresh, strict=True)
                  if r.id not in stored or not np.allclose(stored[r.id], v, atol=1e-5))  # fmt: skip
        out[f"vectors {user}"] = bad
    return out


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, list) and isinstance(right, list):
        return [i for i, _ in left] == [i for i, _ in right] and all(
            abs(a - b) < 1e-3 for (_, a), (_, b) in zip(left, right, strict=True)
        )
    return bool(left == right)
