"""``engram serve`` and ``engram keys``: ``add_command(subparsers)`` registers both.

engram serve [--host 127.0.0.1] [--port 8000] [--db URL] [--working URL] [--keys FILE]
             [--embedder NAME] [--tenant default] [--max-body-bytes N] [--workers N]
             [--rate-limit PER_SECOND] [--rate-burst N] [--recall-concurrency N]
             [--recall-queue-seconds S] [--gc-rescan-seconds S] [--access-log]
engram keys create --tenant T [--admin] [--users u1,u2] [--agents a1] [--note TEXT]
engram keys list [--json]
engram keys revoke KEY_ID

Each subcommand has its own ``--db`` and ``--keys`` (stored under ``rest_db`` and
``rest_keys``, so a parent parser's ``--db`` is still honoured when they are not
given). The key file defaults to ``$ENGRAM_KEYS_FILE``, else ``<db path>-keys.json``
beside a SQLite store. Every ``func(args)`` returns the exit status; an Engram
error prints one line and exits with the error table's code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engram.errors import ConfigError, EngramError
from engram.surfaces import collector
from engram.surfaces.errors import outcome_for
from engram.surfaces.rest.keys import ENV_KEYS, ENV_KEYS_FILE, KeyFile, KeyRing
from engram.surfaces.rest.serve import (
    DEFAULT_TENANT,
    Launch,
    banner,
    default_keys_path,
    first_key,
    run_server,
)

__all__ = ["add_command"]

_DEFAULT_DB = "sqlite:///engram.db"


def _db(args: argparse.Namespace) -> str:
    named: str | None = args.rest_db or getattr(args, "db", None)
    return named or os.environ.get("ENGRAM_DB") or _DEFAULT_DB


def _keys_path(args: argparse.Namespace) -> Path:
    if args.rest_keys:
        return Path(args.rest_keys)
    found = default_keys_path(_db(args))
    if found is None:
        raise ConfigError(f"this store has no file to keep API keys beside: pass --keys FILE "
                          f"or set {ENV_KEYS_FILE}")  # fmt: skip
    return found


def _guarded(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``func`` with Engram errors printed as one line and mapped to their exit code."""

    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except EngramError as exc:
            print(f"engram: {type(exc).__name__}: {exc}", file=sys.stderr)
            return outcome_for(exc).exit_code

    return run


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [part.strip() for part in text.split(",") if part.strip()]


def _serve(args: argparse.Namespace) -> int:
    try:
        from engram.engram import Engram
        from engram.surfaces.rest.app import create_app
        from engram.surfaces.rest.settings import RestSettings
        from engram.surfaces.rest.workers import WorkerSpec, run_workers
    except ImportError:
        raise ConfigError("engram serve needs the server extra: "
                          "pip install 'engram-governed[server]'") from None  # fmt: skip
    settings = RestSettings(max_body_bytes=args.max_body_bytes, host=args.host,
                            rate_limit=args.rate_limit, rate_burst=args.rate_burst,
                            recall_concurrency=args.recall_concurrency,
                            recall_queue_seconds=args.recall_queue_seconds)  # fmt: skip
    collector.checked(args.gc_rescan_seconds)  # before the store opens
    keys_path = None if os.environ.get(ENV_KEYS) is not None else _keys_path(args)
    ring = KeyRing.from_environment(keys_path)
    embedder = args.rest_embedder or getattr(args, "embedder", None) or "local"
    mem = Engram.open(_db(args), embedder=embedder, working=args.working)
    try:
        app = create_app(mem, ring, settings)
    except BaseException:
        mem.close()
        raise
    mcp_path = settings.mcp_path if app.state.mcp is not None else None

    def announce(url: str) -> None:  # once listening: a failed start creates no key
        new_key = first_key(keys_path, args.tenant) if keys_path is not None else None
        print(
            banner(Launch(url, ring, new_key, args.tenant, settings.ui_path, mcp_path)), flush=True
        )

    if args.workers > 1:  # the store is open and migrated: each worker opens its own
        mem.close()
        keys = None if keys_path is None else str(keys_path)
        shared = args.working if (args.working or "").startswith("redis") else None
        spec = WorkerSpec(_db(args), args.working, embedder, keys, args.max_body_bytes,
                          args.host, args.rate_limit, args.rate_burst, shared,
                          args.recall_concurrency, args.recall_queue_seconds,
                          args.gc_rescan_seconds)  # fmt: skip
        return run_workers(spec, args.host, args.port, args.workers, args.access_log, announce)
    try:
        return run_server(app, args.host, args.port, args.access_log, announce,
                          args.gc_rescan_seconds)  # fmt: skip
    finally:
        mem.close()


def _create(args: argparse.Namespace) -> int:
    entry, secret = KeyFile(_keys_path(args)).create(
        args.tenant, admin=args.admin, users=_names(args.users), agents=_names(args.agents),
        note=args.note,
    )  # fmt: skip
    role = "admin" if entry.admin else "user"
    print(f"created key {entry.key_id} ({role} of tenant {entry.tenant_id!r}); it is shown "
          "only now, store it:")  # fmt: skip
    print(secret)
    return 0


def _list(args: argparse.Namespace) -> int:
    keys = [key.describe() for key in KeyFile(_keys_path(args)).read()]
    if args.json:
        print(json.dumps(keys, indent=2))
        return 0
    print(f"{'key id':16}  {'tenant':20}  {'role':5}  {'state':7}  {'created':25}  users / agents")
    for key in keys:
        print(_row(key))
    return 0


def _row(key: dict[str, Any]) -> str:
    reach = "/".join(",".join(key[part]) if key[part] is not None else "any"
                     for part in ("users", "agents"))  # fmt: skip
    state = "revoked" if key["revoked_at"] else "active"
    role = "admin" if key["admin"] else "user"
    return f"{key['key_id']:16}  {key['tenant_id']:20}  {role:5}  {state:7}  " \
           f"{key['created_at']:25}  {reach}"  # fmt: skip


def _revoke(args: argparse.Namespace) -> int:
    entry = KeyFile(_keys_path(args)).revoke(args.key_id)
    print(f"key {entry.key_id} of tenant {entry.tenant_id!r} revoked at {entry.revoked_at}")
    return 0


def _store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", dest="rest_db", default=None,
                        help=f"store URL (default: $ENGRAM_DB or {_DEFAULT_DB})")  # fmt: skip
    parser.add_argument("--keys", dest="rest_keys", default=None, metavar="FILE",
                        help=f"API key file (default: ${ENV_KEYS_FILE}, else "
                        "<db path>-keys.json beside a SQLite store)")  # fmt: skip


def _add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser("serve", help="run the REST API (uvicorn)")
    serve.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any)")
    _store_options(serve)
    serve.add_argument("--working", default=os.environ.get("ENGRAM_WORKING"),
                       help="working memory: redis://host:port/db (default: SQLite beside "
                       "the store; $ENGRAM_WORKING)")  # fmt: skip
    serve.add_argument("--embedder", dest="rest_embedder", default=None,
                       help="local | multilingual | hashing | openai (default: --embedder of "
                       "engram, $ENGRAM_EMBEDDER or local)")  # fmt: skip
    serve.add_argument(
        "--tenant",
        default=DEFAULT_TENANT,
        help="tenant of the admin key a first start creates (default: default)",
    )
    serve.add_argument(
        "--max-body-bytes",
        type=int,
        default=1024 * 1024,
        help="largest request body (default 1 MiB; 413 past it)",
    )
    serve.add_argument("--rate-limit", type=float, default=100.0, metavar="PER_SECOND",
                       help="requests a second each API key may make, sustained (default "
                       "100; 0: no limit); 429 past it. With --workers and --working "
                       "redis:// the workers share the buckets there")  # fmt: skip
    serve.add_argument("--rate-burst", type=int, default=200, metavar="N",
                       help="requests a key may make at once after a pause "
                       "(default 200)")  # fmt: skip
    serve.add_argument("--recall-concurrency", type=int, default=1, metavar="N",
                       help="recalls one server process runs at once, the rest waiting in "
                       "arrival order (default 1: a recall is mostly Python, one core's "
                       "work; 0: no limit)")  # fmt: skip
    serve.add_argument("--recall-queue-seconds", type=float, default=10.0, metavar="S",
                       help="how long a recall may wait for its turn before it is refused "
                       "503 with Retry-After (default 10)")  # fmt: skip
    collector.add_option(serve)
    serve.add_argument("--workers", type=int, default=1,
                       help="server processes sharing the socket (default 1; more use more "
                       "cores, each holds its own indexes in memory)")  # fmt: skip
    serve.add_argument("--access-log", action="store_true", help="log every request")
    serve.set_defaults(func=_guarded(_serve))


def _add_keys(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = commands.add_parser("keys", help="API keys of the REST API")
    actions = keys.add_subparsers(dest="keys_action", required=True)
    create = actions.add_parser("create", help="create a key (printed once)")
    create.add_argument("--tenant", required=True, help="the tenant the key acts for")
    create.add_argument("--admin", action="store_true", help="admin of its tenant")
    create.add_argument("--users", help="only these users (comma-separated)")
    create.add_argument("--agents", help="only these agents (comma-separated)")
    create.add_argument("--note", help="a label shown by keys list")
    _store_options(create)
    create.set_defaults(func=_guarded(_create))
    listing = actions.add_parser("list", help="list keys (never their secrets)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    _store_options(listing)
    listing.set_defaults(func=_guarded(_list))
    revoke = actions.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id", help="the key id (keys list)")
    _store_options(revoke)
    revoke.set_defaults(func=_guarded(_revoke))


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``serve`` and ``keys`` on ``commands`` (an ``add_subparsers`` result)."""
    _add_serve(commands)
    _add_keys(commands)
