"""What the API fuzzers share (``test_fuzz_schema.py``, ``test_fuzz_stateful.py``,
``test_fuzz_mcp.py``): the data seeded in two tenants, the keys of ``acme`` to fuzz
with, schemathesis' response checks, and the digest of every stored row of a tenant
that proves no request changed it.

The digest reads past the API and the contract: every row of every table that has a
``tenant_id`` column (records, vectors, audit, traces, counters, grants, tombstones,
...) plus the tenant's seeded working memory, serialised and hashed."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is a dev dependency")

from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from backends import table_rows  # noqa: E402
from engram import Context, Engram  # noqa: E402
from engram.surfaces.rest import KeyFile  # noqa: E402

__all__ = [
    "CHECKS",
    "OTHER",
    "TENANT",
    "Seeded",
    "ctx",
    "one_of",
    "seed",
    "sent_as_generated",
    "tenant_digest",
]

CHECKS = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
TENANT, OTHER = "acme", "globex"


@dataclass
class Seeded:
    """Ids of real things to steer requests towards, and the keys to fuzz with."""

    ids: list[str]
    keys: dict[str, str]


def ctx(tenant: str, user: str = "u1") -> Context:
    """The seeding identity of ``tenant`` (agent ``coder``, session ``s1``)."""
    return Context(tenant_id=tenant, user_id=user, agent_id="coder", session_id="s1")


def seed(mem: Engram, keys_path: Path) -> Seeded:
    """Memories, a trace and working memory in both tenants (the same user and agent
    ids in each); keys of ``acme`` only: admin, plain, and limited to ``u1``/``coder``."""
    ids = []
    for tenant in (TENANT, OTHER):
        for n, text in enumerate(["I prefer tabs.", "The build uses Bazel.", "Deploys on Fri."]):
            result = mem.remember(ctx(tenant, f"u{n % 2 + 1}"), f"{tenant}: {text}",
                                  type="procedure" if n == 2 else "fact")  # fmt: skip
            assert result.record is not None
            ids.append(result.record.id)
        ids.append(mem.recall(ctx(tenant), "build").trace.trace_id)
        mem.working(ctx(tenant)).set("step", {"tenant": tenant})
    file = KeyFile(keys_path)
    keys = {
        "admin": file.create(TENANT, admin=True)[1],
        "user": file.create(TENANT)[1],
        "scoped": file.create(TENANT, users=["u1"], agents=["coder"])[1],
    }
    return Seeded(ids, keys)


def _tables(store: Any) -> list[str]:
    """The store's tables that have a ``tenant_id`` column."""
    from engram.store.sqlite import SQLiteStore

    if isinstance(store, SQLiteStore):
        names = [r["name"] for r in store._rows(("SELECT name FROM sqlite_master"
                                                 " WHERE type = 'table'", {}))]  # fmt: skip
        return [n for n in names
                if any(c["name"] == "tenant_id"
                       for c in store._rows((f"PRAGMA table_info({n})", {})))]  # fmt: skip
    with store.connection("a test read") as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.columns"
            " WHERE column_name = 'tenant_id' AND table_schema = 'public'"
        )
        return sorted({row[0] for row in rows.fetchall()})


def tenant_digest(mem: Engram, tenant: str) -> tuple[str, int]:
    """A digest of every stored row of ``tenant`` (through the store, past the
    contract) and of its seeded working memory; and how many rows it covers."""
    mem.flush()
    rows = []
    for table in _tables(mem.store):
        found = [r for r in table_rows(mem.store, table) if r["tenant_id"] == tenant]
        rows += sorted(json.dumps([table, r], sort_keys=True, default=str) for r in found)
    rows.append(json.dumps([(i.key, i.value) for i in mem.working(ctx(tenant)).list()]))
    return hashlib.sha256("\n".join(rows).encode()).hexdigest(), len(rows)


def sent_as_generated(case: Any) -> bool:
    """Whether the HTTP client sends this case's path as generated. A URL client
    removes dot segments (a working-memory key ``..`` or ``x/../..`` becomes another
    path, ``/v1/``, which has no route) and drops tab, CR and LF (WHATWG URL
    parsing), so such a case would test another request than the one generated."""
    for value in case.path_parameters.values():
        text = str(value)
        if any(seg in (".", "..") for seg in text.split("/")) or any(c in text for c in "\t\r\n"):
            return False
    return True


def one_of(pool: list[str]) -> st.SearchStrategy[str]:
    """An element of ``pool``, a list that grows as the run goes (calls add the ids
    they wrote): drawn as an index of fixed bounds, so the draws Hypothesis records
    keep their shape when the list has grown (``sampled_from`` would read as flaky)."""
    return st.integers(0, 2**16).map(lambda i: pool[i % len(pool)])


def keep_run(run: dict[str, Any], name: str) -> None:
    """Print a fuzzing run's counts; with ``ENGRAM_FUZZ_RESULTS`` set, also keep them
    in that JSON file under ``name`` (the large runs of docs/reliability/fuzz.md)."""
    print(json.dumps(run))
    path = os.environ.get("ENGRAM_FUZZ_RESULTS")
    if path:
        kept = json.loads(Path(path).read_text()) if Path(path).exists() else {}
        kept[name] = run
        Path(path).write_text(json.dumps(kept, indent=2, sort_keys=True) + "\n")


def seeded_and_digested(mem: Engram, keys_path: Path) -> tuple[Seeded, str]:
    """``seed`` both tenants, then the digest of ``globex`` that no fuzzed call may
    change (records, audit entries, traces and working memory: more than 10 rows)."""
    seeded = seed(mem, keys_path)
    before, covered = tenant_digest(mem, OTHER)
    assert covered > 10
    return seeded, before
