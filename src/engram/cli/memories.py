"""``engram remember``, ``get``, ``list`` and ``history``: write one memory, read them back.

    engram remember --tenant T --user U "Use Objective-C for iOS." --type constraint
                    --scope repo:lunest-ios --key ios.language --value Objective-C
    engram get ID | list [--type T] [--status S ...] | history ID   (each with --json)

``remember`` takes every keyword argument of ``Engram.remember`` as an option;
the write path decides (ADD, CONFIRM, SUPERSEDE, DISPUTE, CONTEST or REJECT) and
the command prints the decision and its reason. A REJECT is an answer, not an
error: it exits 0 with the reason (as the SDK returns it).
"""

from __future__ import annotations

import argparse
from typing import Any

from engram.cli.common import (
    Commands,
    add_identity,
    add_json,
    command,
    context_of,
    emit,
    json_or_text,
    moment,
    opened,
    pairs,
    shorten,
    table,
)
from engram.types import Authority, Record, Retention, Sensitivity, SourceKind, Status, WriteResult

__all__ = ["add_command", "record_rows", "written"]

_CONTENT_WIDTH = 70


def add_command(commands: Commands) -> None:
    """Register ``remember``, ``get``, ``list`` and ``history``."""
    _add_remember(commands)
    get = command(commands, "get", "show one memory by id", _get)
    get.add_argument("memory_id", metavar="ID", help="the memory's id")
    listing = command(commands, "list", "list visible memories, newest first", _list)
    listing.add_argument("--type", help="only this memory type (e.g. preference)")
    listing.add_argument(
        "--status",
        action="append",
        metavar="STATUS",
        choices=[*(s.value for s in Status if s.value != "deleted"), "all"],
        help="only this status (repeatable; 'all' for every status; default: active)",
    )
    listing.add_argument("--limit", type=int, default=100, help="at most this many (1-10000)")
    listing.add_argument("--offset", type=int, default=0, help="skip this many first")
    history = command(
        commands, "history", "show the version chain through a memory, oldest first", _history
    )
    history.add_argument("memory_id", metavar="ID", help="any version's id")
    for parser in (get, listing, history):
        add_identity(parser)
        add_json(parser)


def _add_remember(commands: Commands) -> None:
    parser = command(
        commands,
        "remember",
        "propose one memory; the write path decides whether and how it is stored",
        _remember,
    )
    parser.add_argument("content", help="the text an agent may see")
    parser.add_argument("--type", help="memory type: preference, constraint, fact, episode, ...")
    parser.add_argument(
        "--scope", help="user (default), project:<id>, repo:<id>, task:<id>, session:<id>"
    )
    parser.add_argument("--key", help="a stable key for exact lookup and conflicts")
    parser.add_argument(
        "--value", type=json_or_text, help="the key's value: JSON when it parses, else the text"
    )
    parser.add_argument(
        "--authority",
        choices=[a.value for a in Authority],
        help="who stated it (default: from the source kind)",
    )
    parser.add_argument("--confidence", type=float, help="0 to 1 (default 1)")
    parser.add_argument("--valid-from", type=moment, metavar="TIME", help="ISO 8601, with zone")
    parser.add_argument("--valid-to", type=moment, metavar="TIME", help="ISO 8601, with zone")
    parser.add_argument(
        "--observed-at", type=moment, metavar="TIME", help="when it was observed (default: now)"
    )
    parser.add_argument(
        "--source-kind",
        choices=[k.value for k in SourceKind],
        help="where it came from (default: conversation)",
    )
    parser.add_argument("--source-ref", metavar="REF", help="a pointer: a message id, a digest")
    parser.add_argument(
        "--derived-from", action="append", metavar="ID", help="an id it was made from (repeatable)"
    )
    parser.add_argument(
        "--sensitivity", choices=[s.value for s in Sensitivity], help="default: low"
    )
    parser.add_argument(
        "--consent-basis", metavar="BASIS", help="needed for sensitive or personal data"
    )
    parser.add_argument(
        "--retention",
        choices=[r.value for r in Retention],
        help="how long it is kept (default: from its type)",
    )
    parser.add_argument("--importance", type=float, help="0 to 1 (default 0.5)")
    parser.add_argument("--purpose", help="the purpose it is stored for")
    parser.add_argument(
        "--private", action="store_true", default=None, help="keep it with the agent that wrote it"
    )
    parser.add_argument(
        "--agent-scope",
        choices=("user", "agent"),
        help="bind it to the agent, or to every agent of the user",
    )
    parser.add_argument("--now", type=moment, metavar="TIME", help="the write's clock (ISO 8601)")
    add_identity(parser)
    add_json(parser)


_PLAIN = (
    "type",
    "scope",
    "key",
    "value",
    "authority",
    "confidence",
    "valid_from",
    "valid_to",
    "observed_at",
    "sensitivity",
    "consent_basis",
    "retention",
    "importance",
    "purpose",
    "private",
    "agent_scope",
)


def remember_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The ``remember`` keyword arguments the options name (unset ones left out, so
    the SDK's defaults apply)."""
    fields = {name: getattr(args, name) for name in _PLAIN if getattr(args, name) is not None}
    if args.source_kind or args.source_ref or args.derived_from:
        fields["source"] = {
            "kind": args.source_kind or "conversation",
            "ref": args.source_ref,
            "derived_from": list(args.derived_from or []),
        }
    return fields


def _remember(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        result = mem.remember(context_of(args), args.content, now=args.now, **remember_fields(args))
    emit(args, written(result), lambda: _decision(result))
    return 0


def written(result: WriteResult) -> dict[str, Any]:
    """A write result as JSON: the decision, its reason and the record it left."""
    return {
        "operation": result.operation.value,
        "reason": result.reason,
        "id": result.record.id if result.record is not None else None,
        "record": result.record.to_dict() if result.record is not None else None,
        "superseded": list(result.superseded),
        "related": list(result.related),
        "passages": list(result.passages),
    }


def _decision(result: WriteResult) -> str:
    head = f"{result.operation.value:9} {result.record.id if result.record else '-'}"
    lines = [f"{head}  ({result.reason})"]
    if result.superseded:
        lines.append(f"superseded: {', '.join(result.superseded)}")
    if result.related:
        lines.append(f"related:    {', '.join(result.related)}")
    if result.passages:
        lines.append(f"passages:   {len(result.passages)}")
    return "\n".join(lines)


def _get(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        record = mem.get(context_of(args), args.memory_id)
    emit(args, record.to_dict(), lambda: pairs(_shown(record)))
    return 0


def _shown(record: Record) -> dict[str, object]:
    every = record.to_dict()
    every.pop("content_hash", None)
    every["source"] = ", ".join(f"{k}={v}" for k, v in every["source"].items() if v)
    return every


def _list(args: argparse.Namespace) -> int:
    status: str | list[str] | None = args.status or "active"
    if isinstance(status, list) and "all" in status:
        status = None
    with opened(args) as mem:
        records = mem.list(
            context_of(args), type=args.type, status=status, limit=args.limit, offset=args.offset
        )
    emit(args, [r.to_dict() for r in records], lambda: record_rows(records) or "(none)")
    return 0


def record_rows(records: list[Record]) -> str:
    """Records as a table: id, type, scope, status, version, content."""
    rows = [
        (r.id, r.type, r.scope, r.status.value, r.version, shorten(r.content, _CONTENT_WIDTH))
        for r in records
    ]
    return table(("id", "type", "scope", "status", "v", "content"), rows) if rows else ""


def _history(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        versions = mem.history(context_of(args), args.memory_id)
    emit(args, [r.to_dict() for r in versions], lambda: record_rows(versions))
    return 0
