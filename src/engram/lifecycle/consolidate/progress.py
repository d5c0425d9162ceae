"""A tiny progress line on stderr, drawn only when stderr is a terminal.

Consolidation streams its groups, so the line shows the user being worked on
(``done/total`` users) and how many groups and episodes are behind it. On a pipe
or in a log file it writes nothing.
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["Progress"]

_WIDTH = 24


class Progress:
    """``users`` to go through; ``step`` redraws the line, ``close`` ends it."""

    def __init__(self, users: int, label: str, stream: TextIO | None = None,
                 enabled: bool | None = None) -> None:  # fmt: skip
        self._stream = stream or sys.stderr
        self._enabled = self._stream.isatty() if enabled is None else enabled
        self._users, self._label = max(users, 1), label
        self._drawn = False

    @classmethod
    def of(cls, label: str, wanted: bool | None) -> Progress | None:
        """A progress line for ``label``: None when ``wanted`` is False; drawn when
        ``wanted`` is True, or (None) when stderr is a terminal."""
        return None if wanted is False else cls(1, label, enabled=wanted)

    def total(self, users: int) -> None:
        """Set how many users the run goes through (known once they are listed)."""
        self._users = max(users, 1)

    def step(self, done_users: int, user: str, groups: int, episodes: int) -> None:
        """Redraw: ``done_users`` finished, working on ``user``."""
        if not self._enabled:
            return
        filled = _WIDTH * done_users // self._users
        bar = "#" * filled + "-" * (_WIDTH - filled)
        line = (f"\r{self._label} [{bar}] {done_users}/{self._users} users"
                f" | {user[:24]} | {groups} groups, {episodes} episodes")  # fmt: skip
        self._stream.write(line.ljust(120))
        self._stream.flush()
        self._drawn = True

    def close(self) -> None:
        """End the line (a newline) if one was drawn."""
        if self._enabled and self._drawn:
            self._stream.write("\n")
            self._stream.flush()
