"""The ``engram`` command line: a thin surface that parses, calls the facade, maps errors.

engram [--db URL] migrate [URL]
engram [--db URL] [--embedder NAME] index rebuild
engram [--db URL] audit verify
engram [--db URL] [--embedder NAME] quickstart
engram eval ...            (see ``engram eval --help``)

``migrate``, ``index rebuild`` and ``audit verify`` touch only the store, so they
open it without working memory (a server store needs none for them).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from engram.embed import create_embedder
from engram.errors import EngramError
from engram.store.open import migrate, open_store
from engram.write.index import rebuild

__all__ = ["main"]

_DEFAULT_DB = "sqlite:///engram.db"


def _migrate(args: argparse.Namespace) -> int:
    applied = migrate(args.url or args.db)
    for name in applied:
        print(f"applied {name}")
    if not applied:
        print("up to date")
    return 0


def _index_rebuild(args: argparse.Namespace) -> int:
    embedder = create_embedder(args.embedder)
    store = open_store(args.db)
    try:
        report = rebuild(store, embedder)
    finally:
        store.close()
    print(f"rebuilt lexical and vector indexes: {report.records} records, "
          f"{report.vectors} vectors, model {report.model}")  # fmt: skip
    return 0


def _audit_verify(args: argparse.Namespace) -> int:
    store = open_store(args.db)
    try:
        report = store.verify_audit()
    finally:
        store.close()
    if report.ok:
        print(f"audit chain intact: {report.entries} entries")
        return 0
    print(f"audit chain BROKEN at seq {report.first_bad_seq}: {report.problem}", file=sys.stderr)
    return 1


def _quickstart(args: argparse.Namespace) -> int:
    from engram.quickstart import run

    run(args.db, args.embedder)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram", description="Governed memory for AI agents.")
    parser.add_argument("--db", default=os.environ.get("ENGRAM_DB", _DEFAULT_DB),
                        help="store URL (default: $ENGRAM_DB or sqlite:///engram.db)")  # fmt: skip
    parser.add_argument(
        "--embedder",
        default=os.environ.get("ENGRAM_EMBEDDER", "local"),
        help="local | multilingual | hashing | openai (default: $ENGRAM_EMBEDDER or local)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    migrate_cmd = commands.add_parser(
        "migrate", help="apply pending schema migrations (prints their names)"
    )
    migrate_cmd.add_argument("url", nargs="?", help="store URL (default: --db)")
    migrate_cmd.set_defaults(func=_migrate)
    index = commands.add_parser("index", help="derived index maintenance")
    index_cmds = index.add_subparsers(dest="action", required=True)
    rebuild = index_cmds.add_parser("rebuild", help="regenerate postings and vectors from records")
    rebuild.set_defaults(func=_index_rebuild)
    audit = commands.add_parser("audit", help="audit log tools")
    audit_cmds = audit.add_subparsers(dest="action", required=True)
    verify = audit_cmds.add_parser("verify", help="check the audit hash chain")
    verify.set_defaults(func=_audit_verify)
    quick = commands.add_parser("quickstart", help="store and print the seed example memories")
    quick.set_defaults(func=_quickstart)
    _add_eval(commands)
    return parser


def _add_eval(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    try:
        module = importlib.import_module("engram.eval.cli")
    except ImportError:
        return
    module.add_eval_command(commands)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    args = _parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except EngramError as exc:
        print(f"engram: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
