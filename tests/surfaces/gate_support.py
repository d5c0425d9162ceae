"""What the recall gate's REST and MCP tests share: a recall held until released, and
the wait for it to take the gate's only slot."""

from __future__ import annotations

import threading
import time
from typing import Any

from engram import Engram
from engram.surfaces.gate import RecallGate


def hold_recalls(mem: Engram) -> threading.Event:
    """Make ``mem``'s recalls wait until the returned event is set (at most 10 s)."""
    go = threading.Event()
    real = mem.recall

    def held(*args: Any, **kwargs: Any) -> Any:
        go.wait(10)
        return real(*args, **kwargs)

    mem.recall = held  # type: ignore[method-assign]
    return go


def wait_until_full(gate: RecallGate, seconds: float = 10.0) -> None:
    """Return once every slot of ``gate`` is taken (a running recall holds it)."""
    deadline = time.monotonic() + seconds
    while gate._free and time.monotonic() < deadline:
        time.sleep(0.005)
