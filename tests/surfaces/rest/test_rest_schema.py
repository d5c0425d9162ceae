"""Schemathesis fuzzes the OpenAPI schema in process (ASGI): generated requests, valid
and invalid, for every operation never make the server fail (no 5xx), and every
response conforms to the schema: a declared status, a declared media type, a body
that matches it.

(``schemathesis.pytest.from_fixture`` does not run under pytest 9, so the test
drives each operation's Hypothesis strategy itself.)"""

from __future__ import annotations

from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is a dev dependency")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from rest_support import Api  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
EXAMPLES = 6  # per operation and mode: 27 operations x 2 modes x 6


def fuzz(operation: Any, mode: GenerationMode, headers: dict[str, str]) -> None:
    """Run ``EXAMPLES`` generated cases of one operation; the first failure raises."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        case.call_and_validate(headers=headers, checks=CHECKS)

    run()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_conforms_to_its_schema(sqlite_api: Api, mode: GenerationMode) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", sqlite_api.app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    for operation in operations:
        try:
            fuzz(operation, mode, sqlite_api.headers("admin"))
        except Unsatisfiable:  # no input to make invalid (GET /healthz)
            assert mode == GenerationMode.NEGATIVE, operation.path
        except Exception as exc:
            exc.add_note(f"operation: {operation.method.upper()} {operation.path}")
            raise
