"""``contract.Maintenance`` on PostgreSQL: model, meta, audit, traces, erasure, rebuilds.

Differences from the SQLite store, each because PostgreSQL is a server:

* no in-memory partitions or their counters, so ``forget_counters`` deletes
  only the subject's consolidation run row, ``counter_rows`` is 0 and
  ``holds_cached`` is False; the
  process-wide stem cache is still dropped (the rerank shares it);
* ``scrub`` runs ``VACUUM`` on the tables an erasure touched and checks dead
  tuples; it scans the relation files only where this process can read them (a
  local server), and rewrites the tables when they still hold erased bytes
  (``store.postgres.physical``). PostgreSQL does not zero freed space, and the
  WAL keeps old pages until recycled: neither is claimed otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
from numpy.typing import NDArray
from psycopg.pq import TransactionStatus

from engram.errors import StoreError
from engram.store import erasure, lexicon
from engram.store.dialect import POSTGRES
from engram.store.postgres import physical, sql, traces
from engram.store.postgres import vectors as vector_sql
from engram.store.postgres.audit import AuditLog
from engram.store.postgres.schema import TEXT_CONFIG_KEY, VECTOR_DIM_KEY, VECTOR_MODEL_KEY
from engram.store.postgres.session import Conn, on
from engram.store.postgres.unit import VectorMeta
from engram.store.predicate import Subject, Tenant, Visibility
from engram.store.rows import record_from_values, record_to_row
from engram.types import Record

__all__ = ["Admin"]

_MUTABLE = (
    "status", "valid_to", "superseded_by", "contested_with", "updated_at", "confidence",
    "observed_at", "expires_at", "access_count", "last_accessed_at", "embedding_model",
)  # fmt: skip
_SUBJECT_TABLES = (
    ("records", "r"), ("traces", "t"), ("procedure_stats", "s"), ("consolidated", "c"),
    ("consolidation_runs", "k"),
)  # fmt: skip
_FAILED = TransactionStatus.INERROR


def update_query(record: Record, embedding: NDArray[np.float32] | None = None) -> sql.Query:
    """Write the mutable fields of an existing record (and, given, its vector)."""
    row = record_to_row(record)
    cond, params = Tenant(record.tenant_id).sql("r", POSTGRES)
    sets = ", ".join(f"{column} = %({column})s" for column in _MUTABLE)
    vector = ", embedding = %(embedding)s" if embedding is not None else ""
    text = f"UPDATE records AS r SET {sets}{vector} WHERE r.id = %(id)s AND {cond}"
    bound = {column: row[column] for column in (*_MUTABLE, "id")}
    return text, {**params, **bound, "embedding": embedding}


class Admin(AuditLog):
    """Administration over the session's connections (``Maintenance``)."""

    @contextmanager
    def _unlimited(self, doing: str) -> Iterator[Conn]:
        """A connection without the statement timeout for the block (an index build or
        a ``VACUUM`` of a large table outlasts any request's limit), restored after."""
        with self.connection(doing) as conn:
            conn.execute("SELECT set_config('statement_timeout', '0', false)")
            try:
                yield conn
            finally:  # not on a failed transaction: its rollback restores the setting
                if not conn.closed and conn.info.transaction_status != _FAILED:
                    conn.execute(
                        "SELECT set_config('statement_timeout', %(t)s, false)",
                        {"t": str(self.config.statement_timeout_ms)},
                    )

    # -- vectors and meta -----------------------------------------------------------

    def _vector_meta(self, conn: Conn, fresh: bool = False) -> VectorMeta:
        """The claimed model and dimension; inside this thread's transaction read
        once (``Unit.model``) unless ``fresh``."""
        unit = self.unit() if conn is self._held() else None
        if unit is not None and unit.model is not None and not fresh:
            return unit.model
        found = dict(on(conn, (vector_sql.stored(), {})))
        dim = found.get(VECTOR_DIM_KEY)
        meta = found.get(VECTOR_MODEL_KEY), None if dim is None else int(dim)
        if unit is not None:
            unit.model = meta
        return meta

    def _know_vector_meta(self, conn: Conn, meta: VectorMeta | None) -> None:
        """What this transaction knows of the model changed (a claim, a reset)."""
        unit = self.unit() if conn is self._held() else None
        if unit is not None:
            unit.model = meta

    def vector_model(self) -> str | None:
        """The embedding model the stored vectors come from, if any."""
        with self.connection("reading the vector model") as conn:
            return self._vector_meta(conn)[0]

    def check_vector_model(self, model: str) -> None:
        """Raise ``IndexMismatch`` if stored vectors are from another model."""
        vector_sql.check(self.vector_model(), model)

    def claim_vector_model(self, conn: Conn, model: str, dimension: int) -> None:
        """Make ``model`` (at ``dimension``) the vectors' model, in the open
        transaction on ``conn``; refuse another one."""
        current, _ = self._vector_meta(conn)
        if current is None:
            conn.execute(vector_sql.CLAIM_LOCK)
            current, _ = self._vector_meta(conn, fresh=True)  # a concurrent writer's claim
            if current is None:
                for statement, params in vector_sql.claim_statements(model, dimension, self.config):
                    conn.execute(statement, params)
                self._know_vector_meta(conn, (model, dimension))
                return
        vector_sql.check(current, model)

    def meta_get(self, key: str) -> str | None:
        """A value from ``engram_meta``."""
        rows = self.rows(("SELECT value FROM engram_meta WHERE key = %(k)s", {"k": key}))
        return str(rows[0][0]) if rows else None

    def meta_set(self, key: str, value: str) -> None:
        """Set a value in ``engram_meta`` (the vector model's keys: read again)."""
        self.run(
            (
                "INSERT INTO engram_meta (key, value) VALUES (%(k)s, %(v)s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                {"k": key, "v": value},
            )
        )
        unit = self.unit()
        if unit is not None and key in (VECTOR_MODEL_KEY, VECTOR_DIM_KEY):
            unit.model = None

    # -- traces -------------------------------------------------------------------

    def put_traces(self, rows: Sequence[traces.TraceRow], keep: int) -> None:
        """Store traces; then keep only the newest ``keep`` of each tenant written to."""
        with self.transaction():
            self.writing(*(row.tenant_id for row in rows))
            self.run_many(traces.INSERT, [traces.params(row) for row in rows], "storing traces")
            for query in traces.retention((row.tenant_id for row in rows), keep):
                self.run(query, "trace retention")

    def get_trace(self, vis: Visibility, trace_id: str) -> str | None:
        """The stored body of a trace recorded under exactly ``vis``."""
        found = self.rows(traces.get(vis, trace_id), "reading a trace")
        return str(found[0][0]) if found else None

    def delete_traces(self, subject: Subject) -> int:
        """Delete a subject's stored recall traces."""
        self.writing(subject.tenant_id)
        cond, params = subject.sql("t", POSTGRES)
        return self.run((f"DELETE FROM traces AS t WHERE {cond}", params), "deleting traces")

    def delete_traces_naming(self, tenant: Tenant, ids: Sequence[str]) -> int:
        """Delete the tenant's stored traces that name any of ``ids``."""
        self.writing(tenant.tenant_id)
        return self.run(traces.delete_naming(tenant, ids), "deleting traces") if ids else 0

    # -- erasure ----------------------------------------------------------------------

    def _ids(self, query: sql.Query, tenant_id: str) -> list[str]:
        self.writing(tenant_id)
        return [str(row[0]) for row in self.rows(query, "an erasure lookup")]

    def subject_ids(self, subject: Subject) -> list[str]:
        """Ids of every record of one subject."""
        return self._ids(sql.subject_ids(subject), subject.tenant_id)

    def derived_ids(self, tenant: Tenant, ids: Sequence[str]) -> list[str]:
        """Ids of the tenant's records derived from any of ``ids``."""
        return self._ids(sql.derived_ids(tenant, ids), tenant.tenant_id) if ids else []

    def successors(self, tenant: Tenant, ids: Sequence[str]) -> list[str]:
        """Ids of the tenant's records that supersede any of ``ids``."""
        return self._ids(sql.successors(tenant, ids), tenant.tenant_id) if ids else []

    def erasure_strings(self, tenant: Tenant, ids: Sequence[str]) -> list[str]:
        """The texts of the tenant's records among ``ids``, read before erasing them."""
        if not ids:
            return []
        self.writing(tenant.tenant_id)
        found = self.rows(sql.erasure_strings(tenant, ids), "reading erased texts")
        return [value for row in found for value in row if value]

    def residue(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, int]:
        """Rows still naming any of ``ids``, by check name (0 everywhere after erasure)."""
        counts = {name: int(self.rows(query, "an erasure check")[0][0])
                  for name, query in sql.residue(tenant, ids).items()}  # fmt: skip
        counts["derived rows"] = len(self.derived_ids(tenant, ids) + self.successors(tenant, ids))
        return counts

    def subject_residue(self, subject: Subject) -> int:
        """Rows (records, traces, outcome statistics, consolidation marks and runs) a
        subject still has: 0 after an erasure."""
        total = 0
        for table, alias in _SUBJECT_TABLES:
            cond, params = subject.sql(alias, POSTGRES)
            query = (f"SELECT count(*) FROM {table} {alias} WHERE {cond}", params)
            total += int(self.rows(query, "an erasure check")[0][0])
        return total

    def forget_counters(self, subject: Subject) -> None:
        """Delete the subject's consolidation run row (this store keeps no per-partition
        counters; outcome statistics and marks go with their records)."""
        self.writing(subject.tenant_id)
        cond, params = subject.sql("k", POSTGRES)
        self.run((f"DELETE FROM consolidation_runs AS k WHERE {cond}", params), "an erasure")

    def counter_rows(self, subject: Subject) -> int:
        """0: this store keeps no per-partition counters."""
        return 0

    def forget_partition(self, subject: Subject) -> None:
        """No partition is cached here; the process-wide stem cache is dropped."""
        lexicon.forget_cached_words()

    def holds_cached(self, tenant_id: str) -> bool:
        """False: this store caches no records in memory."""
        return False

    def scrub(self, strings: Sequence[str]) -> erasure.Scrub:
        """After an erasure commits, outside any transaction: ``VACUUM``, dead tuples,
        the relation files when readable here, a rewrite if configured
        (``store.postgres.physical``: what is and is not checked)."""
        wanted = erasure.windows(strings)
        if self.in_transaction:
            return erasure.Scrub(("vacuum",), ("vacuum",), wanted.strings, wanted.short)
        try:
            with self._unlimited("vacuum") as conn:
                return physical.scrub(conn, strings, self.config.erasure_rewrite)
        except StoreError:
            return erasure.Scrub(("vacuum",), ("vacuum",), wanted.strings, wanted.short)

    # -- derived indexes ----------------------------------------------------------

    def rebuild_lexical(self) -> None:
        """Re-create the ``tsvector`` column when the configured text search
        configuration differs from the schema's (else nothing: it is generated)."""
        wanted = self.config.text_search
        if wanted == self.text_config:
            return
        with self._unlimited("rebuilding the lexical index") as conn, self.block(conn):
            conn.execute("ALTER TABLE records DROP COLUMN lexemes")
            conn.execute(
                "ALTER TABLE records ADD COLUMN lexemes tsvector GENERATED ALWAYS AS"
                f" (to_tsvector('{wanted}'::regconfig, content)) STORED"
            )
            conn.execute("CREATE INDEX records_lexemes ON records USING gin (lexemes)")
            conn.execute(
                "UPDATE engram_meta SET value = %(v)s WHERE key = %(k)s",
                {"v": wanted, "k": TEXT_CONFIG_KEY},
            )
        self.text_config = wanted

    def iter_all(self, batch: int) -> Iterator[list[Record]]:
        """Every record in (tenant, id) order, in batches (index rebuild only)."""
        last: tuple[str, str] = ("", "")
        cols = ", ".join(sql.COLUMNS_PG)
        while True:
            found = self.rows(
                (
                    f"SELECT {cols} FROM records WHERE (tenant_id, id) > (%(t)s, %(i)s)"
                    " ORDER BY tenant_id, id LIMIT %(n)s",
                    {"t": last[0], "i": last[1], "n": batch},
                ),
                "reading every record",
            )
            if not found:
                return
            last = (str(found[-1][1]), str(found[-1][0]))
            yield [record_from_values(row) for row in found]

    def reset_vectors(self) -> None:
        """Delete every vector and forget the model (before a rebuild)."""
        with self._unlimited("resetting vectors") as conn, self.block(conn):
            for statement, params in vector_sql.reset_statements():
                conn.execute(statement, params)
            self._know_vector_meta(conn, (None, None))

    def put_vectors(self, records: Sequence[Record], vectors: NDArray[np.float32]) -> None:
        """Store vectors for existing records (index rebuild), in one transaction."""
        if not records:
            return
        with self.transaction(), self.connection("storing vectors") as conn:
            self.writing(*{r.tenant_id for r in records})
            for model in {r.embedding_model for r in records if r.embedding_model}:
                self.claim_vector_model(conn, model, int(vectors.shape[1]))
            queries = [update_query(r, np.ascontiguousarray(v, dtype=np.float32))
                       for r, v in zip(records, vectors, strict=True)]  # fmt: skip
            with conn.cursor() as cursor:
                cursor.executemany(queries[0][0], [params for _, params in queries])

    def rebuild_vector_index(self) -> None:
        """Drop and build the HNSW index in one pass (after a bulk load: one build
        is much faster than inserting row by row into an existing index)."""
        with self._unlimited("building the vector index") as conn:
            if self._vector_meta(conn)[1] is None:
                return
            conn.execute(
                "SELECT set_config('maintenance_work_mem', %(m)s, false)",
                {"m": self.config.maintenance_work_mem},
            )
            conn.execute(vector_sql.drop_index_statement())
            conn.execute(vector_sql.index_statement(self.config))
            conn.execute("RESET maintenance_work_mem")
            conn.execute("ANALYZE records")
