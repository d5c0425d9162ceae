"""A one-line progress display on stderr for long commands (import, index rebuild).

It draws only when stderr is a terminal, so pipes, files and tests read clean
output. A ticker thread redraws the line a few times a second: the count so far,
a bar when the total is known, and the elapsed time, so work that reports no
steps (one import transaction) still shows that it is running. The line is
erased when the work ends, successfully or not.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO

__all__ = ["Progress"]

_WIDTH = 24
_SPIN = "|/-\\"


class Progress:
    """``with Progress("re-embedding", unit="records") as bar: bar.advance(256)``."""

    def __init__(
        self,
        label: str,
        *,
        total: int | None = None,
        unit: str = "",
        stream: TextIO | None = None,
        interval: float = 0.2,
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream)
        self.done = 0
        self._interval = interval
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._ticks = 0
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, name="engram-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.enabled:
            with self._lock:
                self.stream.write("\r\033[K")
                self.stream.flush()

    def advance(self, count: int) -> None:
        """Count ``count`` more units done (redrawn on the next tick)."""
        self.done += count

    def line(self) -> str:
        """The current line: label, spinner or bar, count, rate and elapsed seconds."""
        elapsed = time.monotonic() - self._started
        parts = [self.label]
        if self.total:
            filled = min(_WIDTH, round(_WIDTH * self.done / self.total))
            parts.append(f"[{'#' * filled}{'.' * (_WIDTH - filled)}] {self.done}/{self.total}")
        else:
            parts.append(_SPIN[self._ticks % len(_SPIN)])
            if self.done:
                parts.append(str(self.done))
        if self.unit and (self.done or self.total):
            parts.append(self.unit)
        if self.done and elapsed > 0:
            parts.append(f"({self.done / elapsed:,.0f}/s)")
        parts.append(f"{elapsed:.1f} s")
        return " ".join(parts)

    def _tick(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                self.stream.write("\r\033[K" + self.line())
                self.stream.flush()
            self._ticks += 1
            self._stop.wait(self._interval)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False
