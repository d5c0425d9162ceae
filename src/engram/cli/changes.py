"""``engram correct``, ``retract``, ``expire``, ``forget`` and ``erase``: change or remove memories.

    engram correct ID "Use Swift for iOS." [--value Swift]
    engram retract ID [--reason TEXT] | expire ID | forget ID
    engram erase --tenant T --user U [--yes]

Each runs one SDK call, which decides inside the transaction that writes it (a
memory another writer changed first is ``Conflict``, exit 4). ``forget`` hard-
deletes a memory's chain and prints the receipt; ``erase`` removes everything of
one user (records, vectors, traces, working memory) after asking for
confirmation on the terminal, unless ``--yes``; an unconfirmed erasure changes
nothing and exits 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Mapping
from typing import Any

from engram.cli.common import (
    Commands,
    add_identity,
    add_json,
    command,
    confirm,
    context_of,
    emit,
    json_or_text,
    moment,
    opened,
    pairs,
)
from engram.cli.memories import written
from engram.errors import IncompleteIdentity
from engram.types import WriteResult

__all__ = ["add_command"]


def add_command(commands: Commands) -> None:
    """Register ``correct``, ``retract``, ``expire``, ``forget`` and ``erase``."""
    correct = command(
        commands,
        "correct",
        "replace a memory with a corrected version (the old one stays in its history)",
        _correct,
    )
    correct.add_argument("memory_id", metavar="ID", help="the memory to correct")
    correct.add_argument("content", help="the corrected text")
    correct.add_argument("--value", type=json_or_text, help="the corrected value (JSON or text)")
    retract = command(
        commands, "retract", "mark a memory wrong: kept in history, never recalled again", _retract
    )
    retract.add_argument("memory_id", metavar="ID", help="the memory to retract")
    retract.add_argument("--reason", default="retracted by the user", help="why it is wrong")
    expire = command(commands, "expire", "end a memory's validity now", _expire)
    expire.add_argument("memory_id", metavar="ID", help="the memory to expire")
    for parser in (correct, retract, expire):
        parser.add_argument("--now", type=moment, metavar="TIME", help="the change's clock")
    forget = command(
        commands,
        "forget",
        "hard-delete a memory, all its versions and the copies derived from them",
        _forget,
    )
    forget.add_argument("memory_id", metavar="ID", help="the memory to delete")
    erase = command(
        commands,
        "erase",
        "erase one user's every memory, vector, trace and working item (asks for confirmation)",
        _erase,
    )
    erase.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    for parser in (correct, retract, expire, forget, erase):
        add_identity(parser)
        add_json(parser)


def _changed(args: argparse.Namespace, result: WriteResult) -> int:
    emit(
        args,
        written(result),
        lambda: (
            f"{result.operation.value:9} "
            f"{result.record.id if result.record else '-'}  ({result.reason})"
        ),
    )
    return 0


def _correct(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        result = mem.correct(
            context_of(args), args.memory_id, args.content, value=args.value, now=args.now
        )
    return _changed(args, result)


def _retract(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        result = mem.retract(context_of(args), args.memory_id, args.reason, now=args.now)
    return _changed(args, result)


def _expire(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        result = mem.expire(context_of(args), args.memory_id, now=args.now)
    return _changed(args, result)


def _forget(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        receipt = mem.forget(context_of(args), args.memory_id)
    emit(args, _plain(receipt), lambda: pairs(_plain(receipt)))
    return 0 if receipt.verified else 1


def _erase(args: argparse.Namespace) -> int:
    ctx = context_of(args)
    if not ctx.tenant_id or not ctx.user_id:
        raise IncompleteIdentity("erase needs --tenant and --user (or ENGRAM_TENANT/ENGRAM_USER)")
    question = (
        f"Erase every memory, vector, trace and working item of user {ctx.user_id!r} "
        f"in tenant {ctx.tenant_id!r}? This cannot be undone."
    )
    if not args.yes and not confirm(question):
        print("engram: not confirmed; nothing was erased", file=sys.stderr)
        return 1
    with opened(args) as mem:
        receipt = mem.erase_subject(ctx.tenant_id, ctx.user_id)
    emit(args, _plain(receipt), lambda: pairs(_plain(receipt)))
    return 0 if receipt.verified else 1


def _plain(receipt: Any) -> dict[str, Any]:
    """A receipt dataclass as JSON-friendly fields (tuples as lists, mappings as dicts;
    not ``asdict``, which cannot copy a receipt's read-only ``counts``)."""
    fields = {f.name: getattr(receipt, f.name) for f in dataclasses.fields(receipt)}
    return {k: list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, Mapping) else v
            for k, v in fields.items()}  # fmt: skip
