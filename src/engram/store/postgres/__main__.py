"""``python -m engram.store.postgres migrate URL``: bring a database's schema up to date.

The command ``engram migrate`` is meant to call ``main``; until the CLI is wired
(by whoever owns ``engram.cli``) this module runs it. It applies the pending named
migrations in one transaction and prints their names (nothing when up to date);
an unreachable server or a refused login exits with status 2 and a message
naming host and database, never the password.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from engram.errors import EngramError
from engram.store.postgres.config import PostgresConfig
from engram.store.postgres.connect import connect, libpq_url, migrate
from engram.store.postgres.errors import Server

__all__ = ["main", "run_migrations"]


def run_migrations(url: str, config: PostgresConfig | None = None) -> list[str]:
    """Apply pending migrations to the database at ``url``; the names applied."""
    cfg = config or PostgresConfig()
    url = libpq_url(url)
    server = Server.of(url)
    conn = connect(url, cfg, server)
    try:
        return migrate(conn, cfg, server)
    finally:
        conn.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``migrate URL [--text-search NAME]`` and run it; the exit status."""
    parser = argparse.ArgumentParser(prog="python -m engram.store.postgres")
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("migrate", help="apply pending schema migrations")
    command.add_argument("url", help="postgresql://user@host:port/database")
    command.add_argument(
        "--text-search",
        default=PostgresConfig().text_search,
        help="text search configuration of a new schema (default english)",
    )
    args = parser.parse_args(argv)
    try:
        applied = run_migrations(args.url, PostgresConfig(text_search=args.text_search))
    except EngramError as exc:
        print(f"engram migrate: {exc}", file=sys.stderr)
        return 2
    for name in applied:
        print(f"applied {name}")
    if not applied:
        print("up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
