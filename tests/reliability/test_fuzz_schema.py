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

import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is a dev dependency")

from fuzz_api_support import (  # noqa: E402
    CHECKS,
    OTHER,
    Seeded,
    keep_run,
    seeded_and_digested,
    sent_as_generated,
    tenant_digest,
)
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402

from engram import Engram  # noqa: E402
from engram.surfaces.rest import KeyRing, create_app  # noqa: E402

EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "2"))
ONLY = os.environ.get("ENGRAM_FUZZ_ONLY", "")  # fuzz only the paths holding this text
MODES = [GenerationMode(m) for m in os.environ.get("ENGRAM_FUZZ_MODES", "positive").split(",")]
_ID_FIELDS = ("memory_id", "procedure_id", "trace_id")


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
    seeded, before = seeded_and_digested(mem, tmp_path / "keys.json")
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
    keep_run(run, f"{run['backend']}-{run['mode']}")
