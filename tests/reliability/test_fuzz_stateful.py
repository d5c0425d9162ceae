"""Stateful API fuzzing (issue 15, item 3): sequences of REST calls in process (ASGI)
where later calls use what earlier ones returned (``fuzz_stateful_support``), with an
admin key, a plain key and a key limited to one user and one agent of tenant
``acme``. After every step: no 5xx, an answer the schema declares (status, media
type, body), and what the model knows holds; after every sequence: tenant
``globex``'s rows and working memory digest as before, and the audit chain verifies.

``ENGRAM_FUZZ_SEQUENCES`` (default 8) sets the sequences per backend and
``ENGRAM_FUZZ_STEPS`` (default 20) the most steps in one; ``ENGRAM_FUZZ_RESULTS``
keeps the counts in a JSON file (the large run in docs/reliability/fuzz.md)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is a dev dependency")
pytest.importorskip("fastapi", reason="the REST API needs the server extra")

from fuzz_api_support import OTHER, keep_run, seeded_and_digested, tenant_digest  # noqa: E402
from fuzz_stateful_machine import RestMachine  # noqa: E402
from fuzz_stateful_support import Env, ndjson_bodies  # noqa: E402
from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from engram import Engram  # noqa: E402
from engram.surfaces.rest import KeyRing, create_app  # noqa: E402

SEQUENCES = int(os.environ.get("ENGRAM_FUZZ_SEQUENCES", "8"))
STEPS = int(os.environ.get("ENGRAM_FUZZ_STEPS", "20"))
# No shrinking: the store outlives each sequence, so a replay meets other data (and
# Hypothesis would call that flaky); a failure is reported as it was found.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate)


def test_call_sequences_conform_and_never_touch_another_tenant(
    shared_url: str, open_mem: Callable[..., Engram], tmp_path: Path
) -> None:
    mem = open_mem(shared_url)
    seeded, before = seeded_and_digested(mem, tmp_path / "keys.json")
    app = create_app(mem, KeyRing(path=tmp_path / "keys.json"))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    ops = {op.label: op for op in (r.ok() for r in schema.get_all_operations())}
    env = Env(mem=mem, seeded=seeded, ops=ops, digest=before)
    machine = type("RestSequences", (RestMachine,), {"env": env})
    started = time.perf_counter()
    try:
        with ndjson_bodies():
            run_state_machine_as_test(machine, settings=settings(
                max_examples=SEQUENCES, stateful_step_count=STEPS, deadline=None,
                derandomize=True, database=None, suppress_health_check=list(HealthCheck),
                phases=PHASES, report_multiple_bugs=False))  # fmt: skip
    finally:
        record(shared_url, env, time.perf_counter() - started)
    assert env.steps >= SEQUENCES  # every sequence sent requests
    assert tenant_digest(mem, OTHER)[0] == before


def record(url: str, env: Env, seconds: float) -> None:
    """Print what the run sent and got; with ``ENGRAM_FUZZ_RESULTS`` set, also keep it
    in that JSON file, one entry per backend."""
    rules: dict[str, dict[str, int]] = {}
    for name, count in sorted(env.statuses.items()):
        rule, status = name.rsplit(" ", 1)
        rules.setdefault(rule, {})[status] = count
    run = {"backend": url.split(":", 1)[0], "sequences": env.examples, "steps": env.steps,
           "max_steps": STEPS, "rules": rules,
           "server_errors": sum(v for k, v in env.statuses.items() if k.endswith(("500", "503"))),
           "verdicts": dict(sorted(env.verdicts.items())), "forgotten": len(env.gone),
           "epochs": env.epoch, "seconds": round(seconds, 1)}  # fmt: skip
    keep_run(run, run["backend"])
