"""The quickstart: store seed 000's coding-agent memories and show what Engram does.

Stores the five memories of the iOS / Objective-C example, shows a governed
correction and a refused secret, lists what is stored, then recalls for the
request "Add network-state handling to the iOS application." and prints the
rendered memory block with the trace summary.
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


def _recall(mem: Engram, now: datetime) -> None:
    recall = getattr(mem, "recall", None)
    if recall is None:
        return
    result = recall(CONTEXT, "Add network-state handling to the iOS application.", now=now)
    _show(f"recall status: {result.status}", result.prompt or "(no memory block)")
    for item in result.items:
        parts = ", ".join(f"{k}={v:.2f}" for k, v in item.components.items())
        print(f"  {item.record.id} score={item.score:.3f} [{parts}]")
