"""``engram working``: session or task state that expires by itself.

    engram working set KEY VALUE [--ttl SECONDS] [--kind task|session]
    engram working get KEY | list | delete KEY | clear

Each subcommand acts on the working memory of the task the identity options
name (``--task``), else of its session (``--session``); ``--kind`` chooses. The
store is the one ``--working`` names (a SQLite file beside a SQLite store by
default, or Redis). A key with no live item is ``NotFound`` for ``get`` (exit
5); ``delete`` of one reports that nothing was removed.
"""

from __future__ import annotations

import argparse
from typing import Any

from engram.cli.common import (
    Commands,
    add_identity,
    add_json,
    context_of,
    emit,
    json_or_text,
    opened,
    shorten,
    table,
)
from engram.errors import NotFound
from engram.working import WorkingItem

__all__ = ["add_command"]


def add_command(commands: Commands) -> None:
    """Register ``working`` and its subcommands."""
    text = "working memory: short-lived session and task state"
    working = commands.add_parser("working", help=text, description=text)
    actions = working.add_subparsers(dest="action", required=True, metavar="ACTION")
    put = _action(actions, "set", "store VALUE under KEY (replacing it)", _set)
    put.add_argument("key", metavar="KEY", help="the item's key")
    put.add_argument(
        "value", type=json_or_text, metavar="VALUE", help="JSON when it parses, else the text"
    )
    put.add_argument(
        "--ttl", type=float, metavar="SECONDS", help="time to live (default: from configuration)"
    )
    get = _action(actions, "get", "show the live item under KEY", _get)
    get.add_argument("key", metavar="KEY", help="the item's key")
    _action(actions, "list", "list the live items, most recently set first", _list)
    delete = _action(actions, "delete", "remove the item under KEY", _delete)
    delete.add_argument("key", metavar="KEY", help="the item's key")
    _action(actions, "clear", "remove every item of the scope", _clear)


def _action(actions: Commands, name: str, help_text: str, func: Any) -> argparse.ArgumentParser:
    parser = actions.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(func=func)
    parser.add_argument(
        "--kind",
        choices=("task", "session"),
        help="the task's or the session's memory (default: the task when "
        "--task is given, else the session)",
    )
    add_identity(parser)
    add_json(parser)
    return parser


def _item(item: WorkingItem) -> dict[str, Any]:
    return {
        "key": item.key,
        "value": item.value,
        "scope": item.scope.scope,
        "set_at": item.set_at.isoformat(),
        "expires_at": item.expires_at.isoformat(),
    }


def _line(item: WorkingItem) -> tuple[str, str, str]:
    return item.key, item.expires_at.isoformat(timespec="seconds"), shorten(item.value, 80)


def _set(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        item = mem.working(context_of(args), args.kind).set(args.key, args.value, args.ttl)
    emit(
        args,
        _item(item),
        lambda: (
            f"set {item.key} in {item.scope.scope} until "
            f"{item.expires_at.isoformat(timespec='seconds')}"
        ),
    )
    return 0


def _get(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        wm = mem.working(context_of(args), args.kind)
        item = wm.get(args.key)
    if item is None:
        raise NotFound(f"no live working item {args.key!r} in {wm.scope.scope}")
    emit(args, _item(item), lambda: table(("key", "expires", "value"), [_line(item)]))
    return 0


def _list(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        items = mem.working(context_of(args), args.kind).list()
    emit(
        args,
        [_item(i) for i in items],
        lambda: (
            table(("key", "expires", "value"), [_line(i) for i in items]) if items else "(none)"
        ),
    )
    return 0


def _delete(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        removed = mem.working(context_of(args), args.kind).delete(args.key)
    emit(
        args,
        {"key": args.key, "removed": removed},
        lambda: f"deleted {args.key}" if removed else f"no live item {args.key}",
    )
    return 0


def _clear(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        removed = mem.working(context_of(args), args.kind).clear()
    emit(args, {"removed": removed}, lambda: f"removed {removed} items")
    return 0
