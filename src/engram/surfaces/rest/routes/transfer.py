"""Export and import of one user's memories with their history.

Two forms of each. JSON: ``GET /v1/export`` answers ``{"rows": [...]}`` and
``POST /v1/import`` takes ``{identity, "rows": [...]}`` back. The export file
(versioned JSON Lines, docs/export-format.md): ``GET /v1/export?format=jsonl``
streams it as ``application/x-ndjson``, and ``POST /v1/import`` with that content
type takes the file as its body, the identity in the query. The content type
decides which form an import is; the JSON form's refusals (400, 415, 422) are the
same as every other route's.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from engram.engram import Engram
from engram.errors import Forbidden, InvalidArgument
from engram.surfaces.principal import Principal
from engram.surfaces.rest.auth import Caller, Mem
from engram.surfaces.rest.lifecycle_schemas import ExportQuery, ImportQuery
from engram.surfaces.rest.problems import problems
from engram.surfaces.rest.schemas import ImportBody
from engram.surfaces.rest.views import ExportOut, ImportOut, import_view, reply

__all__ = ["IMPORT_BODY", "JSONL_TYPES", "NDJSON", "router"]

router = APIRouter(prefix="/v1", tags=["transfer"])
NDJSON = "application/x-ndjson"
JSONL_TYPES = frozenset({NDJSON, "application/jsonl"})
_CHUNK = 64 * 1024
_FILE = {"type": "string", "description": "an Engram export file (docs/export-format.md)"}
EXPORTED: dict[int | str, dict[str, Any]] = {
    200: {"description": "The export: JSON rows, or the JSON Lines file",
          "content": {NDJSON: {"schema": _FILE}}}}  # fmt: skip
IMPORT_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"$ref": "#/components/schemas/ImportBody"}},
    NDJSON: {"schema": _FILE}}}}  # fmt: skip


class _Lines(io.StringIO):
    """A text sink that keeps the lines written to it, to be sent as they are."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def write(self, text: str) -> int:
        self.lines.append(text)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:  # type: ignore[override]
        self.lines.extend(lines)

    def chunks(self) -> Iterator[bytes]:
        """The lines as UTF-8, about ``_CHUNK`` bytes a piece."""
        batch: list[str] = []
        size = 0
        for line in self.lines:
            batch.append(line)
            size += len(line)
            if size >= _CHUNK:
                yield "".join(batch).encode()
                batch, size = [], 0
        if batch:
            yield "".join(batch).encode()


@router.get("/export", response_model=ExportOut,
            responses={**problems(401, 403, 422, 500, 503), **EXPORTED})  # fmt: skip
def export(query: Annotated[ExportQuery, Query()], caller: Caller, mem: Mem) -> Response:
    """The caller's own memories in every status with version links, oldest first:
    ``{"rows": [...]}`` (the body ``POST /v1/import`` takes back), or with
    ``format=jsonl`` the versioned export file, streamed as ``application/x-ndjson``."""
    ctx = query.context(caller)
    if query.format == "json":
        return reply({"rows": mem.export(ctx)})
    sink = _Lines()
    report = mem.export_jsonl(ctx, sink)
    saved = f'attachment; filename="engram-export-{report.header.user_id}.jsonl"'
    return StreamingResponse(sink.chunks(), media_type=NDJSON,
                             headers={"Content-Disposition": saved})  # fmt: skip


def _same_tenant(caller: Principal, rows: list[dict[str, Any]]) -> None:
    """Rows may carry the exporting tenant (an export does); another tenant is 403."""
    for index, row in enumerate(rows):
        named = row.get("tenant_id")
        if named is not None and named != caller.tenant_id:
            raise Forbidden(f"import row {index} names another tenant; this API key acts for "
                            f"tenant {caller.tenant_id!r} only")  # fmt: skip


def _media(request: Request) -> str | None:
    declared = request.headers.get("content-type")
    return None if declared is None else declared.split(";", 1)[0].strip().lower()


def _json_body(raw: bytes, kind: str | None) -> ImportBody:
    """The JSON form's body, refused the way FastAPI refuses any route's body."""
    if kind is not None and not (kind == "application/json" or kind.endswith("+json")):
        raise HTTPException(415, "send the body as JSON ('Content-Type: application/json') "
                            f"or an export file ('Content-Type: {NDJSON}')")  # fmt: skip
    if not raw:
        raise RequestValidationError([{"type": "missing", "loc": ("body",),
                                       "msg": "Field required", "input": None}])  # fmt: skip
    try:
        value = json.loads(raw)
    except ValueError as exc:
        reason = getattr(exc, "msg", "invalid JSON")
        raise RequestValidationError([{"type": "json_invalid", "loc": ("body", 0),
                                       "msg": "JSON decode error", "input": {},
                                       "ctx": {"error": reason}}]) from None  # fmt: skip
    try:
        return ImportBody.model_validate(value)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def _import_rows(body: ImportBody, caller: Principal, mem: Engram) -> Response:
    ctx = body.context(caller)
    _same_tenant(caller, body.rows)
    return reply(import_view(mem.import_records(ctx, body.rows)))


def _file_tenant(caller: Principal, raw: bytes) -> None:
    """An export file of another tenant is 403, ``rehome`` or not: a key moves
    memories between users of its own tenant only. (A header that does not parse
    is left to the SDK, which names the problem.)"""
    first = next((line for line in raw.split(b"\n") if line.strip()), b"")
    try:
        header = json.loads(first)
    except ValueError:
        return
    if isinstance(header, dict) and header.get("tenant_id") not in (None, caller.tenant_id):
        raise Forbidden(f"this export file holds another tenant's memories; this API key acts "
                        f"for tenant {caller.tenant_id!r} only")  # fmt: skip


def _import_file(raw: bytes, query: ImportQuery, caller: Principal, mem: Engram) -> Response:
    ctx = query.context(caller)
    _file_tenant(caller, raw)
    report = mem.import_jsonl(ctx, io.BytesIO(raw), rehome=query.rehome)
    return reply(import_view(report))


@router.post("/import", response_model=ImportOut, openapi_extra=IMPORT_BODY,
             responses=problems(400, 401, 403, 413, 415, 422, 500, 503))  # fmt: skip
async def import_records(request: Request, query: Annotated[ImportQuery, Query()],
                         caller: Caller, mem: Mem) -> Response:  # fmt: skip
    """Import memories under this identity through the write path (ids re-issued,
    links kept); idempotent; a bad row rejects the import, nothing stored. A JSON body
    holds exported rows; an ``application/x-ndjson`` body is an export file, checked
    whole first (an unknown version, a truncated or edited file is 422), the identity
    in the query (``rehome=true`` takes over another user's export)."""
    kind = _media(request)
    raw = await request.body()
    if kind in JSONL_TYPES:
        return await run_in_threadpool(_import_file, raw, query, caller, mem)
    body = _json_body(raw, kind)
    if query.named():
        raise InvalidArgument("a JSON import names its identity in the body; query "
                              f"parameters are for an export file ({NDJSON})")  # fmt: skip
    return await run_in_threadpool(_import_rows, body, caller, mem)
