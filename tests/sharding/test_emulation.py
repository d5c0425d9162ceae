"""Sharding by tenant, shown on an EMULATION (postgres_fdw, not Citus).

Three embedded PostgreSQL servers: a coordinator whose tenant tables are
``PARTITION BY HASH (tenant_id)`` over two ``postgres_fdw`` foreign partitions,
and two shards migrated by ``PostgresStore`` itself (``shard_cluster``). A
``PostgresStore`` runs on the coordinator; the checks read the plans there and
the rows on each shard through direct connections. docs/sharding.md has the
results and what the emulation cannot show (Audit and put_traces: postgres_fdw
refuses ``ON CONFLICT DO UPDATE``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector
from shard_cluster import Cluster
from shard_statements import captured
from shard_workload import ACTIVE, MODEL, make_record, vector_for, visibility

from engram.store import contract
from engram.store.postgres import PostgresConfig, PostgresStore
from engram.store.postgres import traces as trace_sql
from engram.store.predicate import Subject, Tenant
from engram.store.traces import TraceRow

_SHARD = re.compile(r"\b(?:audit|audit_heads|audit_subjects|forgotten|records|traces)_shard(\d+)")
_TENANT_ROWS = "SELECT tenant_id, count(*) FROM {table} GROUP BY tenant_id ORDER BY 1"


@pytest.fixture
def store(cluster: Cluster) -> Iterator[PostgresStore]:
    """A ``PostgresStore`` opened on the coordinator (its migrations read as applied)."""
    opened = PostgresStore.open(cluster.coordinator, PostgresConfig(probe_threads=1))
    yield opened
    opened.close()
    with psycopg.connect(cluster.coordinator, autocommit=True) as conn:
        for table in cluster.tables:
            if table != "audit":  # append-only on the shards (a trigger refuses deletes)
                conn.execute(f"DELETE FROM {table}")


def _shards_in_plan(conn: psycopg.Connection[Any], sql: str, params: Any) -> set[int]:
    """The shards whose foreign partitions the coordinator's plan names."""
    plan = conn.execute(f"EXPLAIN (VERBOSE, FORMAT JSON) {sql}", params).fetchone()
    assert plan is not None
    return {int(shard) for shard in _SHARD.findall(str(plan[0]))}


def _rows_by_tenant(url: str, table: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        return dict(conn.execute(_TENANT_ROWS.format(table=table)).fetchall())


def _write(store: PostgresStore, tenant: str, user: str = "u1", n: int = 3) -> list[str]:
    made = [make_record(f"{tenant} {user} fact {i} about tea", tenant, user) for i in range(n)]
    store.apply([contract.Insert(r, vector_for(r.content)) for r in made])
    return [r.id for r in made]


def test_a_tenant_query_is_planned_on_its_shard_alone(cluster: Cluster) -> None:
    with psycopg.connect(cluster.coordinator, autocommit=True) as conn:
        for tenant in cluster.tenants_on_each_shard():
            sql = "SELECT id FROM records WHERE tenant_id = %(t)s"
            text = "\n".join(
                row[0] for row in conn.execute(f"EXPLAIN (VERBOSE) {sql}", {"t": tenant})
            )
            shard = cluster.shard_of(tenant)
            assert f"Foreign Scan on public.records_shard{shard} " in text
            assert text.count("Foreign Scan") == 1
            assert f"WHERE ((tenant_id = '{tenant}'))" in text  # pushed down to the shard
        both = _shards_in_plan(conn, "SELECT count(*) FROM records", None)
        assert both == set(range(len(cluster.shards)))  # no tenant: every shard


def test_every_statement_of_a_tenants_requests_touches_its_shard_only(
    cluster: Cluster, store: PostgresStore
) -> None:
    planned = 0
    for tenant in cluster.tenants_on_each_shard():
        vis, owner = visibility(tenant), Tenant(tenant)
        with captured() as sent:
            ids = _write(store, tenant)
            store.read(vis, ids)
            store.candidates(vis, [
                contract.KeyProbe(ACTIVE, 5, types=("fact",)),
                contract.RecentProbe(ACTIVE, 5),
                contract.LexicalProbe("tea", ACTIVE, 5),
                contract.VectorProbe(vector_for("tea"), MODEL, ACTIVE, 2),
            ])  # fmt: skip
            store.listing(vis, contract.Listing(statuses=ACTIVE))
            store.history(vis, ids[0])
            store.vectors(vis, ids, MODEL)
            store.apply([contract.Touch(vis, tuple(ids), make_record("x", tenant).created_at)])
            store.apply([contract.Delete(owner, (ids[0],))])
            store.residue(owner, [ids[0]])
        with psycopg.connect(cluster.coordinator, autocommit=True) as conn:
            register_vector(conn)
            for statement in sent:
                if not statement.explainable:
                    continue
                shards = _shards_in_plan(conn, statement.raw, statement.params)
                assert shards <= {cluster.shard_of(tenant)}, statement.text
                planned += len(shards)
    assert planned > 20


def test_writes_land_on_their_tenants_shard_and_reads_never_cross(
    cluster: Cluster, store: PostgresStore
) -> None:
    first, second = cluster.tenants_on_each_shard()
    mine, theirs = _write(store, first), _write(store, second)
    for tenant in (first, second):
        shard_url = cluster.shards[cluster.shard_of(tenant)]
        assert _rows_by_tenant(shard_url, "records") == {tenant: 3}
    vis = visibility(first)
    assert [r.id for r in store.read(vis, mine + theirs)] == mine
    hits = store.candidates(vis, [
        contract.RecentProbe(ACTIVE, 10), contract.LexicalProbe("tea fact", ACTIVE, 10),
        contract.VectorProbe(vector_for(f"{second} u1 fact 0 about tea"), MODEL, ACTIVE, 10),
    ])  # fmt: skip
    for found in hits:
        assert not isinstance(found, Exception)
        assert {record.id for record, _ in found} == set(mine)
    assert {r.tenant_id for r in store.listing(vis, contract.Listing())} == {first}


def _trace(tenant: str, user: str, ids: list[str]) -> TraceRow:
    return TraceRow(f"t-{tenant}-{user}", tenant, user, visibility(tenant, user).trace_key(),
                    frozenset(ids), 1, "{}")  # fmt: skip


def _erase(store: PostgresStore, subject: Subject) -> list[str]:
    """The subject-erasure steps of ``lifecycle.forget`` through the contract, in one
    (distributed) transaction on the coordinator; without its audit entry."""
    owner = Subject(subject.tenant_id, subject.user_id)
    with store.transaction():
        ids = store.subject_ids(owner)
        ids += store.derived_ids(Tenant(subject.tenant_id), ids)
        store.delete_traces_naming(Tenant(subject.tenant_id), ids)
        store.apply([contract.UnlinkContests(Tenant(subject.tenant_id), tuple(ids),
                                             make_record("x", "t").created_at),
                     contract.Delete(Tenant(subject.tenant_id), tuple(ids))])  # fmt: skip
        store.delete_traces(owner)
        store.forget_audit_subject(owner)
    return ids


def test_erasure_through_the_coordinator_reaches_every_shard(
    cluster: Cluster, store: PostgresStore
) -> None:
    first, second = cluster.tenants_on_each_shard()
    subjects = [Subject(first, "u1"), Subject(second, "u1")]
    kept = Subject(first, "u2")
    # put_traces' upsert is refused over postgres_fdw: its INSERT, without ON CONFLICT.
    insert = trace_sql.INSERT.split(" ON CONFLICT")[0]
    with psycopg.connect(cluster.coordinator, autocommit=True) as conn:
        for subject in [*subjects, kept]:
            ids = _write(store, subject.tenant_id, subject.user_id)
            conn.execute(insert, trace_sql.params(_trace(subject.tenant_id, subject.user_id, ids)))
            conn.execute("INSERT INTO audit_subjects VALUES (%s, %s, 'k')",
                         (subject.tenant_id, subject.user_id))  # fmt: skip
    erased = [_erase(store, subject) for subject in subjects]
    assert [len(ids) for ids in erased] == [3, 3]
    for url in cluster.shards:  # every shard, directly: nothing of either subject remains
        with psycopg.connect(url, autocommit=True) as conn:
            for table in ("records", "traces", "audit_subjects"):
                left = conn.execute(f"SELECT count(*) FROM {table} WHERE user_id = 'u1'").fetchone()
                assert left == (0,), (url, table)
            gone = conn.execute("SELECT count(*) FROM forgotten WHERE id = ANY(%s)",
                                ([i for ids in erased for i in ids],)).fetchone()  # fmt: skip
            assert gone == (3,)  # each shard remembers the ids it deleted
    kept_url = cluster.shards[cluster.shard_of(first)]
    assert _rows_by_tenant(kept_url, "records") == {first: 3}  # u2 of the first tenant
    assert _rows_by_tenant(kept_url, "traces") == {first: 1}
