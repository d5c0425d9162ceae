"""Every statement ``PostgresStore`` sends on a tenant table stays inside one tenant.

A workload calls every method of ``contract.Store`` and ``contract.Maintenance``
for two tenants; every statement the driver is asked to run is captured and then
planned by PostgreSQL (``EXPLAIN``, same parameters). Each scan of a tenant table
must be constrained to ``tenant_id = <one value>`` and each insert must name
``tenant_id``: the condition for Citus to route it to one shard
(``docs/sharding.md``). The named exceptions are administrative whole-database
passes, which Citus runs on every shard.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector
from shard_statements import Sent, captured, examine, implied_tenant
from shard_workload import Recorder, protocol_members, run

from engram.store import contract

TENANTS = ("acme", "globex")
REFERENCE_TABLES = {"engram_meta", "engram_migrations"}
# Whole-database administration (multi-shard on Citus): a fragment of each statement.
CROSS_TENANT = {
    "verify_audit reads every chain head": "SELECT tenant_id, hash FROM audit_heads",
    "verify_audit reads every chain": "SELECT * FROM audit ORDER BY tenant_id, seq",
    "iter_all pages every record": " FROM records WHERE (tenant_id, id) > (",
    "reset_vectors clears every vector": "UPDATE records SET embedding = NULL WHERE embedding",
    "tenants lists every tenant for the sweep": "SELECT DISTINCT r.tenant_id FROM records r",
    "scrub: a surviving record explains a file byte": "SELECT 1 FROM records r WHERE strpos(",
}
# DDL and maintenance: no rows are read or written (Citus propagates them to every shard;
# the ledger is a reference table).
UTILITY = ("CREATE TABLE IF NOT EXISTS engram_migrations ", "ALTER TABLE records ",
           "CREATE INDEX ", "DROP INDEX ", "VACUUM ", "ANALYZE records",
           "RESET maintenance_work_mem", "SHOW data_directory", "CHECKPOINT")  # fmt: skip


def _tenant_tables(conn: psycopg.Connection[Any]) -> set[str]:
    found = conn.execute(
        "SELECT DISTINCT c.relname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
        " WHERE a.attname = 'tenant_id' AND c.relkind = 'r'"
        " AND c.relnamespace = 'public'::regnamespace"
    )
    return {str(row[0]) for row in found}


def _cross_tenant(sent: Sent) -> str | None:
    return next((why for why, fragment in CROSS_TENANT.items() if fragment in sent.text),
                None)  # fmt: skip


@pytest.fixture
def workload(pg_url: str) -> tuple[list[Sent], set[str]]:
    """The statements of one full workload, and the store methods it called."""
    from engram.store.postgres import PostgresConfig, PostgresStore

    with captured() as sent:
        store = Recorder(PostgresStore.open(pg_url, PostgresConfig(max_connections=4)))
        run(store, TENANTS)
    return list(sent), store.used


def test_the_workload_calls_every_contract_method(
    workload: tuple[list[Sent], set[str]],
) -> None:
    wanted = protocol_members(contract.Store) | protocol_members(contract.Maintenance)
    assert wanted - workload[1] == set()


def test_every_statement_on_a_tenant_table_filters_on_one_tenant(
    pg_url: str, workload: tuple[list[Sent], set[str]]
) -> None:
    sent, _ = workload
    seen_cross: set[str] = set()
    problems: list[str] = []
    planned = 0
    with psycopg.connect(pg_url, autocommit=True) as conn:
        register_vector(conn)
        tenant_tables = _tenant_tables(conn)
        for statement in {(s.text, repr(s.params)): s for s in sent}.values():
            if not statement.explainable:
                if not isinstance(statement.sql, bytes) and not statement.text.startswith(UTILITY):
                    problems.append(f"unexpected utility statement: {statement.text[:160]}")
                continue
            verdict = examine(conn, statement, tenant_tables)
            planned += 1
            why = _cross_tenant(statement)
            if why is not None:
                seen_cross.add(why)
                continue
            if verdict.unfiltered or len(verdict.tenants) > 1:
                problems.append(f"{statement.text[:160]} -> {verdict}")
    assert planned > 50  # the capture saw the store's statements
    assert problems == [], "\n".join(problems)
    assert seen_cross == set(CROSS_TENANT), "an allow-listed statement is gone: shorten it"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT r.id FROM records r WHERE r.id = %(id)s",
        "SELECT r.id FROM records r WHERE r.tenant_id = %(t)s OR r.id = %(id)s",
        "SELECT r.id FROM records r JOIN forgotten f ON f.id = r.id WHERE r.tenant_id = %(t)s",
        "SELECT r.id FROM records r WHERE r.tenant_id = ANY(%(many)s::text[])",
        "SELECT r.id FROM records r WHERE r.tenant_id = %(t)s"
        " UNION ALL SELECT x.id FROM records x WHERE x.tenant_id = %(other)s",
        "INSERT INTO forgotten (id, tenant_id) SELECT id, %(t)s FROM records",
        "DELETE FROM forgotten f WHERE f.id = %(id)s",
        "WITH gone AS (DELETE FROM records r WHERE r.tenant_id = %(t)s RETURNING r.id)"
        " UPDATE audit_heads SET seq = 0",
    ],
)
def test_the_check_flags_a_statement_reaching_past_one_tenant(pg_url: str, sql: str) -> None:
    from engram.store.postgres import PostgresStore

    PostgresStore.open(pg_url).close()
    params = {"id": "x", "t": "acme", "other": "globex", "many": ["acme", "globex"]}
    with psycopg.connect(pg_url, autocommit=True) as conn:
        verdict = examine(conn, Sent(sql, params), _tenant_tables(conn))
    assert verdict.unfiltered or len(verdict.tenants) > 1, verdict


def test_implied_tenant_reads_conjunctions_and_disjunctions() -> None:
    both = "((r.tenant_id = 'a'::text) AND (r.user_id = 'u'::text)) OR ((r.tenant_id = 'a'::text))"
    assert implied_tenant(both) == "'a'::text"
    assert implied_tenant("((r.tenant_id = 'a'::text) OR (r.tenant_id = 'b'::text))") is None
    assert implied_tenant("((r.user_id = 'u'::text) OR (r.tenant_id = 'a'::text))") is None
    assert implied_tenant("(r.tenant_id = ANY ('{a}'::text[]))") is None
    assert implied_tenant("((r.id = 'x AND tenant_id = ''a'''::text))") is None
