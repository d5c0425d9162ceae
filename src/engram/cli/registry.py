"""Which modules add commands to ``engram``, and the root parser they hang from.

A command module exposes ``add_command(commands)``: it registers its parser(s) on
the ``commands`` sub-parsers with ``set_defaults(func=...)``, where
``func(args: argparse.Namespace) -> int`` returns the exit status. ``BUILTIN``
modules ship with the core package; an import error in one of them is a bug and
propagates. ``OPTIONAL`` modules live in other packages and may be absent: the
module (or its package) not existing yet, or a third-party library it needs not
being installed (an extra), skips it, and ``engram --help`` names what was
skipped and why. Any other import error (a bad name inside Engram) propagates.

Root options (``--db``, ``--embedder``, ``--working``) belong to the root parser.
argparse lets a sub-parser's defaults overwrite the root's values, so when a
command module declares one of them again, its default is suppressed: the
option may then be given before or after the command name, never silently lost.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType

from engram.cli.common import Commands

__all__ = ["BUILTIN", "OPTIONAL", "ROOT_OPTIONS", "Skipped", "build_parser"]

DEFAULT_DB = "sqlite:///engram.db"

BUILTIN: tuple[str, ...] = (
    "engram.cli.memories",
    "engram.cli.changes",
    "engram.cli.recall",
    "engram.cli.transfer",
    "engram.cli.working",
    "engram.cli.admin",
    "engram.cli.lifecycle",
)

# (module, the function that registers its commands)
OPTIONAL: tuple[tuple[str, str], ...] = (
    ("engram.surfaces.rest.cli", "add_command"),  # serve, keys
    ("engram.surfaces.mcp.cli", "add_command"),  # mcp
    ("engram.lifecycle.consolidate.cli", "add_command"),  # consolidate
    ("engram.lifecycle.sweep_cli", "add_command"),  # sweep
    ("engram.eval.cli", "add_eval_command"),  # eval
)

ROOT_OPTIONS = {"--db": "db", "--embedder": "embedder", "--working": "working"}  # option: dest


@dataclass(frozen=True, slots=True)
class Skipped:
    """An optional module that was not loaded, and the module that was missing."""

    module: str
    missing: str


def build_parser(optional: tuple[tuple[str, str], ...] = OPTIONAL) -> argparse.ArgumentParser:
    """The ``engram`` parser: root options, then every built-in and loadable
    optional command module's commands."""
    parser = argparse.ArgumentParser(
        prog="engram",
        description="Governed long-term memory for AI agents.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _root_options(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in BUILTIN:
        importlib.import_module(name).add_command(commands)
    skipped = [s for s in (_load(commands, m, f) for m, f in optional) if s is not None]
    third_party = [s for s in skipped if not _ours(s.missing)]
    if third_party:
        parser.epilog = "not available here (a library is not installed):\n" + "\n".join(
            f"  {s.module}: needs {s.missing!r}" for s in third_party
        )
    _defer_to_root(parser)
    return parser


def _root_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=os.environ.get("ENGRAM_DB", DEFAULT_DB),
        metavar="URL",
        help="store URL: sqlite:///path or postgresql://... "
        "(default: $ENGRAM_DB or sqlite:///engram.db)",
    )
    parser.add_argument(
        "--embedder",
        default=os.environ.get("ENGRAM_EMBEDDER", "local"),
        metavar="NAME",
        help="local | multilingual | hashing | openai (default: $ENGRAM_EMBEDDER or local)",
    )
    parser.add_argument(
        "--working",
        default=os.environ.get("ENGRAM_WORKING") or None,
        metavar="URL",
        help="working memory: sqlite (a file beside a SQLite store, the default) or "
        "redis://host:port/db (needed with a PostgreSQL store; default: $ENGRAM_WORKING)",
    )


def _load(commands: Commands, module_name: str, function: str) -> Skipped | None:
    """Import one optional module and let it register; ``Skipped`` when it or a
    third-party library it needs is not installed."""
    try:
        module: ModuleType = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        absent_itself = module_name == missing or module_name.startswith(missing + ".")
        if absent_itself or not _ours(missing):
            return Skipped(module_name, missing)
        raise
    register: Callable[[Commands], None] = getattr(module, function)
    register(commands)
    return None


def _ours(module_name: str) -> bool:
    """Whether ``module_name`` is part of Engram (not a third-party library)."""
    return module_name == "engram" or module_name.startswith("engram.")


def _defer_to_root(parser: argparse.ArgumentParser) -> None:
    """Suppress the defaults of root options a command declares again (see module)."""
    for sub in _subparsers(parser):
        for action in sub._actions:
            dests = {ROOT_OPTIONS[o] for o in action.option_strings if o in ROOT_OPTIONS}
            if action.dest in dests:  # the same option and value (eval's own --embedder is not)
                action.default = argparse.SUPPRESS


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every parser below ``parser``, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to one parser
                yield sub
                yield from _subparsers(sub)
