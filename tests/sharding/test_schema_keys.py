"""Every key and index of a migrated PostgreSQL store leads with ``tenant_id``.

Read from the catalog of a database ``PostgresStore`` migrated (and whose vector
model is claimed, so the HNSW index exists), not from the migration text: what
Citus distributes is what the database holds. See ``docs/sharding.md``.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

# Truly global tables: Citus reference tables (docs/sharding.md says why each).
REFERENCE_TABLES = {"engram_meta", "engram_migrations"}
# Non-unique indexes whose access method cannot lead with tenant_id usefully:
# (table, index, access method). Citus builds them per shard, over that shard's
# tenants only; no uniqueness rests on them.
PER_SHARD_INDEXES = {
    ("records", "records_lexemes", "gin"),
    ("records", "records_embedding", "hnsw"),
}

_TABLES = """
SELECT c.relname, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
    AND a.attname = 'tenant_id' AND a.attnum > 0 AND NOT a.attisdropped)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY 1
"""
_INDEXES = """
SELECT t.relname, i.relname, am.amname, x.indisunique, x.indisprimary,
       (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = t.oid
        AND a.attnum = x.indkey[0])
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_am am ON am.oid = i.relam JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'public' ORDER BY 1, 2
"""
_CONSTRAINTS = """
SELECT t.relname, c.conname, c.contype,
       (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = t.oid AND a.attnum = c.conkey[1])
FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'public' AND c.contype IN ('p', 'u', 'x', 'f') ORDER BY 1, 2
"""


def offenders(conn: psycopg.Connection) -> list[tuple[str, ...]]:  # type: ignore[type-arg]
    """Keys, unique constraints and indexes of tenant tables not led by ``tenant_id``."""
    wrong = [
        (table, index, method, str(first))
        for table, index, method, unique, primary, first in conn.execute(_INDEXES)
        if table not in REFERENCE_TABLES and first != "tenant_id"
        and (unique or primary or (table, index, method) not in PER_SHARD_INDEXES)
    ]  # fmt: skip
    wrong += [
        (table, name, f"constraint {kind}", str(first))
        for table, name, kind, first in conn.execute(_CONSTRAINTS)
        if table not in REFERENCE_TABLES and first != "tenant_id"
    ]
    return wrong


@pytest.fixture
def catalog(pg_url: str) -> Iterator[psycopg.Connection]:  # type: ignore[type-arg]
    """A connection to a migrated database whose vector model is claimed."""
    from shard_workload import DIM, MODEL

    from engram.store.postgres import PostgresConfig, PostgresStore
    from engram.store.postgres import vectors as vector_sql

    PostgresStore.open(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        for statement, params in vector_sql.claim_statements(MODEL, DIM, PostgresConfig()):
            conn.execute(statement, params)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


def test_every_table_is_a_tenant_table_or_a_named_reference_table(
    catalog: psycopg.Connection,  # type: ignore[type-arg]
) -> None:
    tables = dict(catalog.execute(_TABLES).fetchall())
    assert {"records", "forgotten", "audit", "audit_heads", "audit_subjects", "traces"} <= {
        name for name, tenant in tables.items() if tenant
    }
    assert {name for name, tenant in tables.items() if not tenant} == REFERENCE_TABLES


def test_every_key_and_index_leads_with_tenant_id(
    catalog: psycopg.Connection,  # type: ignore[type-arg]
) -> None:
    names = {(table, index, method) for table, index, method, *_ in catalog.execute(_INDEXES)}
    assert names >= PER_SHARD_INDEXES, "an allow-listed index is gone: shorten the list"
    kinds = {kind for _, _, kind, _ in catalog.execute(_CONSTRAINTS)}
    assert {"p", "u"} <= kinds  # primary keys and the traces unique constraint were read
    assert offenders(catalog) == []


def test_the_check_flags_keys_and_indexes_led_by_another_column(
    catalog: psycopg.Connection,  # type: ignore[type-arg]
) -> None:
    catalog.execute("CREATE INDEX records_by_user ON records (user_id, tenant_id)")
    catalog.execute("CREATE UNIQUE INDEX records_ids ON records (id)")
    catalog.execute("CREATE INDEX records_lexemes_too ON records USING gin (lexemes)")
    catalog.execute("ALTER TABLE traces ADD CONSTRAINT traces_once UNIQUE (trace_id, tenant_id)")
    assert {row[1] for row in offenders(catalog)} == {
        "records_by_user", "records_ids", "records_lexemes_too", "traces_once",
    }  # fmt: skip
