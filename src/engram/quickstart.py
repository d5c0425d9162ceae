"""The quickstart: store seed 000's coding-agent memories and show what Engram does.

Stores the memories of the iOS / Objective-C example, shows a model guess kept
as disputed and a refused secret, lists what is stored, then recalls for the
request "Add network-state handling to the iOS application.": the request, what
was selected with its reason and non-zero score parts, what was left out and
why (from the trace), and the memory block an agent puts in its prompt.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from engram.clock import FrozenClock
from engram.engram import Engram
from engram.scope import Context

__all__ = ["SEED_MEMORIES", "run"]

SEED_MEMORIES: tuple[dict[str, Any], ...] = (
    {"content": "User prefers Python for data scripts.", "type": "preference",
     "key": "lang.data_scripts", "value": "Python"},
    {"content": "Use Objective-C for iOS implementation.", "type": "constraint",
     "scope": "repo:lunest-ios", "key": "ios.language", "value": "Objective-C"},
    {"content": "User tested SwiftUI last month for a prototype screen.", "type": "episode",
     "scope": "project:lunest", "authority": "tool_observation", "confidence": 0.8},
    {"content": "The backend service runs on Python 3.12.", "type": "fact",
     "scope": "project:lunest", "key": "backend.runtime", "value": "Python 3.12"},
    {"content": "For this repository, do not modify generated files.", "type": "rule",
     "scope": "repo:lunest-ios", "key": "repo.generated_files", "value": "read-only"},
    {"content": "Previous implementation treated an unknown network type as offline.",
     "type": "incident", "scope": "project:lunest", "authority": "tool_observation",
     "confidence": 0.9},
)  # fmt: skip

CONTEXT = Context(tenant_id="acme", user_id="u42", agent_id="coder", session_id="s1",
                  project_id="lunest", repository_id="lunest-ios", task_id="net-state")  # fmt: skip


def _show(label: str, text: str) -> None:
    print(f"\n== {label} ==\n{text}")


def run(db: str = "sqlite:///engram.db", embedder: str = "local") -> None:
    """Store the seed memories in ``db`` and print what Engram keeps and recalls."""
    clock = FrozenClock(datetime(2026, 7, 16, 9, 30, tzinfo=UTC))
    with Engram.open(db, embedder=embedder, clock=clock) as mem:
        for item in SEED_MEMORIES:
            w = mem.remember(CONTEXT, **item)
            print(f"{w.operation:9} {item['content']}  ({w.reason})")
        clock.advance(days=1)
        w = mem.remember(CONTEXT, "Use Swift for iOS implementation.", type="constraint",
                         scope="repo:lunest-ios", key="ios.language", value="Swift",
                         authority="model_inference", confidence=0.7)  # fmt: skip
        print(f"{w.operation:9} a model guess that contradicts the user  ({w.reason})")
        w = mem.remember(CONTEXT, "The deploy password=hunter2 for staging.")
        print(f"{w.operation:9} a secret  ({w.reason})")
        rows = [f"{r.id}  {r.type:10} {r.scope:16} {r.authority:16} {r.content}"
                for r in mem.list(CONTEXT, status=None, limit=20)]  # fmt: skip
        _show("stored memories (every status)", "\n".join(rows))
        _recall(mem, clock.now() + timedelta(minutes=5))
        print(f"\naudit chain intact: {mem.audit_verify().ok}")


REQUEST = "Add network-state handling to the iOS application."

# What each trace rejection reason means, for a reader of the quickstart.
_WHY = {
    "budget": "relevant, but did not fit the budget",
    "below_relevance_floor": "not relevant enough to this request (below the relevance floor)",
    "retention_expired": "past its retention",
    "not_valid_at_as_of": "not valid at the time asked about",
    "below_confidence_floor": "too uncertain for its type",
    "purpose_mismatch": "stored for another purpose",
    "sensitivity": "sensitive, and the request names no matching purpose",
}


def _why(reason: str) -> str:
    if reason.startswith("status_"):
        return f"{reason[len('status_') :]}: not a current memory"
    return _WHY.get(reason, reason)


def _recall(mem: Engram, now: datetime) -> None:
    result = mem.recall(CONTEXT, REQUEST, now=now)
    print(f"\n== recall ==\nrequest: {REQUEST!r}\nstatus:  {result.status}")
    stored = {r.id: r for r in mem.list(CONTEXT, status=None, limit=100)}
    texts = {record_id: r.content for record_id, r in stored.items()}
    print("\nselected (best first):")
    for item in result.items:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in item.components.items()
                          if v and k != "semantic_raw")  # fmt: skip
        print(f"  {item.score:.2f}  {item.record.content}\n        why: {item.reason}"
              f"\n        score parts: {parts}")  # fmt: skip
    print("\nleft out:")
    chosen = set(result.ids)
    seen: set[str] = set()
    for reason, ids in result.trace.to_dict()["rejections"].items():
        for record_id in ids:
            if record_id in chosen or record_id in seen or record_id not in texts:
                continue
            seen.add(record_id)
            print(f"  {texts[record_id]}\n        why: {_why(reason)}")
    for record_id, record in stored.items():
        if record_id in chosen or record_id in seen:
            continue
        why = ("disputed: a lower-authority contradiction, kept for confirmation and never "
               "recalled") if record.status == "disputed" else (
               f"{record.status}: not a current memory" if record.status != "active"
               else "not a candidate: no shared key, words or meaning")  # fmt: skip
        print(f"  {record.content}\n        why: {why}")
    _show("the memory block an agent puts in its prompt", result.prompt or "(none)")
