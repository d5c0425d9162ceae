"""Every error as ``application/problem+json`` (RFC 9457), through the one error table.

An SDK error gets its row from ``surfaces.errors.TABLE``; a failure of the
transport (no key, a body too large, malformed JSON, an unknown route, a method
not allowed) gets its row from ``surfaces.errors.PROTOCOL``. Each problem has
``type`` (``/problems/<slug>``, served by ``GET /problems/{slug}``), ``title``,
``status``, ``detail`` and ``instance`` (the request path); a validation
problem adds ``errors`` (where and what, never the rejected input); a partial
write (a batch larger than one chunk failing part-way) adds ``results``, the
write results of the items that committed, in input order. A 503 (the store busy
past its bound or unreachable, Redis unreachable, the embedder failing) carries
``Retry-After: 1``: nothing was written and the same request may simply be sent
again.

A field ``tenant_id`` in a body or query is never read: the API key decides the
tenant. Naming another tenant than the key's is 403; naming the key's own is
422 (the field is simply not accepted).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException

from engram.errors import EngramError, Forbidden, PartialWrite
from engram.surfaces.errors import PROTOCOL, TABLE, Outcome, outcome_for, protocol_outcome
from engram.surfaces.rest.auth import Unauthenticated, authenticate_late
from engram.surfaces.rest.ratelimit import RateLimited
from engram.surfaces.rest.views import write_view
from engram.types import WriteResult

__all__ = [
    "PROBLEM_MEDIA",
    "FieldError",
    "Problem",
    "install",
    "problem_response",
    "problems",
]

PROBLEM_MEDIA = "application/problem+json"
TYPE_PREFIX = "/problems/"
_REF = {"$ref": "#/components/schemas/Problem"}
UNAVAILABLE_RETRY_AFTER = "1"  # seconds a client waits before retrying a 503


class FieldError(BaseModel):
    """One invalid part of a request: where (``body.items.0.confidence``) and what."""

    model_config = ConfigDict(extra="forbid")
    loc: str
    msg: str
    type: str


class Problem(BaseModel):
    """An RFC 9457 problem document."""

    model_config = ConfigDict(extra="forbid")
    type: str
    title: str
    status: int
    detail: str
    instance: str
    errors: list[FieldError] | None = None
    results: list[dict[str, Any]] | None = None  # a partial write: the items that committed


def problem_response(
    outcome: Outcome, detail: str, instance: str, headers: Mapping[str, str] | None = None,
    errors: Sequence[FieldError] | None = None, results: list[dict[str, Any]] | None = None,
) -> JSONResponse:  # fmt: skip
    """A problem+json response for ``outcome``."""
    body: dict[str, Any] = {
        "type": TYPE_PREFIX + outcome.problem, "title": outcome.title,
        "status": outcome.http_status, "detail": detail, "instance": instance,
    }  # fmt: skip
    if errors is not None:
        body["errors"] = [error.model_dump() for error in errors]
    if results is not None:
        body["results"] = results
    return JSONResponse(body, outcome.http_status, dict(headers or {}), media_type=PROBLEM_MEDIA)


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` declaring a problem+json body for each status."""
    declared: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        rows = [row for row in catalogue().values() if row.http_status == status]
        titles = ", ".join(sorted({row.title for row in rows})) or protocol_outcome(status).title
        declared[status] = {"description": titles, "content": {PROBLEM_MEDIA: {"schema": _REF}}}
    return declared


def catalogue() -> dict[str, Outcome]:
    """Every problem type by its slug (``GET /problems/{slug}``)."""
    rows = [*TABLE.values(), *PROTOCOL.values()]
    return {row.problem: row for row in rows}


async def _engram_error(request: Request, exc: Exception) -> JSONResponse:
    committed = None
    if isinstance(exc, PartialWrite):  # say which items were written before the failure
        committed = [write_view(r) for r in exc.results if isinstance(r, WriteResult)]
    outcome = outcome_for(exc)
    # a busy or unreachable store, a failed embedder: nothing was written, try again soon
    headers = {"Retry-After": UNAVAILABLE_RETRY_AFTER} if outcome.http_status == 503 else None
    return problem_response(outcome, str(exc), request.url.path, headers, results=committed)


async def _unauthenticated(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Unauthenticated)
    return problem_response(PROTOCOL[401], exc.detail, request.url.path,
                            {"WWW-Authenticate": exc.challenge})  # fmt: skip


async def _rate_limited(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RateLimited)
    return problem_response(PROTOCOL[429], str(exc), request.url.path,
                            {"Retry-After": str(exc.retry_after)})  # fmt: skip


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    outcome = protocol_outcome(exc.status_code)
    detail = exc.detail if isinstance(exc.detail, str) else outcome.title
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no route {request.method} {request.url.path}; see /openapi.json"
    elif exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        detail = f"{request.method} is not allowed on {request.url.path}; allowed: {allowed}"
    return problem_response(outcome, detail, request.url.path, exc.headers)


async def _internal(request: Request, exc: Exception) -> JSONResponse:
    print(f"engram: internal error on {request.method} {request.url.path}: "
          f"{type(exc).__name__}", file=sys.stderr)  # fmt: skip
    return problem_response(PROTOCOL[500], "the server failed; nothing was changed by this "
                            "request unless its response said so", request.url.path)  # fmt: skip


def _where(loc: Sequence[object]) -> str:
    return ".".join(str(part) for part in loc)


def _field_errors(raw: Sequence[Any]) -> list[FieldError]:
    return [FieldError(loc=_where(e.get("loc", ())), msg=str(e.get("msg", "")),
                       type=str(e.get("type", ""))) for e in raw[:50]]  # fmt: skip


def _tenant_named(request: Request, raw: Sequence[Any]) -> JSONResponse | None:
    """The answer to a request carrying ``tenant_id`` (see the module notes)."""
    named = [e.get("input") for e in raw if e.get("type") == "extra_forbidden"
             and tuple(e.get("loc", ()))[-1:] == ("tenant_id",)]  # fmt: skip
    if not named:
        return None
    caller = getattr(request.state, "principal", None)
    if caller is not None and any(value != caller.tenant_id for value in named):
        detail = (f"this API key acts for tenant {caller.tenant_id!r} only; the request names "
                  "another tenant (the tenant is never taken from a request)")  # fmt: skip
        return problem_response(TABLE[Forbidden], detail, request.url.path)
    detail = "tenant_id is not accepted in a request: the API key decides the tenant"
    return problem_response(PROTOCOL[422], detail, request.url.path)


def _not_json(request: Request) -> bool:
    """Whether the request sent a body that is not declared JSON (a missing body is
    not: that is a 422 naming the body)."""
    declared = request.headers.get("content-type")
    if declared is None:
        sent = request.headers.get("content-length", "0") not in ("", "0")
        return sent or "transfer-encoding" in request.headers
    kind = declared.split(";", 1)[0].strip().lower()
    return not (kind == "application/json" or kind.endswith("+json"))


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    raw = list(exc.errors())
    path = request.url.path
    tenant = _tenant_named(request, raw)
    if tenant is not None:
        return tenant
    first = raw[0] if raw else {}
    if first.get("type") == "json_invalid":
        if path.startswith("/v1"):  # the key is judged before the body, as everywhere
            try:
                await authenticate_late(request)
            except Unauthenticated as exc:
                return await _unauthenticated(request, exc)
        reason = (first.get("ctx") or {}).get("error", "invalid JSON")
        return problem_response(PROTOCOL[400], f"the body is not valid JSON: {reason}", path)
    body_error = any(tuple(e.get("loc", ()))[:1] == ("body",) for e in raw)
    if body_error and _not_json(request):
        return problem_response(PROTOCOL[415], "send the body as JSON with "
                                "'Content-Type: application/json'", path)  # fmt: skip
    errors = _field_errors(raw)
    detail = "; ".join(f"{e.loc}: {e.msg}" for e in errors[:5]) or "the request is invalid"
    return problem_response(PROTOCOL[422], detail, path, errors=errors)


def install(app: FastAPI) -> None:
    """Register the handlers that turn every failure into a problem document."""
    app.add_exception_handler(EngramError, _engram_error)
    app.add_exception_handler(Unauthenticated, _unauthenticated)
    app.add_exception_handler(RateLimited, _rate_limited)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _internal)
