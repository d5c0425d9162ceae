"""``engram recall``: the memory block for a request, and why each memory was or was not in it.

    engram recall --tenant T --user U "Add network-state handling to the iOS app."
                  [--intent I] [--max-items N] [--max-tokens N] [--layout full|compact]
                  [--as-of TIME] [--purpose P] [--prompt-only] [--json]

Prints the outcome line (status, mode, intent, trace id, tokens), the rendered
block an agent puts in its prompt, a table of the stages (candidates in and out,
milliseconds), and a table of items: each selected memory with its score and the
score's non-zero parts, then each rejected one with the stage's reason. A
conflict and a clarification are printed when recall found one. ``--json``
prints the status, the selected items, conflicts, prompt and the whole trace.
"""

from __future__ import annotations

import argparse
import dataclasses
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
    shorten,
    table,
)
from engram.config import Budget
from engram.engram import Engram
from engram.errors import NotFound
from engram.recall.model import RecallResult
from engram.scope import Context

__all__ = ["add_command", "recall_json"]

_MAX_REJECTED = 50  # rejected items shown in the table (the JSON trace has them all)
_REASON_WIDTH = 90


def add_command(commands: Commands) -> None:
    """Register ``recall``."""
    parser = command(
        commands,
        "recall",
        "recall the memories that should influence the next action, with the trace of why",
        _recall,
    )
    parser.add_argument("query", help="the request or question")
    parser.add_argument("--intent", help="a mode or intent (default: inferred from the query)")
    parser.add_argument("--max-items", type=int, metavar="N", help="at most this many memories")
    parser.add_argument(
        "--max-tokens", type=int, metavar="N", help="at most this many tokens in the block"
    )
    parser.add_argument("--layout", choices=("full", "compact"), help="the block's layout")
    parser.add_argument(
        "--as-of", type=moment, metavar="TIME", help="what was valid at this time (ISO 8601)"
    )
    parser.add_argument("--now", type=moment, metavar="TIME", help="the recall's clock")
    parser.add_argument(
        "--purpose", help="the request's purpose (unlocks sensitive memories stored for it)"
    )
    parser.add_argument(
        "--prompt-only",
        action="store_true",
        help="print only the rendered block (for piping into a prompt)",
    )
    add_identity(parser)
    add_json(parser)


def _budget(mem: Engram, args: argparse.Namespace) -> Budget | None:
    changes = {
        name: getattr(args, name)
        for name in ("max_items", "max_tokens", "layout")
        if getattr(args, name) is not None
    }
    return dataclasses.replace(mem.config.recall.budget, **changes) if changes else None


def _recall(args: argparse.Namespace) -> int:
    ctx = context_of(args, purpose=args.purpose)
    with opened(args) as mem:
        result = mem.recall(
            ctx,
            args.query,
            intent=args.intent,
            budget=_budget(mem, args),
            as_of=args.as_of,
            now=args.now,
        )
        if args.prompt_only:
            print(result.prompt)
            return 0
        types = {} if args.json else _rejected_types(mem, ctx, result)
    emit(args, recall_json(result), lambda: readable(result, types))
    return 0


def recall_json(result: RecallResult) -> dict[str, Any]:
    """A recall result as JSON: status, items with score parts, conflicts, block, trace."""
    return {
        "status": result.status.value,
        "items": [
            {
                "id": i.record.id,
                "type": i.record.type,
                "scope": i.record.scope,
                "content": i.record.content,
                "score": round(i.score, 4),
                "reason": i.reason,
                "components": {k: round(v, 4) for k, v in i.components.items()},
                "merged_from": list(i.merged_from),
            }
            for i in result.items
        ],
        "conflicts": [
            {"key": c.key, "ids": list(c.record_ids), "values": list(c.values), "reason": c.reason}
            for c in result.conflicts
        ],
        "clarification": result.clarification,
        "prompt": result.prompt,
        "tokens": result.tokens,
        "trace": result.trace.to_dict(),
    }


def _rejected(result: RecallResult) -> list[tuple[str, str]]:
    """(id, reason) of each rejected candidate, once, in trace order, capped."""
    chosen, seen, out = set(result.ids), set(), []
    for reason, ids in result.trace.rejections.items():
        for record_id in ids:
            if record_id not in chosen and record_id not in seen:
                seen.add(record_id)
                out.append((record_id, reason))
    return out[:_MAX_REJECTED]


def _rejected_types(mem: Engram, ctx: Context, result: RecallResult) -> dict[str, str]:
    """The type of each rejected memory (the trace holds ids only); '?' for one the
    caller cannot read (such as a live working-memory item)."""
    types = {}
    for record_id, _ in _rejected(result):
        try:
            types[record_id] = mem.get(ctx, record_id).type
        except NotFound:
            types[record_id] = "?"
    return types


def readable(result: RecallResult, types: dict[str, str]) -> str:
    """The human view: outcome, block, stage table, item table, conflicts."""
    trace = result.trace
    head = (
        f"status {result.status.value}  mode {trace.mode}  intent {trace.intent}  "
        f"tokens {trace.tokens_used}/{trace.token_budget}  {trace.total_ms:.1f} ms  "
        f"trace {trace.trace_id}"
    )
    stages = table(
        ("stage", "in", "out", "ms"),
        [(s.name, s.count_in, s.count_out, f"{s.ms:.2f}") for s in trace.stages],
    )
    parts = [head, "", result.prompt or "(nothing selected: no memory block)", "", stages, ""]
    parts.append(_items(result, types))
    if result.conflicts:
        parts += ["", "conflicts:"]
        parts += [f"  {c.key}: {', '.join(c.record_ids)}  ({c.reason})" for c in result.conflicts]
    if result.clarification:
        parts += ["", f"clarification: {result.clarification}"]
    failed = {n: c.error for n, c in trace.channels.items() if c.error}
    if failed:
        parts += ["", "failed channels: " + ", ".join(f"{n} ({e})" for n, e in failed.items())]
    return "\n".join(parts)


def _items(result: RecallResult, types: dict[str, str]) -> str:
    rows: list[tuple[object, ...]] = []
    for item in result.items:
        score_parts = ", ".join(
            f"{k} {v:.2f}" for k, v in item.components.items() if v and k != "semantic_raw"
        )
        rows.append(
            (
                item.record.id,
                item.record.type,
                f"{item.score:.3f}",
                "selected",
                shorten(item.reason, _REASON_WIDTH),
            )
        )
        rows.append(("", "", "", "", f"parts: {score_parts}"))
    rejected = _rejected(result)
    for record_id, reason in rejected:
        rows.append((record_id, types.get(record_id, "?"), "-", "rejected", reason))
    total = len({i for ids in result.trace.rejections.values() for i in ids} - set(result.ids))
    footer = (
        f"\n({total - len(rejected)} more rejected: see --json)" if total > len(rejected) else ""
    )
    if not rows:
        return "items: (no candidates)"
    return table(("item", "type", "score", "outcome", "why"), rows) + footer
