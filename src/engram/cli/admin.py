"""``engram migrate``, ``index rebuild``, ``audit verify`` and ``quickstart``: store upkeep.

    engram migrate [URL]            apply pending schema migrations (prints their names)
    engram index rebuild            regenerate postings and vectors with --embedder
    engram audit verify             recompute the audit hash chain (exit 1 if broken)
    engram quickstart               store and explain the seed example memories

``migrate``, ``index rebuild`` and ``audit verify`` touch only the store, so they
open it without working memory (a server store needs none for them).
"""

from __future__ import annotations

import argparse
import sys

from engram.cli.common import Commands, add_json, command, emit
from engram.cli.progress import Progress
from engram.embed import create_embedder
from engram.store.open import migrate, open_store
from engram.write.index import rebuild

__all__ = ["add_command"]


def add_command(commands: Commands) -> None:
    """Register ``migrate``, ``index rebuild``, ``audit verify`` and ``quickstart``."""
    migrate_cmd = command(
        commands, "migrate", "apply pending schema migrations (prints their names)", _migrate
    )
    migrate_cmd.add_argument("url", nargs="?", metavar="URL", help="store URL (default: --db)")
    add_json(migrate_cmd)
    text = "derived index maintenance"
    index = commands.add_parser("index", help=text, description=text)
    index_cmds = index.add_subparsers(dest="action", required=True, metavar="ACTION")
    rebuild_cmd = index_cmds.add_parser(
        "rebuild",
        help="regenerate postings and vectors from the records with --embedder",
        description="regenerate postings and vectors from the records with --embedder "
        "(one transaction: writers wait until it commits)",
    )
    rebuild_cmd.set_defaults(func=_index_rebuild)
    add_json(rebuild_cmd)
    text = "audit log tools"
    audit = commands.add_parser("audit", help=text, description=text)
    audit_cmds = audit.add_subparsers(dest="action", required=True, metavar="ACTION")
    verify = audit_cmds.add_parser(
        "verify",
        help="check the audit hash chain (exit 1 if broken)",
        description="recompute the audit hash chain",
    )
    verify.set_defaults(func=_audit_verify)
    add_json(verify)
    command(
        commands,
        "quickstart",
        "store the seed example memories and show what Engram keeps and recalls, and why",
        _quickstart,
    )


def _migrate(args: argparse.Namespace) -> int:
    applied = migrate(args.url or args.db)
    emit(
        args,
        {"applied": applied},
        lambda: "\n".join(f"applied {n}" for n in applied) or "up to date",
    )
    return 0


def _index_rebuild(args: argparse.Namespace) -> int:
    embedder = create_embedder(args.embedder)
    store = open_store(args.db)
    try:
        with Progress("re-embedding", unit="records") as bar:
            report = rebuild(store, embedder, progress=bar.advance)
    finally:
        store.close()
    emit(
        args,
        {"records": report.records, "vectors": report.vectors, "model": report.model},
        lambda: (
            f"rebuilt lexical and vector indexes: {report.records} records, "
            f"{report.vectors} vectors, model {report.model}"
        ),
    )
    return 0


def _audit_verify(args: argparse.Namespace) -> int:
    store = open_store(args.db)
    try:
        report = store.verify_audit()
    finally:
        store.close()
    data = {
        "ok": report.ok,
        "entries": report.entries,
        "first_bad_seq": report.first_bad_seq,
        "problem": report.problem,
    }
    if report.ok:
        emit(args, data, lambda: f"audit chain intact: {report.entries} entries")
        return 0
    if args.json:
        emit(args, data, str)
    print(f"audit chain BROKEN at seq {report.first_bad_seq}: {report.problem}", file=sys.stderr)
    return 1


def _quickstart(args: argparse.Namespace) -> int:
    from engram.quickstart import run

    run(args.db, args.embedder)
    return 0
