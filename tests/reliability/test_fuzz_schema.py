"""API fuzzing (issue 15, item 3): schemathesis drives every operation of the REST
app's OpenAPI schema in process (ASGI), valid and invalid requests, with an admin
key, a plain key and a key limited to one user and one agent of tenant ``acme``.
No answer is a 5xx or violates the schema (status, media type, body), and no
request changes tenant ``globex``: its rows, read through the store (every table
with a ``tenant_id``) and its working memory, digest the same before and after.

Requests are steered towards the data: a generated memory id, trace id or
procedure id is often swapped for a real one of either tenant, and a user id for
``u1``, who has memories in both tenants. ``ENGRAM_FUZZ_EXAMPLES`` sets the
examples per operation and mode (default 2) and ``ENGRAM_FUZZ_MODES`` the generation
modes (default ``positive``: ``tests/surfaces/rest/test_rest_schema.py`` already runs
the negative mode in CI); the large run in docs/reliability/fuzz.md uses 100 examples
and both modes. (``schemathesis.pytest.from_fixture`` does not run under pytest 9, so the
test drives each operation's Hypothesis strategy itself, as
``tests/surfaces/rest/test_rest_schema.py`` does.)"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is a dev dependency")

from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from backends import table_rows  # noqa: E402
from engram import Context, Engram  # noqa: E402
from engram.surfaces.rest import KeyFile, KeyRing, create_app  # noqa: E402

CHECKS = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "2"))
ONLY = os.environ.get("ENGRAM_FUZZ_ONLY", "")  # fuzz only the paths holding this text
MODES = [GenerationMode(m) for m in os.environ.get("ENGRAM_FUZZ_MODES", "positive").split(",")]
TENANT, OTHER = "acme", "globex"
_ID_FIELDS = ("memory_id", "procedure_id", "trace_id")


@dataclass
class Seeded:
    """Ids of real things to steer requests towards, and the keys to fuzz with."""

    ids: list[str]
    keys: dict[str, str]


def _ctx(tenant: str, user: str = "u1") -> Context:
    return Context(tenant_id=tenant, user_id=user, agent_id="coder", session_id="s1")


def seed(mem: Engram, keys_path: Path) -> Seeded:
    """Memories, a trace and working memory in both tenants (the same user and agent
    ids in each); keys of ``acme`` only."""
    ids = []
    for tenant in (TENANT, OTHER):
        for n, text in enumerate(["I prefer tabs.", "The build uses Bazel.", "Deploys on Fri."]):
            result = mem.remember(_ctx(tenant, f"u{n % 2 + 1}"), f"{tenant}: {text}",
                                  type="procedure" if n == 2 else "fact")  # fmt: skip
            assert result.record is not None
            ids.append(result.record.id)
        ids.append(mem.recall(_ctx(tenant), "build").trace.trace_id)
        mem.working(_ctx(tenant)).set("step", {"tenant": tenant})
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
    rows.append(json.dumps([(i.key, i.value) for i in mem.working(_ctx(tenant)).list()]))
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


def steer(case: Any, seeded: Seeded, pick: Any) -> None:
    """Point a generated case at real data: ids of either tenant, user ``u1``."""
    real_id, user = pick
    for container in (case.path_parameters, case.query, case.body):
        if not isinstance(container, dict):
            continue
        for name in _ID_FIELDS:
            if name in container and real_id is not None:
                container[name] = real_id
        if "user_id" in container and user is not None:
            container["user_id"] = user


def fuzz(operation: Any, mode: GenerationMode, seeded: Seeded, statuses: Counter[int]) -> None:
    """``EXAMPLES`` generated cases of one operation, each with a random key of
    ``acme``; the first failure raises. ``statuses`` counts the answers."""
    picks = st.tuples(st.sampled_from([None, *seeded.ids]), st.sampled_from([None, "u1"]))
    keys = st.sampled_from(sorted(seeded.keys))

    @given(case=operation.as_strategy(generation_mode=mode), pick=picks, key=keys)
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    def run(case: Any, pick: Any, key: str) -> None:
        steer(case, seeded, pick)
        assume(sent_as_generated(case))
        headers = {"Authorization": f"Bearer {seeded.keys[key]}"}
        response = case.call(headers=headers)
        statuses[response.status_code] += 1
        case.validate_response(response, checks=CHECKS)

    run()


@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_fuzzed_requests_conform_and_never_touch_another_tenant(
    shared_url: str, open_mem: Callable[..., Engram], tmp_path: Path, mode: GenerationMode
) -> None:
    pytest.importorskip("fastapi", reason="the REST API needs the server extra")
    mem = open_mem(shared_url)
    seeded = seed(mem, tmp_path / "keys.json")
    before, covered = tenant_digest(mem, OTHER)
    assert covered > 10  # records, audit entries, traces, working memory
    app = create_app(mem, KeyRing(path=tmp_path / "keys.json"))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    operations = [op for op in operations if ONLY in op.path]
    failed, statuses = [], Counter[int]()
    started = time.perf_counter()
    for operation in operations:
        try:
            fuzz(operation, mode, seeded, statuses)
        except Unsatisfiable:  # no input to make invalid (GET /healthz)
            assert mode == GenerationMode.NEGATIVE, operation.path
        except (Exception, BaseExceptionGroup) as exc:  # every operation runs; all reported
            failed.append(f"{operation.method.upper()} {operation.path}: {exc}")
    after = tenant_digest(mem, OTHER)[0]
    record(shared_url, mode, len(operations), statuses, failed, before == after,
           time.perf_counter() - started)  # fmt: skip
    assert failed == [], "\n\n".join(failed)
    assert after == before
    assert mem.audit_verify().ok


def record(url: str, mode: GenerationMode, operations: int, statuses: Counter[int],
           failed: list[str], untouched: bool, seconds: float) -> None:  # fmt: skip
    """Print what the run sent and got; with ``ENGRAM_FUZZ_RESULTS`` set, also keep it
    in that JSON file (one entry per backend and mode: the large run's numbers)."""
    run = {"backend": url.split(":", 1)[0], "mode": mode.value, "examples": EXAMPLES,
           "operations": operations, "cases": sum(statuses.values()),
           "statuses": {str(k): v for k, v in sorted(statuses.items())},
           "server_errors": sum(v for k, v in statuses.items() if k >= 500),
           "failures": failed, "other_tenant_untouched": untouched,
           "seconds": round(seconds, 1)}  # fmt: skip
    print(json.dumps(run))
    path = os.environ.get("ENGRAM_FUZZ_RESULTS")
    if path:
        kept = json.loads(Path(path).read_text()) if Path(path).exists() else {}
        kept[f"{run['backend']}-{run['mode']}"] = run
        Path(path).write_text(json.dumps(kept, indent=2, sort_keys=True) + "\n")
