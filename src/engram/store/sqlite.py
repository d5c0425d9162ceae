"""The embedded SQLite store: one file (or ``:memory:``), WAL, one writer.

This is the only module that talks to SQLite. Every read splices a condition
from ``predicate`` (through the builders in ``queries``); a tracer hook sees
every statement with its parameters, which lets tests pin what each call emits.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any
from urllib.parse import quote

import numpy as np
from numpy.typing import NDArray

from engram.config import StoreConfig
from engram.errors import IndexMismatch, MigrationError, StoreError
from engram.store import erasure, lexicon, queries, traces
from engram.store.audit import GENESIS, AuditEntry, AuditReport, entry_hash, verify_chain
from engram.store.lexicon import Bm25, LexicalPartition, LexicalRow, query_terms
from engram.store.partitions import PartitionCache, partitions_for
from engram.store.predicate import NO_AGENT, NO_USER, OwnerSlot, Subject, Tenant, Visibility
from engram.store.pseudonyms import is_pseudonym, pseudonym, pseudonymised
from engram.store.ranking import Ranking, alive_top
from engram.store.rows import COLUMNS, record_from_values, record_to_row, to_micros
from engram.store.schema import MIGRATIONS
from engram.store.traces import TraceRow
from engram.store.vectors import Partition, Scan, ScanPolicy, VectorRow, ranked_positions, top_k
from engram.types import Record

__all__ = ["SQLiteStore", "Tracer"]

Tracer = Callable[[str, Mapping[str, Any]], None]
_INSERT = (
    f"INSERT INTO records ({', '.join(COLUMNS)}) "
    f"VALUES ({', '.join(':' + column for column in COLUMNS)})"
)
_MUTABLE = (
    "status", "valid_to", "superseded_by", "contested_with", "updated_at", "confidence",
    "observed_at", "expires_at", "access_count", "last_accessed_at", "embedding_model",
)  # fmt: skip
_PLACEMENT = (
    "version", "supersedes", "created_at", "expires_at", "source_kind", "source_ref",
    "derived_from",
)  # fmt: skip
_PLACE = (
    "UPDATE records SET "
    + ", ".join(f"{column} = :{column}" for column in _PLACEMENT)
    + " WHERE id = :id"
)
_UPDATE = (
    "UPDATE records SET "
    + ", ".join(f"{column} = :{column}" for column in _MUTABLE)
    + " WHERE id = :id"
)
_VECTOR_MODEL_KEY = "vector_model"


class _Reader:
    """Holds one thread's read connection; collecting it closes the connection."""

    __slots__ = ("__weakref__", "conn")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn


def _is_plain_file(path: str) -> bool:
    """True for a database file a second connection can open by path (not
    ``:memory:``, not a private temporary database, not a URI)."""
    return path not in ("", ":memory:") and not path.startswith("file:")


class SQLiteStore:
    """System of record on SQLite with derived in-memory lexical and vector indexes."""

    def __init__(self, path: str, config: StoreConfig | None = None) -> None:
        self.config = config or StoreConfig()
        self.path = path
        self.tracer: Tracer | None = None
        self._lock = threading.RLock()
        self._depth = 0
        self._owner: int | None = None  # the thread with an open transaction
        self._after_commit: list[Callable[[], None]] = []  # run at COMMIT, under the lock
        self._local = threading.local()
        self._readers: weakref.WeakSet[_Reader] = weakref.WeakSet()
        self._readers_lock = threading.Lock()  # not the store lock: a writer holds that
        self._pooled = self.config.read_connections and _is_plain_file(path)
        self._reader_uri = f"file:{quote(os.path.abspath(path))}?mode=rw" if self._pooled else ""
        self._cache: PartitionCache[Partition] = PartitionCache(self.config.vector_cache_rows)
        self._bm25_params = Bm25()
        self._lexicon: PartitionCache[LexicalPartition] = PartitionCache(
            self.config.lexical_cache_rows
        )
        self._scan_policy = ScanPolicy(
            self.config.scan_threads(),
            self.config.vector_parallel_rows,
            self.config.vector_estimate_rows,
        )
        try:
            self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database at {path!r}: {exc}") from exc
        self._conn.row_factory = sqlite3.Row
        self._configure()
        self._migrate()

    # -- plumbing ---------------------------------------------------------------

    def _configure(self) -> None:
        self._conn.execute(f"PRAGMA busy_timeout = {int(self.config.busy_timeout_ms)}")
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        # Deleted rows are overwritten with zeros, not just unlinked: an erasure must
        # leave no byte of what it erased in the file (see ``store.erasure``).
        self._conn.execute("PRAGMA secure_delete = ON")

    def _migrate(self) -> None:
        """Apply pending migrations. An up-to-date database is only read, so opening a
        store never waits for (or blocks) another process's write lock."""
        if not self._pending_migrations():
            return
        with self.transaction():
            self._run("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, at TEXT)")
            done = {row[0] for row in self._run("SELECT name FROM migrations")}
            for name, script in MIGRATIONS:
                if name not in done:
                    self._apply(name, script)

    def _pending_migrations(self) -> bool:
        """True when a migration has not been applied (or the database is new)."""
        try:
            done = {row[0] for row in self._conn.execute("SELECT name FROM migrations")}
        except sqlite3.OperationalError:  # no migrations table yet (or locked: let BEGIN wait)
            return True
        return any(name not in done for name, _ in MIGRATIONS)

    def _apply(self, name: str, script: str) -> None:
        try:
            for statement in _split(script):
                self._run(statement)
            self._run("INSERT INTO migrations VALUES (:name, datetime('now'))", {"name": name})
        except sqlite3.Error as exc:
            raise MigrationError(f"migration {name} failed: {exc}") from exc

    def _run(self, sql: str, params: Mapping[str, Any] | None = None) -> sqlite3.Cursor:
        with self._lock:
            return self._execute(self._conn, sql, params)

    def _run_many(self, sql: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """One statement for many parameter sets (the tracer sees each)."""
        if not rows:
            return
        with self._lock:
            if self.tracer is not None:
                for params in rows:
                    self.tracer(sql, params)
            try:
                self._conn.executemany(sql, rows)
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite error: {exc}") from exc

    def _execute(
        self, conn: sqlite3.Connection, sql: str, params: Mapping[str, Any] | None,
        plain: bool = False,
    ) -> sqlite3.Cursor:  # fmt: skip
        """Run one statement (the tracer sees it); ``plain`` rows are tuples, cheaper
        than ``sqlite3.Row`` for callers that read by position."""
        bound = params or {}
        if self.tracer is not None:
            self.tracer(sql, bound)
        try:
            cursor = conn.cursor()
            if plain:
                cursor.row_factory = None
            return cursor.execute(sql, bound)
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite error: {exc}") from exc

    def _rows(self, query: queries.Query, plain: bool = False) -> list[Any]:
        reader = self._reader()
        try:
            if reader is None:
                with self._lock:
                    return self._execute(self._conn, *query, plain).fetchall()
            return self._execute(reader, *query, plain).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite error: {exc}") from exc

    def _reader(self) -> sqlite3.Connection | None:
        """This thread's read-only connection, or None to read on the main one.

        A file store in WAL mode serves reads outside a transaction from one
        connection per thread, so a read never waits for another thread's read or
        write (it sees the last commit). The thread that holds a transaction reads on
        the main connection, so it sees its own uncommitted writes. ``:memory:``
        has a single connection: another would open another database.
        """
        if not self._pooled or self._owner == threading.get_ident():
            return None
        holder: _Reader | None = getattr(self._local, "reader", None)
        if holder is None:
            holder = self._open_reader()
            self._local.reader = holder
        return holder.conn

    def _open_reader(self) -> _Reader:
        """A read-only connection to the same file (by absolute path, never creating
        one), closed when its thread ends and its holder is collected."""
        try:
            conn = sqlite3.connect(
                self._reader_uri, uri=True, isolation_level=None, check_same_thread=False
            )
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(self.config.busy_timeout_ms)}")
            conn.execute("PRAGMA query_only = ON")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open a read connection to {self.path!r}: {exc}") from exc
        holder = _Reader(conn)
        weakref.finalize(holder, conn.close)
        with self._readers_lock:
            self._readers.add(holder)
        return holder

    def _records(self, query: queries.Query) -> list[Record]:
        return [record_from_values(row) for row in self._rows(query, plain=True)]

    def _in_own_transaction(self) -> bool:
        """Whether this thread holds the open transaction (it sees uncommitted rows,
        which must not reach the shared in-memory partitions)."""
        return self._owner == threading.get_ident()

    @property
    def in_transaction(self) -> bool:
        """True while a transaction is open (then its thread holds the store's lock,
        and work handed to another thread must not touch the store)."""
        return self._depth > 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic unit: BEGIN IMMEDIATE at the outside, a SAVEPOINT when nested."""
        with self._lock:
            depth = self._depth
            self._run("BEGIN IMMEDIATE" if depth == 0 else f"SAVEPOINT sp{depth}")
            self._depth += 1
            self._owner = threading.get_ident()
            try:
                try:
                    yield
                except BaseException:
                    self._depth -= 1
                    self._rollback(depth)
                    raise
                self._depth -= 1
                try:
                    self._run("COMMIT" if depth == 0 else f"RELEASE SAVEPOINT sp{depth}")
                except BaseException:  # a failed COMMIT must not leave the transaction open
                    self._rollback(depth)
                    raise
                if depth == 0:
                    for hook in self._after_commit:
                        hook()
            finally:
                if depth == 0:
                    self._owner = None
                    self._after_commit.clear()

    def _rollback(self, depth: int) -> None:
        if depth == 0:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        else:
            self._conn.execute(f"ROLLBACK TO SAVEPOINT sp{depth}")
            self._conn.execute(f"RELEASE SAVEPOINT sp{depth}")

    def close(self) -> None:
        """Close the connections; the store is unusable afterwards."""
        with self._lock, self._readers_lock:
            self._cache.clear()
            self._lexicon.clear()
            self._pooled = False
            for holder in list(self._readers):
                holder.conn.close()
            self._readers.clear()
            self._conn.close()

    # -- reads (all scoped by a predicate) ---------------------------------------

    def get(self, vis: Visibility, record_id: str) -> Record | None:
        """One visible record, or None."""
        found = self._records(queries.get(vis, record_id))
        return found[0] if found else None

    def fetch(self, vis: Visibility, ids: Sequence[str]) -> list[Record]:
        """Visible records among ``ids``, in the order of ``ids``."""
        if not ids:
            return []
        by_id = {r.id: r for r in self._records(queries.by_ids(vis, ids))}
        return [by_id[i] for i in ids if i in by_id]

    def listing(
        self,
        vis: Visibility,
        type_name: str | None,
        statuses: Sequence[str],
        limit: int,
        offset: int = 0,
        now_us: int | None = None,
    ) -> list[Record]:
        """Visible records newest first; with ``now_us``, filtered by the status they
        have then (an active record past its retention is expired)."""
        return self._records(queries.listing(vis, type_name, statuses, limit, offset, now_us))

    def history(self, vis: Visibility, record_id: str) -> list[Record]:
        """The visible version chain through ``record_id``, oldest first."""
        return self._records(queries.history(vis, record_id))

    def by_key(
        self, vis: Visibility, keys: Sequence[str], statuses: Sequence[str], limit: int
    ) -> list[Record]:
        """Candidate query: exact key lookup."""
        return self._records(queries.by_key(vis, keys, statuses, limit)) if keys else []

    def lexical(
        self, vis: Visibility, text: str, statuses: Sequence[str], limit: int
    ) -> list[tuple[str, float]]:
        """Candidate query: BM25 over content; scores are positive, higher is better.

        Ranks the in-memory postings of the caller's partitions (``lexicon``), with
        statistics over the rows the caller may read; status is checked afterwards
        (``alive_top``)."""
        ranking = self._lexical_memory(vis, text)
        return alive_top(limit, ranking, partial(self._alive_ids, vis, statuses))

    def lexical_scan(
        self, vis: Visibility, text: str, statuses: Sequence[str], limit: int
    ) -> Ranking:
        """The lexical ranking (``lexical``), status unchecked; ``lexical_hits``
        checks it."""
        return self._lexical_memory(vis, text)

    def lexical_hits(
        self, vis: Visibility, text: str, statuses: Sequence[str], limit: int,
        scan: object | None = None, known: Mapping[str, Record] | None = None,
    ) -> list[tuple[Record, float]]:  # fmt: skip
        """``lexical`` as records: the status check reads them (``alive_top``)."""
        if not isinstance(scan, Ranking):
            scan = self.lexical_scan(vis, text, statuses, limit)
        return self._hits(vis, statuses, limit, scan, known)

    def recent(
        self,
        vis: Visibility,
        statuses: Sequence[str],
        limit: int,
        types: Sequence[str] | None = None,
    ) -> list[Record]:
        """Candidate query: most recently observed records in the caller's scopes."""
        if types is None:
            return self._records(queries.recent(vis, statuses, limit))
        return self._records(queries.recent_of_types(vis, statuses, types, limit))

    def neighbors(
        self, vis: Visibility, anchors: Sequence[Record], types: Sequence[str],
        statuses: Sequence[str], gap_us: int, per_side: int,
    ) -> list[Record]:  # fmt: skip
        """Candidate query: records observed just before and after each anchor in its
        scope (one statement for all anchors), oldest first."""
        if not anchors or per_side <= 0:
            return []
        points = [(a.scope, to_micros(a.observed_at) or 0) for a in anchors]
        return self._records(queries.neighbors(vis, points, types, statuses, gap_us, per_side))

    def export(self, vis: Visibility) -> list[Record]:
        """Every visible record, every status, oldest first."""
        return self._records(queries.export(vis))

    def vector(
        self,
        vis: Visibility,
        query: NDArray[np.float32],
        model: str,
        statuses: Sequence[str],
        limit: int,
        scan: object | None = None,
    ) -> list[tuple[str, float]]:
        """Candidate query: exact cosine top-k among visible rows with ``statuses``.

        Ranks ``scan`` (from ``vector_scan`` with the same arguments) when given;
        the status check is scoped by ``vis`` either way. Raises ``IndexMismatch``
        when stored vectors come from another model.
        """
        if not isinstance(scan, Ranking):
            scan = self.vector_scan(vis, query, model)
        return alive_top(limit, scan, partial(self._alive_ids, vis, statuses))

    def vector_hits(
        self, vis: Visibility, query: NDArray[np.float32], model: str,
        statuses: Sequence[str], limit: int, scan: object | None = None,
        known: Mapping[str, Record] | None = None,
    ) -> list[tuple[Record, float]]:  # fmt: skip
        """``vector`` as records: the status check reads them (``alive_top``)."""
        if not isinstance(scan, Ranking):
            scan = self.vector_scan(vis, query, model)
        return self._hits(vis, statuses, limit, scan, known)

    def vector_scan(self, vis: Visibility, query: NDArray[np.float32], model: str) -> Ranking:
        """Scores of every row ``vis`` may read (mostly SIMD work that releases the
        GIL), as a ranking that ``vector`` orders and checks for status."""
        self.check_vector_model(model)
        scan = self._scan(vis, np.ascontiguousarray(query, dtype=np.float32), model)
        return Ranking(partial(top_k, scan), scan.scores.size)

    def _hits(
        self, vis: Visibility, statuses: Sequence[str], limit: int, ranking: Ranking,
        known: Mapping[str, Record] | None,
    ) -> list[tuple[Record, float]]:  # fmt: skip
        """The best ``limit`` records of ``ranking`` in ``statuses`` (``alive_top``)."""
        return alive_top(
            limit, ranking, partial(self._alive_records, vis, statuses, known),
            partial(self._alive_ids, vis, statuses),
        )  # fmt: skip

    def _lexical_memory(self, vis: Visibility, text: str) -> Ranking:
        """BM25 over the caller's in-memory lexical partitions, status unchecked."""
        words = query_terms(text)
        if not words:
            return Ranking.of([])
        counters = self._partition_counters(vis, "lexical_state")
        parts = [part for subject in partitions_for(vis)
                 for part in self._lexical_partition(subject, counters)]  # fmt: skip
        found = lexicon.search(parts, vis, words, self._bm25_params)
        if not found:
            return Ranking.of([])
        scores = np.concatenate([part_scores for _, _, part_scores in found])
        ids = [part.owners.ids for part, _, _ in found]
        rows = np.concatenate([part_rows for _, part_rows, _ in found])
        which = np.concatenate([np.full(r.size, i) for i, (_, r, _) in enumerate(found)])

        def ranked(k: int) -> list[tuple[str, float]]:
            best, best_scores = ranked_positions(scores, k)
            found_ids = [ids[which[p]][rows[p]] for p in best.tolist()]
            return list(zip(found_ids, best_scores.tolist(), strict=True))

        return Ranking(ranked, scores.size)

    def _lexical_partition(
        self, subject: Subject, counters: dict[str, tuple[int, int]]
    ) -> list[LexicalPartition]:
        def load(after: int) -> list[LexicalRow]:
            cond, params = subject.sql("r")
            sql = (
                "SELECT r.rowid, r.id, r.user_id, r.scope, r.agent_id, r.content FROM records r"
                f" WHERE {cond} AND r.rowid > :after ORDER BY r.rowid"
            )
            rows = self._rows((sql, {**params, "after": after}))
            return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

        state = counters.get(subject.user_id, (0, 0))
        key = (subject.tenant_id, subject.user_id, "lexical")
        return self._lexicon.read(
            key, state, LexicalPartition, load, private=self._in_own_transaction()
        )

    def _alive_ids(
        self, vis: Visibility, statuses: Sequence[str], ids: Sequence[str]
    ) -> dict[str, str]:
        """The visible ids among ``ids`` whose status is in ``statuses``."""
        return {row[0]: row[0] for row in self._rows(queries.status_of(vis, ids, statuses))}

    def _alive_records(
        self, vis: Visibility, statuses: Sequence[str], known: Mapping[str, Record] | None,
        ids: Sequence[str],
    ) -> dict[str, Record]:  # fmt: skip
        """The visible records among ``ids`` whose status is in ``statuses``. Records
        in ``known`` (already read by this request) are not read again; their
        visibility (``Visibility.admits``) and status are checked here."""
        found: dict[str, Record] = {}
        missing = []
        for record_id in ids:
            record = known.get(record_id) if known else None
            if record is None:
                missing.append(record_id)
            elif record.status in statuses and vis.admits(
                record.tenant_id, record.user_id or NO_USER, record.scope,
                record.agent_id or NO_AGENT,
            ):  # fmt: skip
                found[record_id] = record
        if missing:
            query = queries.by_ids(vis, missing, statuses)
            found.update((record.id, record) for record in self._records(query))
        return found

    def _scan(self, vis: Visibility, query: NDArray[np.float32], model: str) -> Scan:
        counters = self._partition_counters(vis)
        parts: list[tuple[Partition, NDArray[np.intp]]] = []
        scores: list[NDArray[np.float32]] = []
        estimated = False
        for subject in partitions_for(vis):
            for part in self._partition(subject, model, query.shape[0], counters):
                rows, part_scores, part_estimated = part.search(vis, query, self._scan_policy)
                parts.append((part, rows))
                scores.append(part_scores.astype(np.float32, copy=False))
                estimated = estimated or part_estimated
        return Scan(parts, np.concatenate(scores), query, estimated)

    def _partition_counters(
        self, vis: Visibility, table: str = "partition_state"
    ) -> dict[str, tuple[int, int]]:
        """Insert and delete counters of the caller's two partitions, from ``table``
        (``partition_state`` for vectors, ``lexical_state`` for postings)."""
        cond, params = vis.partition.partition_sql("p")
        rows = self._rows(
            (f"SELECT p.user_id, p.inserts, p.deletes FROM {table} p WHERE {cond}", params)
        )
        return {row[0]: (row[1], row[2]) for row in rows}

    def _partition(
        self, subject: Subject, model: str, dim: int, counters: dict[str, tuple[int, int]]
    ) -> list[Partition]:
        def load(subj: Subject, after: int) -> list[VectorRow]:
            cond, params = subj.sql("v")
            sql = (
                "SELECT v.seq, v.record_id, r.user_id, r.scope, r.agent_id, v.vector"
                " FROM vectors v JOIN records r ON r.id = v.record_id"
                f" WHERE {cond} AND v.model = :model AND v.seq > :after ORDER BY v.seq"
            )
            rows = self._rows((sql, {**params, "model": model, "after": after}))
            return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

        state = counters.get(subject.user_id, (0, 0))
        return self._cache.read(
            (subject.tenant_id, subject.user_id, model), state,
            lambda: Partition(dimension=dim), lambda after: load(subject, after),
            private=self._in_own_transaction(), fits=lambda part: part.dimension == dim,
        )  # fmt: skip

    def keyed(
        self, vis: Visibility, types: Sequence[str], statuses: Sequence[str], limit: int
    ) -> list[Record]:
        """Candidate query: keyed records of ``types``, most recently observed first."""
        return self._records(queries.keyed(vis, types, statuses, limit)) if types else []

    def vectors_of(
        self, vis: Visibility, ids: Sequence[str], model: str
    ) -> dict[str, NDArray[np.float32]]:
        """Stored vectors of visible records among ``ids`` (for dedup, MMR, semantic):
        from the in-memory partitions when they are current, else from SQLite."""
        if not ids:
            return {}
        cached = self._cached_vectors(vis, ids, model)
        if cached is not None:
            return cached
        cond, params = vis.sql()
        part, part_params = vis.partition.partition_sql("v")
        sql = (
            "SELECT r.id, v.vector FROM json_each(:ids) j CROSS JOIN records r ON r.id = j.value"
            f" CROSS JOIN vectors v ON v.record_id = r.id WHERE {cond} AND {part}"
            " AND v.model = :model"
        )
        params = {**params, **part_params}
        rows = self._rows((sql, {**params, "ids": json.dumps(list(ids)), "model": model}))
        return {row[0]: np.frombuffer(row[1], dtype=np.float32) for row in rows}

    def _cached_vectors(
        self, vis: Visibility, ids: Sequence[str], model: str
    ) -> dict[str, NDArray[np.float32]] | None:
        """``vectors_of`` from current cached partitions; None if one is missing or stale."""
        counters = self._partition_counters(vis)
        found: dict[str, NDArray[np.float32]] = {}
        for subject in partitions_for(vis):
            state = counters.get(subject.user_id, (0, 0))
            part = self._cache.current((subject.tenant_id, subject.user_id, model), state)
            if part is None:
                if state != (0, 0):
                    return None
                continue  # an empty partition holds nothing
            found.update(part.vectors_of(vis, ids))
        return found

    # -- write side (call inside ``transaction``) --------------------------------

    def slot_by_key(self, slot: OwnerSlot, key: str, statuses: Sequence[str]) -> list[Record]:
        """Versions of ``key`` in a write slot, newest version first."""
        return self._records(queries.slot_by_key(slot, key, statuses))

    def slot_by_hash(
        self, slot: OwnerSlot, content_hash: str, statuses: Sequence[str]
    ) -> list[Record]:
        """Records of a write slot with the same content hash."""
        return self._records(queries.slot_by_hash(slot, content_hash, statuses))

    def insert(self, record: Record, vector: NDArray[np.float32] | None) -> None:
        """Insert a new record and, when given, its vector under the store's model."""
        self._run(_INSERT, record_to_row(record))
        if vector is not None and record.embedding_model is not None:
            self._put_vector(record, vector)

    def _put_vector(self, record: Record, vector: NDArray[np.float32]) -> None:
        assert record.embedding_model is not None
        self.claim_vector_model(record.embedding_model)
        row = record_to_row(record)
        self._run(
            "INSERT OR REPLACE INTO vectors (record_id, tenant_id, user_id, model, vector)"
            " VALUES (:id, :tenant, :user, :model, :vector)",
            {
                "id": record.id,
                "tenant": row["tenant_id"],
                "user": row["user_id"],
                "model": record.embedding_model,
                "vector": np.ascontiguousarray(vector, dtype=np.float32).tobytes(),
            },
        )

    def update(self, record: Record) -> None:
        """Write the mutable fields of an existing record (status, links, usage...)."""
        row = record_to_row(record)
        self._run(_UPDATE, {column: row[column] for column in (*_MUTABLE, "id")})

    def place(self, record: Record) -> None:
        """Write where an existing record sits in its history (version, supersedes,
        created_at, expires_at, source): only an import places a version it ADDed."""
        row = record_to_row(record)
        self._run(_PLACE, {column: row[column] for column in (*_PLACEMENT, "id")})

    def delete(self, ids: Sequence[str]) -> int:
        """Hard-delete records; triggers remove their vectors and count the removals."""
        cursor = self._run(
            "DELETE FROM records WHERE id IN (SELECT value FROM json_each(:ids))",
            {"ids": json.dumps(list(ids))},
        )
        return cursor.rowcount

    def unlink_contests(self, tenant: Tenant, ids: Sequence[str], now_us: int) -> int:
        """Clear ``contested_with`` on the tenant's other records naming any of ``ids``
        (about to be deleted); how many changed."""
        return self._run(*queries.unlink_contests(tenant, ids, now_us)).rowcount if ids else 0

    def subject_ids(self, subject: Subject) -> list[str]:
        """Ids of every record of one subject."""
        return [row[0] for row in self._rows(queries.subject_ids(subject))]

    def derived_ids(self, tenant: Tenant, ids: Sequence[str]) -> list[str]:
        """Ids of tenant records derived from any of ``ids``."""
        return [row[0] for row in self._rows(queries.derived_from(tenant, ids))] if ids else []

    def erasure_strings(self, tenant: Tenant, ids: Sequence[str]) -> list[str]:
        """The texts of the tenant's records among ``ids`` (content, key, stored
        value, source reference), read before they are erased, to scan for after."""
        if not ids:
            return []
        rows = self._rows(queries.erasure_strings(tenant, ids), plain=True)
        return [value for row in rows for value in row if value]

    def successors(self, tenant: Tenant, ids: Sequence[str]) -> list[str]:
        """Ids of the tenant's records that supersede any of ``ids``."""
        return [row[0] for row in self._rows(queries.successors(tenant, ids))] if ids else []

    def residue(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, int]:
        """Rows still naming any of ``ids``, by check name (0 everywhere after an
        erasure): the records, their vectors, traces naming them, records derived
        from or superseding them."""
        counts = {name: int(self._rows(query)[0][0])
                  for name, query in queries.residue(tenant, ids).items()}  # fmt: skip
        later = self.derived_ids(tenant, ids) + self.successors(tenant, ids)
        counts["derived rows"] = len(later)
        return counts

    def forget_counters(self, subject: Subject) -> None:
        """Delete the subject's rows of the counter tables (inside the erasure's
        transaction). A cached partition is fresh while its counters match, so the
        tenant's caches are dropped at COMMIT, still under the store lock: none
        stamped with the old counters survives to match new ones."""
        for table in ("partition_state", "lexical_state"):
            cond, params = subject.sql("p")
            self._run(f"DELETE FROM {table} AS p WHERE {cond}", params)
        self._after_commit.append(partial(self.forget_partition, subject))

    def counter_rows(self, subject: Subject) -> int:
        """The subject's rows in the counter tables."""
        return sum(len(self._partition_counters_of(subject, table))
                   for table in ("partition_state", "lexical_state"))  # fmt: skip

    def _partition_counters_of(self, subject: Subject, table: str) -> list[Any]:
        cond, params = subject.sql("p")
        return self._rows((f"SELECT p.user_id FROM {table} p WHERE {cond}", params))

    def holds_cached(self, tenant_id: str) -> bool:
        """Whether an in-memory vector or lexical partition of the tenant is held."""
        return self._cache.holds(tenant_id) or self._lexicon.holds(tenant_id)

    def scrub(self, strings: Sequence[str]) -> erasure.Scrub:
        """After an erasure commits: empty the WAL and scan the database, WAL and
        shared-memory files for ``strings`` (``store.erasure``). A store without a
        file checks nothing here."""
        wanted = erasure.windows(strings)
        if not _is_plain_file(self.path):
            return erasure.Scrub((), (), wanted.strings, wanted.short)

        def still_held(text: str) -> bool:
            return bool(self._rows(queries.holding(text)))

        return erasure.scrub(self._conn, self._lock, self.path, still_held, wanted)

    def subject_residue(self, subject: Subject) -> int:
        """Rows (records, vectors, traces) a subject still has: 0 after an erasure."""
        total = 0
        for table, alias in (("records", "r"), ("vectors", "v"), ("traces", "t")):
            cond, params = subject.sql(alias)
            sql = f"SELECT count(*) FROM {table} {alias} WHERE {cond}"
            total += int(self._rows((sql, params))[0][0])
        return total

    def delete_traces(self, subject: Subject) -> int:
        """Delete a subject's stored recall traces."""
        cond, params = subject.sql("t")
        return self._run(f"DELETE FROM traces AS t WHERE {cond}", params).rowcount

    def forget_partition(self, subject: Subject) -> None:
        """Drop from memory, now, everything a forget or an erasure must not leave
        behind: the in-memory vectors, postings and term counts of the subject's
        tenant (derived copies of its records may sit in any partition of the
        tenant; they reload on the next search) and the process-wide stem cache."""
        self._cache.drop_tenant(subject.tenant_id)
        self._lexicon.drop_tenant(subject.tenant_id)
        lexicon.forget_cached_words()

    def touch(self, touches: Sequence[tuple[Visibility, Sequence[str], int]]) -> None:
        """Count one access of each visible record in each ``(vis, ids, now_us)`` (and
        restart its retention period: retention counts from the last access); one
        prepared statement per predicate shape, run for every touch (a background
        flush writes a second's recalls at once, so it holds the GIL briefly)."""
        batches: dict[str, list[dict[str, Any]]] = {}
        for vis, ids, now_us in touches:
            cond, params = vis.sql()
            sql = (
                "UPDATE records SET access_count = access_count + 1, last_accessed_at = :now,"
                f" expires_at = {queries.RENEWED_EXPIRY}"
                " WHERE rowid IN (SELECT r.rowid FROM json_each(:ids) j CROSS JOIN records r"
                f" ON r.id = j.value WHERE {cond})"
            )
            batches.setdefault(sql, []).append(
                {**params, "ids": json.dumps(list(ids)), "now": now_us}
            )
        for sql, rows in batches.items():
            self._run_many(sql, rows)

    # -- traces -------------------------------------------------------------------

    def put_traces(self, rows: Sequence[TraceRow], keep: int) -> None:
        """Store traces; then keep only the newest ``keep`` of each tenant written to."""
        self._run_many(traces.insert(), [row.params() for row in rows])
        for sql, params in traces.retention((row.tenant_id for row in rows), keep):
            self._run(sql, params)

    def get_trace(self, vis: Visibility, trace_id: str) -> str | None:
        """The stored body of a trace recorded under exactly ``vis``."""
        rows = self._rows(traces.get(vis, trace_id))
        return str(rows[0][0]) if rows else None

    def delete_traces_naming(self, tenant: Tenant, ids: Sequence[str]) -> int:
        """Delete the tenant's stored traces that name any of ``ids``."""
        return self._run(*traces.delete_naming(tenant, ids)).rowcount if ids else 0

    # -- vector model bookkeeping ------------------------------------------------

    def vector_model(self) -> str | None:
        """The embedding model the stored vectors come from, if any."""
        return self.meta_get(_VECTOR_MODEL_KEY)

    def claim_vector_model(self, model: str) -> None:
        """Record ``model`` as the vectors' model; refuse to mix with another."""
        current = self.vector_model()
        if current is None:
            self.meta_set(_VECTOR_MODEL_KEY, model)
        elif current != model:
            raise IndexMismatch(_mismatch_message(current, model))

    def check_vector_model(self, model: str) -> None:
        """Raise ``IndexMismatch`` if stored vectors are from another model."""
        current = self.vector_model()
        if current is not None and current != model:
            raise IndexMismatch(_mismatch_message(current, model))

    def meta_get(self, key: str) -> str | None:
        """A value from the meta table."""
        rows = self._rows(("SELECT value FROM meta WHERE key = :key", {"key": key}))
        return str(rows[0][0]) if rows else None

    def meta_set(self, key: str, value: str) -> None:
        """Set a value in the meta table."""
        self._run(
            "INSERT INTO meta (key, value) VALUES (:key, :value)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            {"key": key, "value": value},
        )

    # -- audit ------------------------------------------------------------------

    def _audit_key(self, subject: Subject, create: bool) -> bytes | None:
        """The subject's pseudonym key (``store.pseudonyms``), made on first use."""
        cond, params = subject.sql("k")
        if create:
            self._run(
                "INSERT INTO audit_subjects (tenant_id, user_id, key)"
                " VALUES (:subj_tenant, :subj_user, :key) ON CONFLICT DO NOTHING",
                {**params, "key": secrets.token_bytes(32)},
            )
        rows = self._rows((f"SELECT k.key FROM audit_subjects k WHERE {cond}", params))
        return bytes(rows[0][0]) if rows else None

    def audit_name(self, subject: Subject) -> str | None:
        """How the audit log names ``subject`` now (None: never audited, or erased)."""
        key = self._audit_key(subject, create=False)
        return None if key is None else pseudonym(key, subject.tenant_id, subject.user_id)

    def forget_audit_subject(self, subject: Subject) -> int:
        """Delete the subject's pseudonym key: its audit entries become unlinkable."""
        cond, params = subject.sql("k")
        sql = f"DELETE FROM audit_subjects AS k WHERE {cond}"
        return self._run(sql, params).rowcount

    def append_audit(self, entry: AuditEntry) -> str:
        """Chain and append one audit entry, its user named by pseudonym; returns its
        hash. Call inside the transaction of the change it records."""
        if entry.user_id:  # every user id, even one shaped like a pseudonym
            key = self._audit_key(Subject(entry.tenant_id, entry.user_id), create=True)
            assert key is not None
            entry = pseudonymised(entry, pseudonym(key, entry.tenant_id, entry.user_id))
        rows = self._rows(("SELECT hash FROM audit ORDER BY seq DESC LIMIT 1", {}))
        prev = rows[0][0] if rows else GENESIS
        digest = entry_hash(prev, entry)
        self._run(
            "INSERT INTO audit (at, tenant_id, user_id, actor, operation, record_ids, reason,"
            " prev_hash, hash) VALUES (:at, :tenant, :user, :actor, :op, :ids, :reason,"
            " :prev, :hash)",
            {
                "at": entry.at, "tenant": entry.tenant_id, "user": entry.user_id,
                "actor": entry.actor, "op": entry.operation,
                "ids": json.dumps(list(entry.record_ids)), "reason": entry.reason,
                "prev": prev, "hash": digest,
            },
        )  # fmt: skip
        return digest

    def verify_audit(self) -> AuditReport:
        """Recompute the whole audit chain."""
        rows = self._rows(("SELECT * FROM audit ORDER BY seq", {}))
        return verify_chain(dict(row) for row in rows)

    def audit_entries(self, subject: Subject) -> list[dict[str, Any]]:
        """A subject's audit entries, oldest first: those under its pseudonym, and any
        written with its plain id before pseudonyms existed (migration 0015). A user id
        shaped like a pseudonym is never looked up plain: it could be another user's
        pseudonym (such a user's entries from before 0015 are not found)."""
        names = [] if is_pseudonym(subject.user_id) else [subject.user_id]
        if subject.user_id:
            name = self.audit_name(subject)
            names += [name] if name else []
        found: list[dict[str, Any]] = []
        for user in names:
            cond, params = Subject(subject.tenant_id, user).sql("a")
            rows = self._rows((f"SELECT * FROM audit a WHERE {cond} ORDER BY a.seq", params))
            found += [dict(row) for row in rows]
        return sorted(found, key=lambda row: int(row["seq"]))

    # -- derived index maintenance ----------------------------------------------

    def rebuild_lexical(self) -> None:
        """Forget the in-memory postings: they reload from the records table on the
        next search."""
        self._lexicon.clear()

    def iter_all(self, batch: int) -> Iterator[list[Record]]:
        """Every record of the store in rowid order, in batches (index rebuild only)."""
        last = 0
        while True:
            rows = self._rows(
                (
                    f"SELECT {', '.join(COLUMNS)}, rowid AS rid FROM records"
                    " WHERE rowid > :last ORDER BY rowid LIMIT :n",
                    {"last": last, "n": batch},
                )
            )
            if not rows:
                return
            last = rows[-1]["rid"]
            yield [record_from_values(row) for row in rows]

    def reset_vectors(self) -> None:
        """Delete every vector and forget the vectors' model (before a rebuild)."""
        self._run("DELETE FROM vectors")
        self._run("DELETE FROM meta WHERE key = :key", {"key": _VECTOR_MODEL_KEY})
        self._cache.clear()

    def put_vectors(self, records: Sequence[Record], vectors: NDArray[np.float32]) -> None:
        """Store vectors for existing records (index rebuild)."""
        for record, vector in zip(records, vectors, strict=True):
            self.update(record)
            self._put_vector(record, vector)


def _mismatch_message(stored: str, wanted: str) -> str:
    return (
        f"stored vectors come from embedding model {stored!r} but this store was opened "
        f"with {wanted!r}; vectors of different models are never compared. Run "
        f"`engram index rebuild` to re-embed every record with the current embedder "
        f"(key and lexical search keep working meanwhile)."
    )


def _split(script: str) -> list[str]:
    """Split a migration script into statements, keeping trigger bodies whole."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
