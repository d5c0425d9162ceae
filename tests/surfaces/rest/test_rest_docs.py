"""docs/rest.md lists every route the app serves and every problem type it can answer."""

from __future__ import annotations

import re
from pathlib import Path

from rest_support import Api

from engram.surfaces.rest.problems import catalogue

DOC = (Path(__file__).resolve().parents[3] / "docs" / "rest.md").read_text()


def test_the_route_table_is_the_apps(sqlite_api: Api) -> None:
    schema = sqlite_api.call("GET", "/openapi.json", None).json()
    served = {f"{method.upper()} {path}" for path, ops in schema["paths"].items() for method in ops}
    served.add("GET /openapi.json")
    documented = set(re.findall(r"^\| `([A-Z]+ /[^`]*)` \|", DOC, flags=re.M))
    documented = {re.sub(r"\{id\}", "{memory_id}", route) for route in documented}
    documented = {
        route.replace("/v1/traces/{memory_id}", "/v1/traces/{trace_id}") for route in documented
    }
    assert documented == served


def test_every_problem_type_is_documented() -> None:
    documented = set(re.findall(r"`/problems/([a-z-]+)`", DOC))
    assert documented == set(catalogue())
