"""``engram export`` and ``engram import``: a user's memories with their history, as JSON.

    engram export --tenant T --user U [--out FILE]     (a JSON array; stdout by default)
    engram import --tenant T --user U FILE|-           (the same array; - reads stdin)

Export writes the rows ``Engram.export`` returns (every status, version links
intact); with ``--out`` it writes a temporary file beside the target and renames
it, so an interrupted export never leaves a truncated file under the name.
Import passes every row through the write path in one transaction
(``Engram.import_records``): a bad row rejects the whole import, naming the
row, and nothing is written; importing the same export twice changes nothing.
"""

from __future__ import annotations

import argparse
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


def add_command(commands: Commands) -> None:
    """Register ``export`` and ``import``."""
    export = command(
        commands, "export", "write the user's memories with their history as a JSON array", _export
    )
    export.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout")
    add_identity(export)
    imported = command(
        commands,
        "import",
        "import an exported JSON array through the write path (all rows or none)",
        _import,
    )
    imported.add_argument("file", metavar="FILE", help="the export to read; - for stdin")
    add_identity(imported)
    add_json(imported)


def _export(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        rows = mem.export(context_of(args))
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
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read {source}: {exc}") from None
    try:
        rows = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"{source} is not JSON: {exc}") from None
    if not isinstance(rows, list):
        raise InvalidArgument(
            f"{source} must hold a JSON array of exported rows, got a JSON {type(rows).__name__}"
        )
    return rows


def _import(args: argparse.Namespace) -> int:
    rows = read_rows(args.file)
    with opened(args) as mem, Progress(f"importing {len(rows)} rows"):
        report = mem.import_records(context_of(args), rows)
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
