"""What every command module shares: identity options, argument types, opening the
store, and printing (``--json`` machine output or readable tables).

Commands stay thin: they turn options into SDK arguments with these helpers, call
``engram.Engram`` and print what it returned. Nothing here decides policy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engram.engram import Engram
from engram.scope import Context

__all__ = [
    "IDENTITY_OPTIONS",
    "Commands",
    "add_identity",
    "add_json",
    "command",
    "confirm",
    "context_of",
    "emit",
    "json_or_text",
    "moment",
    "opened",
    "pairs",
    "shorten",
    "table",
]

if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]
else:  # the class is generic only to type checkers
    Commands = argparse._SubParsersAction

# (option, Context field, environment fallback, help)
IDENTITY_OPTIONS: tuple[tuple[str, str, str | None, str], ...] = (
    ("--tenant", "tenant_id", "ENGRAM_TENANT", "tenant id (default: $ENGRAM_TENANT)"),
    ("--user", "user_id", "ENGRAM_USER", "user id (default: $ENGRAM_USER)"),
    ("--agent", "agent_id", None, "agent id: sees agent-bound memories of this agent"),
    ("--session", "session_id", None, "session id: adds the session:<id> scope"),
    ("--project", "project_id", None, "project id: adds the project:<id> scope"),
    ("--repository", "repository_id", None, "repository id: adds the repo:<id> scope"),
    ("--task", "task_id", None, "task id: adds the task:<id> scope"),
)


def command(
    commands: Commands, name: str, help_text: str, func: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """Register one command whose help is also its description (so ``--help`` on it
    says what it does), dispatching to ``func``."""
    parser = commands.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(func=func)
    return parser


def add_identity(parser: argparse.ArgumentParser) -> None:
    """The options that name who a command acts for. Tenant and user are required
    by the SDK (``IncompleteIdentity`` otherwise); the rest narrow the view."""
    group = parser.add_argument_group("identity")
    for option, dest, env, help_text in IDENTITY_OPTIONS:
        default = os.environ.get(env) if env else None
        group.add_argument(option, dest=dest, default=default, metavar="ID", help=help_text)


def context_of(args: argparse.Namespace, purpose: str | None = None) -> Context:
    """The ``Context`` the identity options name (empty strings count as missing)."""
    fields = {dest: getattr(args, dest, None) or None for _, dest, _, _ in IDENTITY_OPTIONS}
    return Context(**fields, purpose=purpose)


def add_json(parser: argparse.ArgumentParser) -> None:
    """``--json``: print one JSON document instead of readable text."""
    parser.add_argument("--json", action="store_true", help="print JSON (machine output)")


def moment(text: str) -> datetime:
    """An argparse type: an ISO 8601 time that names its timezone (Engram never
    guesses one), such as ``2026-07-16T09:30:00Z``."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 time (e.g. 2026-07-16T09:30:00Z)"
        ) from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no timezone; add one (e.g. Z or +02:00)")
    return value


def json_or_text(text: str) -> Any:
    """A value option: JSON when it parses (``3``, ``true``, ``{"a": 1}``), else the
    text itself (``--value Objective-C``)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


@contextmanager
def opened(args: argparse.Namespace) -> Iterator[Engram]:
    """The Engram the root options name (``--db``, ``--embedder``, ``--working``),
    closed when the command ends."""
    mem = Engram.open(args.db, embedder=args.embedder, working=args.working)
    try:
        yield mem
    finally:
        mem.close()


def emit(args: argparse.Namespace, data: Any, human: Callable[[], str]) -> None:
    """Print ``data`` as JSON under ``--json``, else the readable text ``human`` makes."""
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        print(human())


def shorten(text: object, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain text table: columns padded to their widest cell, the last one free."""
    cells = [[str(h) for h in headers], *[["" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers) - 1)]
    lines = []
    for row in cells:
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    return "\n".join(lines)


def confirm(question: str) -> bool:
    """Ask on stderr, read one line from stdin: True only for y or yes (end of input
    counts as no, so a script without ``--yes`` never confirms by accident)."""
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def pairs(mapping: Mapping[str, object]) -> str:
    """``key: value`` lines, keys aligned (for one record or one receipt)."""
    width = max((len(k) for k in mapping), default=0)
    return "\n".join(f"{k.ljust(width)}  {'' if v is None else v}" for k, v in mapping.items())
