"""``engram sweep``: run the retention and decay sweep from the command line.

    engram [--db URL] [--embedder NAME] [--working URL] sweep [--tenant T] [--now ISO] [--json]

``add_command(commands)`` registers it on the ``engram`` sub-parsers (the CLI
wires it in). It opens the store named by the root ``--db`` option, sweeps one
tenant (``--tenant``) or every tenant, at ``--now`` (an ISO 8601 time with its
offset, such as ``2024-06-01T00:00:00+00:00``; default: the clock), prints what
was deleted per reason (``--json``: the report as JSON, counts and audit ids,
never content) and exits 0, or 1 when the physical pass failed (a WAL checkpoint
or ``VACUUM`` that did not complete). Bad arguments raise ``InvalidArgument``,
which the CLI maps to its usage exit status.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from engram.errors import InvalidArgument
from engram.lifecycle.sweep import SweepReport

__all__ = ["add_command", "parse_now", "run"]

Commands = Any  # argparse's sub-parsers action (a private type)


def add_command(commands: Commands) -> None:
    """Register ``sweep`` on the ``engram`` sub-parsers."""
    text = "hard-delete what retention ended and what decay pruned (config.sweep)"
    sweep = commands.add_parser("sweep", help=text, description=text)
    sweep.add_argument("--tenant", metavar="T", help="sweep this tenant only (default: every)")
    sweep.add_argument("--now", metavar="ISO", help="the time to sweep at, with its offset")
    sweep.add_argument("--json", action="store_true", help="print the report as JSON")
    sweep.set_defaults(func=run)


def parse_now(text: str | None) -> datetime | None:
    """``--now``: an ISO 8601 time with a UTC offset (None: the clock)."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument(f"--now must be an ISO 8601 time, got {text!r}") from None
    if when.tzinfo is None:
        raise InvalidArgument(f"--now needs a UTC offset (such as +00:00), got {text!r}")
    return when


def run(args: argparse.Namespace) -> int:
    """Open the store, sweep, print the report; the exit status."""
    from engram.engram import Engram

    now = parse_now(args.now)
    mem = Engram.open(args.db, embedder=args.embedder, working=getattr(args, "working", None))
    try:
        report = mem.sweep(args.tenant, now=now)
    finally:
        mem.close()
    print(json.dumps(report.to_dict(), indent=2) if args.json else _text(report))
    return 1 if report.failed else 0


def _text(report: SweepReport) -> str:
    lines = [
        f"swept {len(report.tenants)} tenant(s) at {report.now.isoformat()}:"
        f" {report.expired} expired, {report.pruned} pruned"
        f" ({report.versions} older versions and passages with them)",
    ]
    if report.consolidated or report.unconsolidated:
        lines.append(f"consolidated {report.consolidated} owner(s) first;"
                     f" {report.unconsolidated} kept (consolidation failed)")  # fmt: skip
    if report.clock_behind:
        lines.append("clock behind the last sweep of: " + ", ".join(report.clock_behind))
    if report.failed:
        lines.append("physical pass FAILED: " + ", ".join(report.failed))
    return "\n".join(lines)
