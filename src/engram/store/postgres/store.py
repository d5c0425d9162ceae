"""``PostgresStore``: the ``contract.Store`` (and ``Maintenance``) on PostgreSQL.

Records, their lexical index (a generated ``tsvector``) and their vectors
(pgvector HNSW) sit in one table, so every probe is one statement with the scope
predicate inside it, and every change is part of one database transaction:
a change that fails, or a connection that drops before ``COMMIT``, leaves
nothing behind, and a retried ``Insert`` of the same record cannot duplicate it
(the primary key refuses a second row).

Several processes write here at once, unlike SQLite: writers of one tenant take
turns from their transaction's first statement on that tenant (``Session.writing``:
the write path decides on what it re-reads inside its transaction), writers of
different tenants run concurrently, ``lock_slot`` takes a transaction-scoped
advisory lock, the audit append locks its tenant's chain head, and a unique
partial index keeps one active version per key whatever the interleaving.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engram.errors import EngramError, InvalidArgument, StoreError
from engram.store import contract
from engram.store.dialect import POSTGRES
from engram.store.lexical import terms
from engram.store.postgres import lifecycle_sql, slot_batch, sql, vectors
from engram.store.postgres.admin import update_query
from engram.store.postgres.changes import one_row, tenant_of, touch
from engram.store.postgres.config import PostgresConfig
from engram.store.postgres.connect import connect, libpq_url, migrate, open_pool, text_config
from engram.store.postgres.errors import Server
from engram.store.postgres.lifecycle import Lifecycle
from engram.store.postgres.session import Conn, on
from engram.store.postgres.shares import Shares
from engram.store.predicate import OwnerSlot, Tenant, Visibility
from engram.store.rows import record_from_values, record_to_row, to_micros
from engram.types import Record

__all__ = ["PostgresStore"]

_PLACEMENT = (
    "version", "supersedes", "created_at", "expires_at", "source_kind", "source_ref",
    "derived_from",
)  # fmt: skip


def _records(found: Sequence[tuple[Any, ...]]) -> list[Record]:
    return [record_from_values(row) for row in found]


def _array(value: Any) -> NDArray[np.float32]:
    """A stored vector as float32 (pgvector's loader gives a ``Vector`` or an array)."""
    raw = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(raw, dtype=np.float32)


def _ones(found: Sequence[tuple[Any, ...]]) -> contract.Hits:
    return [(record_from_values(row), 1.0) for row in found]


class PostgresStore(Shares, Lifecycle):
    """System of record, lexical and vector indexes in one PostgreSQL database."""

    @classmethod
    def open(cls, url: str, config: PostgresConfig | None = None) -> PostgresStore:
        """Connect, apply pending migrations and open the pool. An unreachable
        server or a refused login raises ``Unavailable`` naming host and database
        (never the password); a failed migration raises ``MigrationError``.
        ``postgresql+psycopg://`` (any ``+driver``) and ``postgres://`` URLs are
        taken as ``postgresql://``."""
        cfg = config or PostgresConfig()
        url = libpq_url(url)
        server = Server.of(url)
        conn = connect(url, cfg, server)
        try:
            applied = migrate(conn, cfg, server)
            lexical_config = text_config(conn, server)
        finally:
            conn.close()
        store = cls(open_pool(url, cfg, server), server, cfg, lexical_config)
        store.applied_migrations = applied
        return store

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._probes: ThreadPoolExecutor | None = None
        self.applied_migrations: list[str] = []  # by this open (``engram migrate``)

    def close(self) -> None:
        """Stop the probe threads and close the pool."""
        if self._probes is not None:
            self._probes.shutdown(wait=True)
        super().close()

    # -- reads ------------------------------------------------------------------------

    def read(self, vis: Visibility, ids: Sequence[str]) -> list[Record]:
        """The visible records among ``ids``, in that order."""
        if not ids:
            return []
        self.writing(vis.tenant_id)
        by_id = {r.id: r for r in _records(self.rows(sql.by_ids(vis, ids), "reading records"))}
        return [by_id[i] for i in ids if i in by_id]

    def history(self, vis: Visibility, record_id: str) -> list[Record]:
        """The visible version chain through ``record_id``, oldest first."""
        self.writing(vis.tenant_id)
        return _records(self.rows(sql.history(vis, record_id), "reading a history"))

    def listing(self, vis: Visibility, page: contract.Listing) -> list[Record]:
        """Visible records, newest first (statuses as of ``page.at`` when given)."""
        self.writing(vis.tenant_id)
        query = sql.listing(vis, page.type_name, page.statuses, page.limit, page.offset,
                            to_micros(page.at))  # fmt: skip
        return _records(self.rows(query, "listing records"))

    def vectors(
        self, vis: Visibility, ids: Sequence[str], model: str
    ) -> dict[str, NDArray[np.float32]]:
        """Stored vectors of the visible ``ids`` under ``model``."""
        if not ids:
            return {}
        self.writing(vis.tenant_id)
        query, params = vectors.vectors_of(vis, ids, model)
        # binary results: a vector arrives as float32 bytes (its text form, 384
        # numbers to parse each, took 25 ms for 135 vectors)
        with self.connection("reading vectors") as conn, conn.cursor(binary=True) as cursor:
            found = cursor.execute(query, params).fetchall()
        return {str(row[0]): _array(row[1]) for row in found}

    # -- candidates -------------------------------------------------------------------

    def candidates(
        self, vis: Visibility, probes: Sequence[contract.Probe]
    ) -> list[contract.Hits | EngramError]:
        """One result per probe, in order; a failed probe yields its error. Outside a
        transaction the probes run concurrently, each on its own pooled connection;
        inside one, in turn on the transaction's connection, each in a savepoint so
        a cancelled probe does not abort the transaction."""
        self.writing(vis.tenant_id, *(p.slot.tenant_id for p in probes
                                      if isinstance(p, contract.SlotProbe)))  # fmt: skip
        if self.in_transaction:
            return self._in_savepoint(vis, probes) if probes else []
        if len(probes) > 1 and self.config.probe_threads > 1:
            if self._probes is None:
                self._probes = ThreadPoolExecutor(self.config.probe_threads, "engram-pg-probe")
            return list(self._probes.map(lambda probe: self._answer(vis, probe), probes))
        return [self._answer(vis, probe) for probe in probes]

    def _in_savepoint(
        self, vis: Visibility, probes: Sequence[contract.Probe]
    ) -> list[contract.Hits | EngramError]:
        """The probes in turn on the transaction's connection, all in one savepoint, a
        run of slot probes in one statement per slot (``slot_batch``); when one fails,
        the savepoint is rolled back (the answers before it stand: they were reads)
        and the probes after it run in a savepoint each. A failed single probe
        yields its error; a failed run of slot probes is asked again probe by probe,
        so each gets its own answer or error, never another's."""
        answers: list[contract.Hits | EngramError] = []
        batched = False
        try:
            with self.connection("a recall probe") as conn, self.block(conn):
                for step in slot_batch.steps(vis, probes):
                    batched = isinstance(step, list)
                    if isinstance(step, list):
                        answers += slot_batch.answer(conn, step)
                    else:
                        answers.append(self._probe(conn, vis, step))
        except EngramError as exc:
            if len(answers) == len(probes):  # all answered; the release failed: the next
                return answers  # statement of the transaction reports its connection
            if not batched:
                answers.append(exc)
        return answers + [self._answer(vis, probe) for probe in probes[len(answers) :]]

    def _answer(self, vis: Visibility, probe: contract.Probe) -> contract.Hits | EngramError:
        try:
            with self.connection("a recall probe") as conn:
                if self.in_transaction:
                    with self.block(conn):
                        return self._probe(conn, vis, probe)
                return self._probe(conn, vis, probe)
        except EngramError as exc:
            return exc

    def _probe(self, conn: Conn, vis: Visibility, probe: contract.Probe) -> contract.Hits:
        handler = _HANDLERS[type(probe)]
        return handler(self, conn, vis, probe)

    def _key(self, conn: Conn, vis: Visibility, probe: contract.KeyProbe) -> contract.Hits:
        if probe.keys is not None:
            if not probe.keys:
                return []
            return _ones(on(conn, sql.by_key(vis, probe.keys, probe.statuses, probe.limit)))
        return _ones(on(conn, sql.keyed(vis, probe.types, probe.statuses, probe.limit)))

    def _recent(self, conn: Conn, vis: Visibility, probe: contract.RecentProbe) -> contract.Hits:
        return _ones(on(conn, sql.recent(vis, probe.types, probe.statuses, probe.limit)))

    def _lexical(self, conn: Conn, vis: Visibility, probe: contract.LexicalProbe) -> contract.Hits:
        words = terms(probe.text)
        if not words or probe.limit <= 0:
            return []
        bound = self.config.lexical_rank_rows or None
        query = sql.lexical(vis, self.text_config, " or ".join(words), probe.statuses, probe.limit,
                            bound)  # fmt: skip
        return [(record_from_values(row), float(row[-1])) for row in on(conn, query)]

    def _vector(self, conn: Conn, vis: Visibility, probe: contract.VectorProbe) -> contract.Hits:
        model, _ = self._vector_meta(conn)
        vectors.check(model, probe.model)
        if model is None or probe.limit <= 0:
            return []
        args = (vis, probe.query, probe.model, probe.statuses, probe.limit)
        bound = self.config.exact_below_rows
        small = bound > 0 and int(on(conn, vectors.visible_up_to(
            vis, probe.model, probe.statuses, bound))[0][0]) < bound  # fmt: skip
        found = [] if small else on(conn, vectors.approximate(*args))
        if len(found) < probe.limit:  # a small scope, or the walk ran out before it: exact
            found = on(conn, vectors.exact(*args))
        return [(record_from_values(row), 1.0 - float(row[-1])) for row in found]

    def _neighbours(
        self, conn: Conn, vis: Visibility, probe: contract.NeighbourProbe
    ) -> contract.Hits:
        if not probe.anchors or probe.per_side <= 0:
            return []
        points = [(a.scope, to_micros(a.observed_at) or 0) for a in probe.anchors]
        gap = int(probe.gap.total_seconds() * 1_000_000)
        query = sql.neighbours(vis, points, probe.types, probe.statuses, gap, probe.per_side)
        return _ones(on(conn, query))

    def _slot(self, conn: Conn, vis: Visibility, probe: contract.SlotProbe) -> contract.Hits:
        """Versions a write to the probe's slot meets (``OwnerSlot.key_sql``), for a
        caller of that slot's tenant and user only."""
        if (probe.slot.tenant_id, probe.slot.user_id) != (vis.tenant_id, vis.user_id):
            raise InvalidArgument("a slot probe reads only the caller's own tenant and user")
        if (probe.key is None) == (probe.content_hash is None):
            raise InvalidArgument("a slot probe takes exactly one of key and content_hash")
        if probe.key is not None:
            return _ones(on(conn, sql.slot_by_key(probe.slot, probe.key, probe.statuses)))
        assert probe.content_hash is not None
        return _ones(on(conn, sql.slot_by_hash(probe.slot, probe.content_hash, probe.statuses)))

    # -- writes -------------------------------------------------------------------------

    def lock_slot(self, slot: OwnerSlot, key: str) -> None:
        """Hold the write slot until the transaction ends: an advisory lock on
        (tenant, user, scope, key), taken with the other locks asked for before the
        transaction's next statement (``Session.lock``). The agent is left out on
        purpose: the versions a write meets (``OwnerSlot.key_sql``) span the user's
        own and the writing agent's, so writers through different agents must take
        turns too."""
        self.in_own_transaction("lock_slot")
        self.writing(slot.tenant_id)
        self.lock(json.dumps([slot.tenant_id, slot.user_id, slot.scope, key]))

    def apply(self, changes: Sequence[contract.Change]) -> contract.Applied:
        """Apply ``changes`` in order, atomically: in a transaction of their own, or in
        a savepoint of the open one, so a failing change leaves none of them (and the
        caller's transaction can go on). The tenants' writer locks are taken first,
        outside the savepoint, so they outlast its rollback."""
        tenants = [tenant_of(change) for change in changes]
        self.writing(*tenants)
        with self.transaction():
            self.writing(*tenants)  # a transaction of its own: here
            with self.connection("applying changes") as conn:
                return self._apply_all(conn, changes)

    def _apply_all(self, conn: Conn, changes: Sequence[contract.Change]) -> contract.Applied:
        """Every change in order on ``conn``; consecutive inserts as one batch, and
        consecutive touches (a usage flush) sent together."""
        applied = contract.Applied()
        run: list[contract.Insert] = []
        touches: list[contract.Touch] = []
        for change in changes:
            if isinstance(change, contract.Insert):
                touch(conn, touches)
                touches = []
                run.append(change)
                continue
            self._insert(conn, run)
            run = []
            if isinstance(change, contract.Touch):
                touches.append(change)
                continue
            touch(conn, touches)
            touches = []
            self._change(conn, change, applied)
        self._insert(conn, run)
        touch(conn, touches)
        return applied

    def _change(self, conn: Conn, change: contract.Change, applied: contract.Applied) -> None:
        if isinstance(change, contract.Update):
            one_row(conn.execute(*update_query(change.record)).rowcount, change.record)
        elif isinstance(change, contract.Place):
            self._place(conn, change.record)
        elif isinstance(change, contract.Delete):
            if change.ids:
                applied.deleted += int(on(conn, sql.delete(change.tenant, change.ids))[0][0])
            conn.execute(*lifecycle_sql.bump(change.tenant))
        elif isinstance(
            change, (contract.AddTombstones, contract.DropTombstones, contract.AnonymiseTombstones)
        ):
            self.apply_tombstones(conn, change, applied)
        elif isinstance(change, contract.UnlinkContests):
            if change.ids:
                query = sql.unlink_contests(change.tenant, change.ids, to_micros(change.at) or 0)
                applied.unlinked += conn.execute(*query).rowcount
        elif isinstance(change, contract.Audit):
            applied.audit_ids.append(self.append_audit(conn, change.entry))
        elif isinstance(change, contract.PutGrants):
            applied.granted += self.put_grants(conn, change)
        elif isinstance(change, contract.DropGrants):
            applied.revoked += self.drop_grants(conn, change)
        elif isinstance(change, contract.Outcome):
            conn.execute(*lifecycle_sql.outcome(change.subject, change.procedure_id,
                                                change.success, change.reward,
                                                to_micros(change.at) or 0))  # fmt: skip
        elif isinstance(change, contract.Consolidated):
            if change.episode_ids:
                marked = lifecycle_sql.mark_consolidated(change.subject, change.episode_ids,
                                                         to_micros(change.at) or 0)  # fmt: skip
                conn.execute(*marked)
        elif isinstance(change, contract.Reconsolidate):
            if change.summary_ids:
                conn.execute(*lifecycle_sql.reconsolidate(change.tenant, change.summary_ids,
                                                          change.summary_type))  # fmt: skip
        else:  # pragma: no cover - the Change union is closed
            raise StoreError(f"unknown change {type(change).__name__}")

    def _insert(self, conn: Conn, inserts: Sequence[contract.Insert]) -> None:
        """Insert new records (one statement per tenant and ``sql.INSERT_ROWS`` rows),
        claiming the vector model first; refuse a new version of a deleted record."""
        if not inserts:
            return
        self._refuse_forgotten(conn, [change.record for change in inserts])
        for change in inserts:
            model = change.record.embedding_model
            if change.vector is not None and model is not None:
                self.claim_vector_model(conn, model, int(change.vector.shape[0]))
        if len(inserts) == 1:
            conn.execute(sql.INSERT, self._row(inserts[0]))
            return
        by_tenant: dict[str, list[dict[str, Any]]] = {}
        for change in inserts:
            by_tenant.setdefault(change.record.tenant_id, []).append(self._row(change))
        for rows in by_tenant.values():
            for start in range(0, len(rows), sql.INSERT_ROWS):
                conn.execute(*sql.insert_many(rows[start : start + sql.INSERT_ROWS]))

    @staticmethod
    def _row(change: contract.Insert) -> dict[str, Any]:
        row = record_to_row(change.record)
        del row["fts_owner"]
        keep = change.vector is not None and change.record.embedding_model is not None
        row["embedding"] = np.ascontiguousarray(change.vector, dtype=np.float32) if keep else None
        return row

    def _refuse_forgotten(self, conn: Conn, records: Sequence[Record]) -> None:
        """Raise when a record supersedes a deleted one (SQLite migration 0013). The
        superseded versions are share-locked, so a deletion racing this write
        either committed first (its id is in ``forgotten``) or waits for it."""
        by_tenant: dict[str, list[str]] = {}
        for record in records:
            if record.supersedes is not None:
                by_tenant.setdefault(record.tenant_id, []).append(record.supersedes)
        for tenant_id, ids in by_tenant.items():
            ((held, gone),) = on(conn, sql.hold_versions(Tenant(tenant_id), ids))
            # A version not locked was gone: a deletion that committed while the
            # lock waited is in ``forgotten`` only for a new snapshot.
            if not gone and not set(ids) <= set(held or ()):
                gone = [row[0] for row in on(conn, sql.forgotten(Tenant(tenant_id), ids))]
            if gone:
                raise StoreError(f"the record this version supersedes was deleted: {gone[0]}")

    def _place(self, conn: Conn, record: Record) -> None:
        """Write where an existing record sits in its history (import)."""
        self._refuse_forgotten(conn, [record])
        row = record_to_row(record)
        cond, params = Tenant(record.tenant_id).sql("r", POSTGRES)
        sets = ", ".join(f"{column} = %({column})s" for column in _PLACEMENT)
        bound = {column: row[column] for column in (*_PLACEMENT, "id")}
        done = conn.execute(f"UPDATE records AS r SET {sets} WHERE r.id = %(id)s AND {cond}",
                            {**params, **bound}).rowcount  # fmt: skip
        one_row(done, record)


Handler = Callable[[PostgresStore, Conn, Visibility, Any], contract.Hits]
_HANDLERS: dict[type, Handler] = {
    contract.KeyProbe: PostgresStore._key,
    contract.RecentProbe: PostgresStore._recent,
    contract.LexicalProbe: PostgresStore._lexical,
    contract.VectorProbe: PostgresStore._vector,
    contract.NeighbourProbe: PostgresStore._neighbours,
    contract.SlotProbe: PostgresStore._slot,
}


def _conforms(store: PostgresStore) -> tuple[contract.Store, contract.Maintenance]:
    """Never called: mypy checks here that the class satisfies both protocols."""
    return store, store
