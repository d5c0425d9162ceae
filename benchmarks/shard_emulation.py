"""Sharding by tenant on an EMULATION (postgres_fdw, not Citus): what it shows, what it costs.

Starts three embedded PostgreSQL servers (a coordinator and two shards, built by
``tests/sharding/shard_cluster.py``), writes ``--records`` records for one tenant
per shard through a ``PostgresStore`` on the coordinator, and reports:

* the coordinator's plan of a one-tenant query (one foreign partition) and of a
  query without a tenant (both);
* how many rows of each tenant each shard holds (read on the shard directly);
* the median latency of four store calls through the coordinator against the same
  calls by a ``PostgresStore`` opened on the tenant's shard directly (the
  baseline, same rows, same run): the price of the postgres_fdw hop, which a
  Citus worker would not pay in the same form.

    PYTHONPATH=src .venv/bin/python benchmarks/shard_emulation.py --records 500
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from common import machine, print_table, ratio, summarize, time_calls, write_results

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sharding"))
from shard_cluster import Cluster, build, start_servers
from shard_workload import ACTIVE, DIM, MODEL, make_record, vector_for, visibility

from engram.store import contract
from engram.store.postgres import PostgresConfig, PostgresStore

RESULTS = Path(__file__).resolve().parent / "results" / "shard_emulation.json"


def _plan(cluster: Cluster, sql: str, params: Any) -> list[str]:
    with psycopg.connect(cluster.coordinator, autocommit=True) as conn:
        return [str(row[0]) for row in conn.execute(f"EXPLAIN (VERBOSE) {sql}", params)]


def _calls(store: PostgresStore, tenant: str, ids: list[str]) -> dict[str, Callable[[], object]]:
    vis = visibility(tenant)
    query = vector_for("tea")
    return {
        "read 10 ids": lambda: store.read(vis, ids[:10]),
        "recent probe (10)": lambda: store.candidates(vis, [contract.RecentProbe(ACTIVE, 10)]),
        "lexical probe (10)": lambda: store.candidates(
            vis, [contract.LexicalProbe("tea coffee", ACTIVE, 10)]
        ),
        "vector probe (10)": lambda: store.candidates(
            vis, [contract.VectorProbe(query, MODEL, ACTIVE, 10)]
        ),
    }


def _fill(store: PostgresStore, tenant: str, count: int) -> list[str]:
    made = [make_record(f"{tenant} note {i}: tea or coffee {i % 7}", tenant) for i in range(count)]
    for start in range(0, count, 200):
        batch = made[start : start + 200]
        store.apply([contract.Insert(r, vector_for(r.content)) for r in batch])
    return [r.id for r in made]


def _compare(cluster: Cluster, coordinator: PostgresStore, tenant: str, ids: list[str],
             repeats: int) -> list[dict[str, Any]]:  # fmt: skip
    direct = PostgresStore.open(cluster.shards[cluster.shard_of(tenant)], PostgresConfig())
    rows = []
    try:
        via, base = _calls(coordinator, tenant, ids), _calls(direct, tenant, ids)
        for name in via:
            routed = summarize(time_calls([via[name]] * repeats))
            alone = summarize(time_calls([base[name]] * repeats))
            rows.append({"call": name, "tenant": tenant, "coordinator": routed, "direct": alone,
                         "ratio_p50": ratio(routed["p50_ms"], alone["p50_ms"])})  # fmt: skip
    finally:
        direct.close()
    return rows


def main(argv: list[str]) -> None:
    """Build the emulated cluster, report plans, placement and latencies."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500, help="records per tenant")
    parser.add_argument("--repeats", type=int, default=50, help="timed calls per measurement")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="engram-shards-") as base:
        servers = start_servers(Path(base), 3)
        try:
            urls = [server.get_uri() for server in servers]
            cluster = build(urls[0], urls[1:], MODEL, DIM)
            payload = _run(cluster, args)
        finally:
            for server in servers:
                server.cleanup()
    payload["machine"] = machine(["benchmarks/shard_emulation.py", *argv])
    write_results(RESULTS, payload)


def _run(cluster: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    tenants = cluster.tenants_on_each_shard()
    store = PostgresStore.open(cluster.coordinator, PostgresConfig(probe_threads=1))
    try:
        ids = {tenant: _fill(store, tenant, args.records) for tenant in tenants}
        one = _plan(cluster, "SELECT id FROM records WHERE tenant_id = %(t)s", {"t": tenants[0]})
        every = _plan(cluster, "SELECT count(*) FROM records", None)
        print("\n".join(["plan, one tenant:", *one, "", "plan, no tenant:", *every]))
        placement = []
        for i, url in enumerate(cluster.shards):
            with psycopg.connect(url, autocommit=True) as conn:
                found = conn.execute(
                    "SELECT tenant_id, count(*) FROM records GROUP BY 1"
                ).fetchall()
            placement.append({"shard": i, "rows": dict(found)})
        print_table("rows per shard (direct)", ["shard", "rows"],
                    [[p["shard"], p["rows"]] for p in placement])  # fmt: skip
        timings = [
            row for t in tenants for row in _compare(cluster, store, t, ids[t], args.repeats)
        ]
    finally:
        store.close()
    print_table(
        "median latency, coordinator (postgres_fdw) vs the shard directly",
        ["call", "tenant", "coordinator p50 ms", "direct p50 ms", "ratio"],
        [[r["call"], r["tenant"], r["coordinator"]["p50_ms"], r["direct"]["p50_ms"],
          r["ratio_p50"]] for r in timings],
    )  # fmt: skip
    return {"label": "EMULATION with postgres_fdw hash partitions, not Citus",
            "records_per_tenant": args.records, "repeats": args.repeats,
            "plan_one_tenant": one, "plan_no_tenant": every, "placement": placement,
            "timings": timings}  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
