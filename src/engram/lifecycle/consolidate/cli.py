"""``engram consolidate``: the sleep cycle from the shell (or a cron job).

    engram [--db URL] [--embedder NAME] consolidate --tenant T [--user U] [--now ISO]
                                                    [--summariser extractive|llm] [--json]

``add_command(subparsers)`` registers it on the ``engram`` parser (which supplies
``--db`` and ``--embedder``). The store is opened without working memory
(consolidation reads none). ``--summariser llm`` reads the endpoint from
``ENGRAM_LLM_BASE_URL``, ``ENGRAM_LLM_MODEL`` (and ``ENGRAM_LLM_API_KEY``,
``ENGRAM_LLM_TIMEOUT``); nothing is sent anywhere otherwise. A bad argument or a
failed run raises an ``EngramError`` for the caller's error mapping.
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import datetime

from engram.embed import create_embedder
from engram.engram import Engram
from engram.errors import InvalidArgument
from engram.lifecycle.consolidate.llm import LLMSummariser
from engram.lifecycle.consolidate.report import ConsolidationReport
from engram.lifecycle.consolidate.summarise import ExtractiveSummariser, Summariser
from engram.store.open import open_store

__all__ = ["add_command", "run"]

_DEFAULT_DB = "sqlite:///engram.db"


def _now(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument(f"--now must be an ISO 8601 time such as 2024-05-01T09:00:00+00:00,"
                              f" got {text[:60]!r}") from None  # fmt: skip


def _summariser(name: str) -> Summariser:
    return LLMSummariser.from_env() if name == "llm" else ExtractiveSummariser()


def _lines(report: ConsolidationReport) -> list[str]:
    who = report.user_id or f"{report.users} users"
    lines = [
        f"consolidated {report.tenant_id} ({who}) as of {report.now.isoformat()}",
        f"  groups {report.groups} from {report.episodes} episodes; summaries "
        f"{report.summaries} added, {report.summaries_confirmed} already stored, "
        f"{report.summaries_rejected} refused",
        f"  facts {report.facts_proposed} proposed, {report.facts_accepted} accepted; "
        f"merges {report.merges}; procedure outcomes {report.outcomes}",
    ]
    if report.stale_groups:
        lines.append(f"  {report.stale_groups} groups changed while summarised: next run")
    if report.busy_users:
        lines.append(f"  busy (another consolidator): {', '.join(report.busy_users)}")
    return lines


def run(args: argparse.Namespace) -> int:
    """Run one consolidation as the parsed ``args`` say; print the report; exit status."""
    url = getattr(args, "db", None) or os.environ.get("ENGRAM_DB", _DEFAULT_DB)
    embedder = getattr(args, "embedder", None) or os.environ.get("ENGRAM_EMBEDDER", "local")
    now = _now(args.now)
    summariser = _summariser(args.summariser)
    mem = Engram(open_store(url), create_embedder(embedder))
    try:
        report = mem.consolidate(args.tenant, args.user, now, summariser=summariser,
                                 progress=None if not args.json else False)  # fmt: skip
    finally:
        mem.close()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(_lines(report)))
    return 0


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``consolidate`` on the ``engram`` command parser."""
    cmd = commands.add_parser(
        "consolidate",
        help="summarise old episodes, extract facts, count outcomes, merge duplicate facts",
        description="The sleep cycle (docs/lifecycle.md): idempotent for one --now.",
    )
    cmd.add_argument("--tenant", required=True, help="the tenant to consolidate")
    cmd.add_argument("--user", default=None, help="one user (default: every user of the tenant)")
    cmd.add_argument("--now", default=None, help="the clock, ISO 8601 with a zone (default: now)")
    cmd.add_argument("--summariser", choices=("extractive", "llm"), default="extractive",
                     help="extractive (default, offline) or llm (ENGRAM_LLM_BASE_URL)")  # fmt: skip
    cmd.add_argument("--json", action="store_true", help="print the report as JSON")
    cmd.set_defaults(func=run)
