"""The export file: versioned JSON Lines, written and read (docs/export-format.md).

Line 1 is a header naming the format, its version and the subject; each further
line is one record version exactly as ``Record.to_dict`` gives it (history and
provenance included). ``write`` writes a path atomically (a temporary file
renamed into place), so a failed export leaves no partial file. ``read``
refuses anything it cannot vouch for, before a single row reaches the import:
a file that is not an Engram export, a version it does not know (naming it),
a field it does not know or a field missing, a row count that differs from the
header's (a truncated file), a line that is not one JSON object (duplicate
keys and NaN included). ``check`` then holds every row to the header: the same
tenant and user, the header's agent or none, Engram ids in every id field, no
id twice, a content hash matching the content, and ``supersedes`` links that
agree with the versions they name. The write path's own checks
(``import_rows``) follow in ``Engram.import_jsonl``.

The CLI calls ``export_file`` and ``import_file`` (through the facade's
``export_jsonl`` / ``import_jsonl``); nothing here touches a store.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, cast

from engram import limits
from engram.clock import require_aware
from engram.errors import EngramError, Forbidden, InvalidArgument
from engram.scope import GLOBAL, Context, Scope, resolve
from engram.write.proposal import content_hash

__all__ = [
    "FORMAT",
    "HEADER_FIELDS",
    "RECORD_FIELDS",
    "VERSION",
    "Header",
    "check",
    "read",
    "write",
]

FORMAT = "engram-export"
VERSION = 1
HEADER_FIELDS = ("format", "version", "exported_at", "tenant_id", "user_id", "agent_id",
                 "records")  # fmt: skip
# Version 1's record fields, in line order: ``Record.to_dict``. A change to the record
# model changes the format, so it needs a new version (docs/export-format.md).
RECORD_FIELDS = (
    "id", "tenant_id", "user_id", "agent_id", "scope", "tier", "type", "key", "value",
    "content", "authority", "confidence", "source", "observed_at", "valid_from", "valid_to",
    "created_at", "updated_at", "status", "version", "supersedes", "superseded_by",
    "sensitivity", "purpose", "consent_basis", "retention", "expires_at", "importance",
    "access_count", "last_accessed_at", "private", "embedding_model", "content_hash",
    "contested_with",
)  # fmt: skip
MAX_LINE_CHARS = 8 * 1024 * 1024  # a record of 1 MiB content, escaped, fits
_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
_ID_FIELDS = ("id", "supersedes", "superseded_by", "contested_with")

Target = str | os.PathLike[str] | IO[str]
Source = str | os.PathLike[str] | IO[str] | IO[bytes]


@dataclass(frozen=True, slots=True)
class Header:
    """Line 1 of an export: what the file is and whose memories it holds."""

    exported_at: datetime
    tenant_id: str
    user_id: str
    agent_id: str | None
    records: int
    format: str = FORMAT
    version: int = VERSION

    @classmethod
    def of(cls, scope: Scope, at: datetime, records: int) -> Header:
        """The header of an export of ``records`` rows made under ``scope``."""
        return cls(at, scope.tenant_id, scope.user_id, scope.agent_id, records)

    def to_dict(self) -> dict[str, Any]:
        """The header line's fields, in ``HEADER_FIELDS`` order."""
        values = {**dataclasses.asdict(self), "exported_at": self.exported_at.isoformat()}
        return {name: values[name] for name in HEADER_FIELDS}


# ------------------------------------------------------------------ writing
def _line(value: Mapping[str, Any]) -> str:
    """One JSON object on one line (JSON escapes every line break inside strings)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def write(target: Target, header: Header, rows: Sequence[Mapping[str, Any]]) -> int:
    """Write ``header`` and ``rows`` to a path (atomically) or an open text file; the
    number of record lines written."""
    if header.records != len(rows):
        raise InvalidArgument(f"the header announces {header.records} records, not {len(rows)}")
    lines = [_line(header.to_dict()), *(_line(row) for row in rows)]
    if hasattr(target, "write"):
        cast(IO[str], target).writelines(lines)
        return len(rows)
    path = Path(_path(target))
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    except OSError as exc:
        raise InvalidArgument(f"cannot write an export at {limits.shown(str(path))}: "
                              f"{exc.strerror}") from None  # fmt: skip
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.writelines(lines)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return len(rows)


def _path(value: object) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise InvalidArgument(
            f"expected a path or an open file, got {type(value).__name__}"
        )  # fmt: skip
    text = os.fspath(value)
    if not isinstance(text, str) or not text:
        raise InvalidArgument("the path must be a non-empty string")
    return text


# ------------------------------------------------------------------ reading
@contextmanager
def _opened(source: Source) -> Iterator[Iterable[str | bytes]]:
    if hasattr(source, "readline"):
        yield cast(Iterable[str | bytes], source)
        return
    path = _path(source)
    if not Path(path).is_file():
        raise InvalidArgument(f"no export file at {limits.shown(path)}")
    try:
        handle = open(path, "rb")  # noqa: SIM115 - lines end at b"\n" only, decoded one by one
    except OSError as exc:
        raise InvalidArgument(f"cannot read {limits.shown(path)}: {exc.strerror}") from None
    with handle:
        yield handle


def _lines(handle: Iterable[str | bytes]) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line; bytes decoded as UTF-8."""
    for number, raw in enumerate(handle, start=1):
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError:
            raise InvalidArgument(f"line {number} is not UTF-8 text") from None
        if len(text) > MAX_LINE_CHARS:
            raise InvalidArgument(f"line {number} is over {MAX_LINE_CHARS} characters")
        if text.strip():
            yield number, text


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InvalidArgument(f"field {limits.shown(key)} appears twice")
        out[key] = value
    return out


def _refuse_constant(name: str) -> Any:
    raise InvalidArgument(f"{name} is not a JSON number")


def _object(number: int, text: str) -> dict[str, Any]:
    """One line as a JSON object; any problem names the line."""
    try:
        value = json.loads(text, object_pairs_hook=_unique, parse_constant=_refuse_constant)
    except EngramError as exc:
        raise InvalidArgument(f"line {number}: {exc}") from None
    except (ValueError, RecursionError):
        raise InvalidArgument(f"line {number} is not valid JSON") from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"line {number} must be a JSON object")
    return value


def _fields(where: str, row: Mapping[str, Any], names: Sequence[str]) -> None:
    missing, unknown = set(names) - set(row), set(row) - set(names)
    if unknown:
        raise InvalidArgument(f"{where} has unknown fields {sorted(unknown)}")
    if missing:
        raise InvalidArgument(f"{where} lacks fields {sorted(missing)}")


def _header(number: int, text: str) -> Header:
    value = _object(number, text)
    if value.get("format") != FORMAT:
        raise InvalidArgument(f"not an Engram export: line 1 must be a header with format "
                              f"{FORMAT!r}")  # fmt: skip
    version = value.get("version")
    if version != VERSION or isinstance(version, bool):
        raise InvalidArgument(f"export format version {limits.shown(version)} is not supported: "
                              f"this Engram reads version {VERSION}")  # fmt: skip
    _fields("the header", value, HEADER_FIELDS)
    records = value["records"]
    if isinstance(records, bool) or not isinstance(records, int) or records < 0:
        raise InvalidArgument("the header's records must be a non-negative integer")
    try:
        subject = resolve(Context(value["tenant_id"], value["user_id"], value["agent_id"]))
    except EngramError as exc:
        raise InvalidArgument(f"the header's subject is not valid: {exc}") from None
    return Header(_moment(value["exported_at"]), subject.tenant_id, subject.user_id,
                  subject.agent_id, records)  # fmt: skip


def _moment(raw: object) -> datetime:
    if not isinstance(raw, str) or len(raw) > 64:
        raise InvalidArgument("the header's exported_at must be an ISO 8601 time")
    try:
        return require_aware(datetime.fromisoformat(raw), "exported_at")
    except ValueError:
        raise InvalidArgument("the header's exported_at must be an ISO 8601 time") from None


def read(source: Source) -> tuple[Header, list[dict[str, Any]]]:
    """The header and the record rows of an export (path or open file), every line
    checked for shape (see the module); nothing is written anywhere."""
    with _opened(source) as handle:
        lines = _lines(handle)
        first = next(lines, None)
        if first is None:
            raise InvalidArgument("the export is empty: line 1 must be its header")
        header = _header(*first)
        rows = []
        for number, text in lines:
            row = _object(number, text)
            _fields(f"line {number}", row, RECORD_FIELDS)
            rows.append(row)
    if len(rows) != header.records:
        raise InvalidArgument(f"the header announces {header.records} records but the file "
                              f"holds {len(rows)} (truncated or edited?)")  # fmt: skip
    return header, rows


# ------------------------------------------------------------------ checking
def check(header: Header, rows: Sequence[Mapping[str, Any]], scope: Scope,
          rehome: bool = False) -> None:  # fmt: skip
    """Hold every row to the header, and the header to the importer: ``Forbidden``
    when the export is another subject's (unless ``rehome``) or a row belongs to
    a subject the header does not name; ``InvalidArgument`` for a forged id,
    content or link. The first problem raises, naming the row and its line."""
    subject = resolve(Context(header.tenant_id, header.user_id, header.agent_id))
    if not rehome and (subject.tenant_id, subject.user_id) != (scope.tenant_id, scope.user_id):
        raise Forbidden(
            f"this export holds the memories of tenant {subject.tenant_id!r} user "
            f"{subject.user_id!r}; import it under that identity (or pass rehome=True to "
            "take them over as the importing context's own)"
        )
    for index, row in enumerate(rows):
        _check_row(subject, index, row)
    _check_links(rows)


def _where(index: int) -> str:
    return f"import row {index} (line {index + 2})"


def _check_row(subject: Scope, index: int, row: Mapping[str, Any]) -> None:
    owner = (row.get("tenant_id"), row.get("user_id"))
    if owner != (subject.tenant_id, subject.user_id):
        raise Forbidden(f"{_where(index)} belongs to another tenant or user than the "
                        "export's header names")  # fmt: skip
    if row.get("agent_id") not in (None, subject.agent_id):
        raise Forbidden(f"{_where(index)} belongs to another agent than the header names")
    if row.get("scope") == GLOBAL:
        raise InvalidArgument(f"{_where(index)} is a global record; an export holds only the "
                              "user's own memories")  # fmt: skip
    try:
        _check_ids(row)
        content = limits.text(row.get("content"), "content")
    except EngramError as exc:
        raise InvalidArgument(f"{_where(index)}: {exc}") from None
    if row.get("content_hash") != content_hash(content):
        raise InvalidArgument(f"{_where(index)}: content_hash does not match the content "
                              "(edited after export?)")  # fmt: skip


def _check_ids(row: Mapping[str, Any]) -> None:
    source = row.get("source")
    derived = source.get("derived_from") if isinstance(source, Mapping) else None
    named = [(name, row.get(name)) for name in _ID_FIELDS]
    named += [("source.derived_from", i) for i in (derived if isinstance(derived, list) else [])]
    for name, value in named:
        if value is None and name != "id":
            continue
        if not isinstance(value, str) or not _ID.fullmatch(value):
            raise InvalidArgument(f"{name} {limits.shown(value)} is not an Engram record id")


def _check_links(rows: Sequence[Mapping[str, Any]]) -> None:
    """No id twice; a version that names its predecessor in the file is that
    predecessor's successor and has a higher version; a version with a successor
    is superseded."""
    by_id: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for index, row in enumerate(rows):
        first = by_id.setdefault(row["id"], (index, row))[0]
        if first != index:
            raise InvalidArgument(f"{_where(index)}: id repeats import row {first}")
    for index, row in enumerate(rows):
        if row.get("superseded_by") is not None and row.get("status") != "superseded":
            raise InvalidArgument(f"{_where(index)}: it names a successor but its status is "
                                  f"{limits.shown(row.get('status'))}")  # fmt: skip
        named = by_id.get(row.get("supersedes") or "")
        if named is None:
            continue
        where, before = named
        if before.get("superseded_by") != row["id"]:
            raise InvalidArgument(f"{_where(index)}: it supersedes import row {where}, which "
                                  "names another successor (a broken supersedes link)")  # fmt: skip
        if not _older(before.get("version"), row.get("version")):
            raise InvalidArgument(f"{_where(index)}: its version is not above that of import "
                                  f"row {where}, which it supersedes")  # fmt: skip


def _older(before: object, after: object) -> bool:
    if isinstance(before, bool) or isinstance(after, bool):
        return False
    return isinstance(before, int) and isinstance(after, int) and before < after
