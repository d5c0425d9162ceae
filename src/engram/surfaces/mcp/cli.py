"""``engram mcp``: serve the memory tools to an MCP client, over stdio or streamable HTTP.

    engram mcp --tenant T --user U [--agent A] [--session S] ...          (stdio)
    engram mcp --transport http [--host H] [--port P] [--keys FILE]       (the REST API keys)
    engram mcp --transport http --authenticator MODULE:NAME
    engram mcp --transport http --no-auth --tenant T --user U             (loopback only)

Over stdio the identity is the one the command is started with: the client
(an IDE, an agent runtime) launches the process for one user. Over HTTP each
request's bearer key decides it through an ``Authenticator``: by default the
REST API's key store (the key file of ``engram serve``: ``--keys``, else
``$ENGRAM_KEYS_FILE``, else ``<db path>-keys.json``; or ``$ENGRAM_API_KEYS``),
re-read when it changes; ``--authenticator`` names another as ``module:name`` (a
zero-argument factory or an instance). ``--no-auth`` serves the fixed identity to
whoever connects, so it listens only on a loopback host (a remote host is
``ConfigError``, exit 3). A keyed HTTP server limits each key's rate as
``engram serve`` does (``--rate-limit``, ``--rate-burst``; 429 with
``Retry-After``). stdout belongs to the protocol over stdio: the command writes
only to stderr. Like ``engram serve``, the process owns its interpreter, so it
freezes what survives a full garbage collection (``--gc-rescan-seconds``,
``engram.surfaces.collector``): the open store's in-memory engines stay out of
later collections' scans.
"""

from __future__ import annotations

import argparse
import importlib
import ipaddress
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engram.cli.common import Commands, add_identity, context_of, opened
from engram.errors import ConfigError
from engram.scope import resolve
from engram.surfaces import collector
from engram.surfaces.principal import Authenticator

if TYPE_CHECKING:
    from engram.surfaces.rest.ratelimit import TokenBuckets

__all__ = ["add_command", "is_loopback", "limiter_of", "load_authenticator"]


def add_command(commands: Commands) -> None:
    """Register ``mcp``."""
    text = "serve the memory tools to MCP clients (stdio, or streamable HTTP)"
    parser = commands.add_parser("mcp", help=text, description=text)
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default: the client launches this command) or http",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP: the address to listen on")
    parser.add_argument("--port", type=int, default=8765, help="HTTP: the port (default 8765)")
    parser.add_argument("--path", default="/mcp", help="HTTP: the endpoint's path")
    parser.add_argument(
        "--keys",
        dest="mcp_keys",
        metavar="FILE",
        help="HTTP: the API key file (default: $ENGRAM_KEYS_FILE, else <db path>-keys.json "
        "beside a SQLite store, as engram serve; $ENGRAM_API_KEYS replaces it)",
    )
    parser.add_argument(
        "--authenticator",
        metavar="MODULE:NAME",
        help="HTTP: another Authenticator that turns bearer keys into principals "
        "(a zero-argument factory or an instance) instead of the API key file",
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="HTTP: no keys; serve the --tenant/--user identity to whoever connects "
        "(loopback hosts only)",
    )
    parser.add_argument("--rate-limit", type=float, default=100.0, metavar="PER_SECOND",
                        help="HTTP with keys: requests a second each key may make, sustained "
                        "(default 100, as engram serve; 0: no limit); 429 past it")  # fmt: skip
    parser.add_argument("--rate-burst", type=int, default=200, metavar="N",
                        help="HTTP with keys: requests a key may make at once after a pause "
                        "(default 200)")  # fmt: skip
    collector.add_option(parser, "the process")
    add_identity(parser)
    parser.set_defaults(func=_serve)


def load_authenticator(spec: str) -> Authenticator:
    """The ``Authenticator`` ``module:name`` names (called when it is a factory)."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise ConfigError(f"--authenticator must be module:name, got {spec!r}")
    try:
        found: Any = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"--authenticator {spec!r} cannot be loaded: {exc}") from None
    instance = not isinstance(found, type) and callable(getattr(found, "authenticate", None))
    if not instance and not callable(found):
        raise ConfigError(f"--authenticator {spec!r} is neither an Authenticator nor a factory")
    made = found if instance else found()  # a class or a factory function is called
    if not callable(getattr(made, "authenticate", None)):
        raise ConfigError(f"--authenticator {spec!r} gives no object with authenticate()")
    authenticator: Authenticator = made
    return authenticator


def _serve(args: argparse.Namespace) -> int:
    authenticator = _checked(args)
    limiter = limiter_of(args)  # checked before the store opens
    try:  # here, not at import: the SDK takes a second to import, and is an extra
        from engram.surfaces.mcp.http import create_http_app
        from engram.surfaces.mcp.server import build_server
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "starlette", "pydantic", "anyio"):
            raise
        raise ConfigError(
            f"engram mcp needs the MCP SDK ({exc.name} is not installed): "
            "pip install 'engram-governed[mcp]'"
        ) from None
    ctx = context_of(args)
    with opened(args) as mem:
        if args.transport == "stdio":
            print(f"engram mcp: stdio, tenant {ctx.tenant_id}, user {ctx.user_id}", file=sys.stderr)
            server = build_server(mem, ctx)
            _collected(args, lambda: server.run("stdio"))
            return 0
        app = (
            create_http_app(mem, authenticator, path=args.path, host=args.host, limiter=limiter)
            if authenticator is not None
            else build_server(mem, ctx).streamable_http_app(
                streamable_http_path=args.path, host=args.host, stateless_http=True
            )
        )
        _collected(args, lambda: _run_http(app, args))
    return 0


def _collected(args: argparse.Namespace, serve: Callable[[], None]) -> None:
    """Run ``serve`` with the garbage-collection policy installed (after the store
    and the server exist, so they are frozen with the rest) and removed after."""
    uninstall = collector.install(args.gc_rescan_seconds)
    try:
        serve()
    finally:
        uninstall()


def _checked(args: argparse.Namespace) -> Authenticator | None:
    """The authenticator (None: the fixed identity), after refusing what cannot be
    served safely (before the store opens or the SDK loads)."""
    options = (("--keys", args.mcp_keys), ("--authenticator", args.authenticator),
               ("--no-auth", args.no_auth))  # fmt: skip
    collector.checked(args.gc_rescan_seconds)
    chosen = [name for name, given in options if given]
    if args.transport == "stdio" and chosen:
        raise ConfigError(f"{chosen[0]} is for --transport http; stdio serves one identity")
    if len(chosen) > 1:
        raise ConfigError(f"{' and '.join(chosen)} exclude each other: choose one")
    if args.transport == "stdio" or args.no_auth:
        resolve(context_of(args))  # one identity for every call: it must be whole
        if args.transport == "http" and not is_loopback(args.host):
            raise ConfigError(
                "an HTTP server with --no-auth has no authentication; "
                f"it listens on loopback only, not {args.host!r}"
            )
        return None
    if args.authenticator:
        return load_authenticator(args.authenticator)
    return _key_store(args)


def limiter_of(args: argparse.Namespace) -> TokenBuckets | None:
    """The per-key rate limit of a keyed HTTP server, checked as ``engram serve``
    checks its own (``RestSettings``); None when ``--rate-limit 0`` turns it off."""
    from engram.surfaces.rest.ratelimit import TokenBuckets
    from engram.surfaces.rest.settings import RestSettings

    settings = RestSettings(rate_limit=args.rate_limit, rate_burst=args.rate_burst)
    if settings.rate_limit <= 0:
        return None
    return TokenBuckets(settings.rate_limit, settings.rate_burst)


def _key_store(args: argparse.Namespace) -> Authenticator:
    """The REST API's keys: the key file (or ``$ENGRAM_API_KEYS``), as ``engram serve``."""
    from engram.surfaces.rest.keys import ENV_KEYS, KeyRing
    from engram.surfaces.rest.serve import default_keys_path

    path = args.mcp_keys or default_keys_path(args.db)
    ring = KeyRing.from_environment(path)
    if not ring.active():
        where = f"${ENV_KEYS}" if ring.path is None else str(ring.path)
        print(f"engram mcp: no active API key in {where} yet; every request is refused until "
              "one is made: engram keys create --tenant T", file=sys.stderr)  # fmt: skip
    return ring


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (only local processes can connect).

    An address is parsed, never matched by prefix: ``127.example.com`` is a name
    that can resolve anywhere, so only ``localhost`` and literal loopback addresses
    (``127.0.0.0/8``, ``::1``) count."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _run_http(app: Any, args: argparse.Namespace) -> None:
    try:
        import uvicorn
    except ImportError:
        raise ConfigError(
            "--transport http needs uvicorn: pip install 'engram-governed[server]'"
        ) from None
    print(f"engram mcp: http://{args.host}:{args.port}{args.path}", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
