"""``engram share``, ``engram grants`` and ``engram outcome``: sharing between agents and
procedure outcomes (docs/lifecycle.md).

    engram share ID... --to AGENT --tenant T --user U --agent A      (or --query TEXT)
    engram grants list --tenant T
    engram grants add --tenant T --from A --to B --type fact [--type procedure ...]
    engram grants revoke --tenant T --from A --to B [--type fact ...]   (no --type: all)
    engram outcome ID --success|--failure [--reward R] --tenant T --user U [--agent A]

``share`` copies memories of ``--agent`` (the sharing agent) to ``--to`` under a
grant; ``grants`` are the tenant administrator's (they open only the store, so a
server store needs no ``--working`` for them); ``outcome`` counts one success or
failure of the caller's own procedure. Each is one SDK call; ``--json`` prints
what it returned.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from engram.cli.common import (
    Commands,
    add_identity,
    add_json,
    command,
    context_of,
    emit,
    moment,
    opened,
    table,
)
from engram.embed import create_embedder
from engram.engram import Engram
from engram.errors import InvalidArgument
from engram.lifecycle.share import ShareReport
from engram.store.open import open_store
from engram.types import ShareGrant

__all__ = ["add_command"]


def add_command(commands: Commands) -> None:
    """Register ``share``, ``grants list|add|revoke`` and ``outcome``."""
    _add_share(commands)
    _add_grants(commands)
    _add_outcome(commands)


def _add_share(commands: Commands) -> None:
    share = command(commands, "share", "copy memories of --agent to another agent of the same "
                    "user, redacted, under a grant", _share)  # fmt: skip
    share.add_argument("memory_ids", nargs="*", metavar="ID", help="the memories to share")
    share.add_argument("--query", help="share what a recall of QUERY selects instead of IDs")
    share.add_argument("--to", dest="to_agent", required=True, metavar="AGENT",
                       help="the agent that receives the copies")  # fmt: skip
    share.add_argument("--now", type=moment, help="the share's clock (ISO 8601 with a zone)")
    add_identity(share)
    add_json(share)


def _tenant(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", dest="tenant_id", default=os.environ.get("ENGRAM_TENANT"),
                        metavar="ID", help="tenant id (default: $ENGRAM_TENANT)")  # fmt: skip


def _pair(parser: argparse.ArgumentParser, types_help: str, required: bool) -> None:
    _tenant(parser)
    parser.add_argument("--from", dest="from_agent", required=True, metavar="AGENT",
                        help="the agent whose memories are shared")  # fmt: skip
    parser.add_argument("--to", dest="to_agent", required=True, metavar="AGENT",
                        help="the agent that receives the copies")  # fmt: skip
    parser.add_argument("--type", dest="types", action="append", required=required,
                        metavar="TYPE", help=types_help)  # fmt: skip
    add_json(parser)


def _add_grants(commands: Commands) -> None:
    text = "share grants between agents of a tenant (administrative)"
    grants = commands.add_parser("grants", help=text, description=text)
    actions = grants.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="every grant of the tenant",
                                 description="every share grant of the tenant")  # fmt: skip
    _tenant(listing)
    add_json(listing)
    listing.set_defaults(func=_grants_list)
    text = "let --from share its memories of each --type with --to"
    add = actions.add_parser("add", help=text, description=text)
    _pair(add, "a memory type to grant (repeat for several)", required=True)
    add.set_defaults(func=_grants_add)
    text = "withdraw grants and delete the copies made under them"
    revoke = actions.add_parser("revoke", help=text, description=text)
    _pair(revoke, "a memory type to withdraw (repeat; default: every type)", required=False)
    revoke.set_defaults(func=_grants_revoke)


def _add_outcome(commands: Commands) -> None:
    outcome = command(commands, "outcome", "count one success or failure of a procedure "
                      "(recall ranks procedures by their success rate)", _outcome)  # fmt: skip
    outcome.add_argument("memory_id", metavar="ID", help="the procedure")
    result = outcome.add_mutually_exclusive_group(required=True)
    result.add_argument("--success", dest="success", action="store_true",
                        help="the procedure worked")  # fmt: skip
    result.add_argument("--failure", dest="success", action="store_false",
                        help="the procedure failed")  # fmt: skip
    outcome.add_argument("--reward", type=float, help="a reward between -1 and 1")
    outcome.add_argument("--now", type=moment, help="the outcome's clock (ISO 8601 with a zone)")
    add_identity(outcome)
    add_json(outcome)


# ------------------------------------------------------------------ share
def _share(args: argparse.Namespace) -> int:
    if bool(args.memory_ids) == (args.query is not None):
        raise InvalidArgument("name the memories to share as IDs, or give --query, not both")
    target: str | list[str] = args.query if args.query is not None else args.memory_ids
    with opened(args) as mem:
        report = mem.share(context_of(args), target, args.to_agent, now=args.now)
    emit(args, _share_data(report), lambda: _share_text(report))
    return 0


def _share_data(report: ShareReport) -> dict[str, Any]:
    items = [{**dataclasses.asdict(i), "redacted": list(i.redacted)} for i in report.items]
    return {"tenant_id": report.tenant_id, "from_agent": report.from_agent,
            "to_agent": report.to_agent, "items": items, "shared": list(report.shared)}  # fmt: skip


def _share_text(report: ShareReport) -> str:
    head = (f"shared {len(report.shared)} of {len(report.items)} memories from agent "
            f"{report.from_agent} to agent {report.to_agent}")  # fmt: skip
    rows = [(i.memory_id, i.outcome, i.copy_id or "", i.code, i.reason) for i in report.items]
    if not rows:
        return head
    return head + "\n" + table(("memory", "outcome", "copy", "code", "reason"), rows)


# ------------------------------------------------------------------ grants
@contextmanager
def _store_only(args: argparse.Namespace) -> Iterator[Engram]:
    """An Engram over the store alone (grants touch no working memory)."""
    mem = Engram(open_store(args.db), create_embedder(args.embedder))
    try:
        yield mem
    finally:
        mem.close()


def _grant_rows(grants: Sequence[ShareGrant]) -> list[dict[str, Any]]:
    return [{"tenant_id": g.tenant_id, "from_agent": g.from_agent, "to_agent": g.to_agent,
             "type": g.type, "granted_at": g.granted_at.isoformat()} for g in grants]  # fmt: skip


def _grants_text(grants: Sequence[ShareGrant], empty: str) -> str:
    if not grants:
        return empty
    rows = [(g.from_agent, g.to_agent, g.type, g.granted_at.isoformat()) for g in grants]
    return table(("from", "to", "type", "granted at"), rows)


def _grants_list(args: argparse.Namespace) -> int:
    with _store_only(args) as mem:
        grants = mem.list_grants(args.tenant_id)
    emit(args, _grant_rows(grants), lambda: _grants_text(grants, "no share grants"))
    return 0


def _grants_add(args: argparse.Namespace) -> int:
    with _store_only(args) as mem:
        held = mem.grant_share(args.tenant_id, args.from_agent, args.to_agent, args.types)
    emit(args, _grant_rows(held), lambda: _grants_text(held, "no share grants"))
    return 0


def _grants_revoke(args: argparse.Namespace) -> int:
    with _store_only(args) as mem:
        report = mem.revoke_share(args.tenant_id, args.from_agent, args.to_agent, args.types)
    data = {"revoked": _grant_rows(report.revoked), "deleted": list(report.deleted)}
    kinds = ", ".join(g.type for g in report.revoked)
    emit(args, data, lambda: f"revoked {kinds}; deleted {len(report.deleted)} shared copies")
    return 0


# ------------------------------------------------------------------ outcome
def _outcome(args: argparse.Namespace) -> int:
    with opened(args) as mem:
        stats = mem.record_outcome(context_of(args), args.memory_id, args.success, args.reward,
                                   now=args.now)  # fmt: skip
    mean = "none" if stats.mean_reward is None else f"{stats.mean_reward:.3f}"
    emit(args, dataclasses.asdict(stats), lambda: (
        f"procedure {stats.procedure_id}: {stats.successes} successes, {stats.failures} "
        f"failures, success rate {stats.success_rate:.3f}, mean reward {mean}"))  # fmt: skip
    return 0
