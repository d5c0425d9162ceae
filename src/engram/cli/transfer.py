"""``engram export`` and ``engram import``: a user's memories with their history.

    engram export --tenant T --user U [--out FILE] [--format jsonl|json]
    engram import --tenant T --user U FILE|- [--format auto|jsonl|json] [--rehome]

The default form is the versioned JSON Lines export file (docs/export-format.md):
``Engram.export_jsonl`` writes it (a path atomically: a temporary file renamed
into place, so an interrupted export never leaves a truncated file) and
``Engram.import_jsonl`` checks it whole before writing anything (an unknown
version, a truncated or edited file is refused, naming the line). ``--format
json`` keeps the older form, a JSON array of the rows ``Engram.export``
returns, imported by ``Engram.import_records``. An import finds the form by
itself (an array starts with ``[``); either way every row passes the write path
in one transaction, a bad row rejects the whole import and nothing is written,
and importing the same export twice changes nothing.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from engram.cli.common import Commands, add_identity, add_json, command, context_of, emit, opened
from engram.cli.progress import Progress
from engram.errors import InvalidArgument
from engram.lifecycle.transfer import ImportReport

__all__ = ["add_command", "read_rows"]

_PEEK = 4096


def add_command(commands: Commands) -> None:
    """Register ``export`` and ``import``."""
    export = command(
        commands,
        "export",
        "write the user's memories with their history as the versioned JSON Lines export file",
        _export,
    )
    export.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout")
    export.add_argument(
        "--format",
        choices=("jsonl", "json"),
        default="jsonl",
        help="jsonl: the export file (default, docs/export-format.md); json: a JSON array of rows",
    )
    add_identity(export)
    imported = command(
        commands,
        "import",
        "import an export file (or a JSON array of rows) through the write path, all rows or none",
        _import,
    )
    imported.add_argument("file", metavar="FILE", help="the export to read; - for stdin")
    imported.add_argument(
        "--format",
        choices=("auto", "jsonl", "json"),
        default="auto",
        help="auto (default): a JSON array when the file starts with '[', else the export file",
    )
    imported.add_argument(
        "--rehome",
        action="store_true",
        help="take over an export file of another user as this identity's own memories "
        "(a JSON array always imports as the identity's own)",
    )
    add_identity(imported)
    add_json(imported)


def _export(args: argparse.Namespace) -> int:
    ctx = context_of(args)
    if args.format == "jsonl":
        with opened(args) as mem:
            report = mem.export_jsonl(ctx, sys.stdout if args.out is None else args.out)
        if args.out is not None:
            print(f"exported {report.records} memories to {args.out}", file=sys.stderr)
        return 0
    with opened(args) as mem:
        rows = mem.export(ctx)
    text = json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return 0
    target = Path(args.out)
    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise InvalidArgument(f"cannot write {args.out}: {exc.strerror or exc}") from None
    print(f"exported {len(rows)} memories to {args.out}", file=sys.stderr)
    return 0


def read_rows(source: str) -> list[Any]:
    """The JSON array in file ``source`` (``-``: stdin); ``InvalidArgument`` naming the
    problem when it cannot be read or is not an array."""
    return _rows(source, _read_text(source))


def _rows(source: str, text: str) -> list[Any]:
    try:
        rows = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"{source} is not JSON: {exc}") from None
    if not isinstance(rows, list):
        raise InvalidArgument(
            f"{source} must hold a JSON array of exported rows, got a JSON {type(rows).__name__}"
        )
    return rows


def _read_text(source: str) -> str:
    """The whole of ``source`` (``-``: stdin); ``InvalidArgument`` when it cannot be read."""
    try:
        return sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read {source}: {exc}") from None


def _is_array(source: str, text: str | None) -> bool:
    """Whether the export starts with ``[`` (a JSON array), from ``text`` or the file."""
    if text is None:
        try:
            with open(source, "rb") as handle:
                start = handle.read(_PEEK)
        except OSError as exc:
            raise InvalidArgument(f"cannot read {source}: {exc.strerror or exc}") from None
        return start.lstrip()[:1] == b"["
    return text.lstrip()[:1] == "["


def _import(args: argparse.Namespace) -> int:
    ctx = context_of(args)
    text = _read_text("-") if args.file == "-" else None
    form = args.format
    if form == "auto":
        form = "json" if _is_array(args.file, text) else "jsonl"
    if form == "json":  # rows of an array always become this identity's own
        rows = read_rows(args.file) if text is None else _rows(args.file, text)
        with opened(args) as mem, Progress(f"importing {len(rows)} rows"):
            report = mem.import_records(ctx, rows)
    else:
        source = io.StringIO(text) if text is not None else args.file
        with opened(args) as mem, Progress(f"importing {args.file}"):
            report = mem.import_jsonl(ctx, source, rehome=args.rehome)
    emit(args, _report(report), lambda: _summary(report))
    return 0


def _report(report: ImportReport) -> dict[str, Any]:
    return {
        "imported": report.imported,
        "skipped": [{"index": i, "reason": r} for i, r in report.skipped],
        "id_map": dict(report.id_map),
        "rows": [
            {"index": r.index, "operation": r.operation, "id": r.record_id, "reason": r.reason}
            for r in report.rows
        ],
    }


def _summary(report: ImportReport) -> str:
    counts = Counter(r.operation for r in report.rows)
    detail = ", ".join(f"{op} {n}" for op, n in sorted(counts.items()))
    return f"imported {report.imported} rows, skipped {len(report.skipped)}" + (
        f" ({detail})" if detail else ""
    )
