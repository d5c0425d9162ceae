"""What the command-line tests share: the default identity options and ``Ran``, one
finished command (exit code and both outputs)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ID = ("--tenant", "acme", "--user", "u1")


@dataclass(frozen=True)
class Ran:
    """One finished command: its exit code and what it printed."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """stdout parsed as JSON."""
        return json.loads(self.out)


Engram = Callable[..., Ran]
