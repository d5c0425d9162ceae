"""A server process's garbage collection: long-lived objects leave the full scans.

CPython's full (generation 2) collection walks every reference of every tracked
container, and each step reads the object referred to. A store's in-memory
engines (the record ids of every partition, lexical postings, the rerank caches)
hold most of a server's references (about 900,000 at 100K records), so one full
collection took 60-90 ms here, during which no thread of the process runs Python;
under load that pause lands on whichever recalls are in flight, in their p99
(``docs/reliability/limits.md``, "Pauses of the garbage collector").

A server owns its process, so after each full collection it freezes the survivors
(``gc.freeze``): later collections scan only what was allocated since. A frozen
object whose last reference goes is still freed at once (reference counting is
unaffected); only a reference cycle among frozen objects would wait. So the policy
unfreezes, and the next full collection scans everything, once the frozen objects
have grown by a quarter in number since the last such scan (Python's own rule for
when a full collection is due) or ``rescan_seconds`` have passed: cyclic garbage
waits at most that long and, counted in objects, comes to about a quarter of what
was frozen at the last full scan. Counting the frozen set walks it, so the growth
is checked at most every ``GROWTH_CHECK_SECONDS``, not at every collection.

The SDK never does this on its own: an embedding application's objects are its
own, and freezing them could keep its cycles alive. Python 3.14's incremental
collector already bounds its pauses, and a free-threaded build marks every object
to freeze it, so on those ``install`` leaves the collector alone.
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engram.errors import ConfigError

__all__ = ["DEFAULT_RESCAN_SECONDS", "FreezePolicy", "add_option", "checked", "install"]

DEFAULT_RESCAN_SECONDS = 600.0
GROWTH = 1.25  # frozen objects past this multiple of the last full scan's: scan again
GROWTH_CHECK_SECONDS = 10.0  # gc.get_freeze_count walks the frozen set: not every time
_INCREMENTAL = sys.version_info >= (3, 14)  # its collector works in small increments
_FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def checked(rescan_seconds: float) -> float:
    """``rescan_seconds`` when it is a finite number of seconds >= 0 (0: no policy)."""
    if isinstance(rescan_seconds, bool) or not isinstance(rescan_seconds, (int, float)):
        raise ConfigError(f"gc rescan seconds must be a number, not {rescan_seconds!r}")
    try:
        seconds = float(rescan_seconds)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError(f"gc rescan seconds must be finite and >= 0, not {rescan_seconds}")
    return seconds


def add_option(parser: argparse.ArgumentParser, process: str = "each server process") -> None:
    """Add ``--gc-rescan-seconds`` (``args.gc_rescan_seconds``) to a serving command."""
    parser.add_argument(
        "--gc-rescan-seconds", type=float, default=DEFAULT_RESCAN_SECONDS, metavar="S",
        help=f"{process} freezes what survives a full garbage collection, so later ones "
        "scan only new objects; one scans everything when the frozen objects grew by a "
        "quarter or S seconds passed (default 600; 0: Python's own collection; nothing on "
        "Python 3.14+, whose collector is incremental)",
    )  # fmt: skip


@dataclass(eq=False)  # compared by identity: gc.callbacks.remove finds this one
class FreezePolicy:
    """Freeze the survivors of each full collection; let one collection scan
    everything when the frozen set has grown by a quarter or ``rescan_seconds`` passed."""

    rescan_seconds: float = DEFAULT_RESCAN_SECONDS
    clock: Callable[[], float] = time.monotonic
    rescans: int = 0  # full collections that scanned everything
    freezes: int = 0
    _rescanned_at: float = field(default=0.0, init=False)
    _checked_at: float = field(default=0.0, init=False)  # the last count of the frozen set
    _baseline: int = field(default=0, init=False)  # frozen after the last full scan
    _unfrozen: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._rescanned_at = self._checked_at = self.clock()
        self._baseline = gc.get_freeze_count()

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        """A ``gc.callbacks`` entry: act when a full collection has ended."""
        if phase != "stop" or info.get("generation") != 2:
            return
        if self._unfrozen:  # this collection has just scanned everything
            self._unfrozen = False
            self._rescanned_at = self._checked_at = self.clock()
            self.rescans += 1
            gc.freeze()
            self._baseline = gc.get_freeze_count()  # a walk, but only after a full scan
        elif self._due():
            gc.unfreeze()  # the next full collection sees every object again
            self._unfrozen = True
            return
        else:
            gc.freeze()
        self.freezes += 1

    def _due(self) -> bool:
        now = self.clock()
        if now - self._rescanned_at >= self.rescan_seconds:
            return True
        if now - self._checked_at < GROWTH_CHECK_SECONDS:
            return False
        self._checked_at = now
        return gc.get_freeze_count() > self._baseline * GROWTH


def install(rescan_seconds: float = DEFAULT_RESCAN_SECONDS) -> Callable[[], None]:
    """Collect once, freeze what survives (modules, the app, the open store), and keep
    freezing after every full collection; returns the function that undoes it (the
    callback removed, every object unfrozen). Installs nothing when
    ``rescan_seconds`` is 0, when a policy is already installed in this process, on
    Python 3.14 and later, or on a free-threaded build."""
    seconds = checked(rescan_seconds)
    installed = any(isinstance(cb, FreezePolicy) for cb in gc.callbacks)
    if seconds == 0 or installed or _INCREMENTAL or _FREE_THREADED:
        return lambda: None
    gc.collect()
    gc.freeze()
    policy = FreezePolicy(seconds)
    gc.callbacks.append(policy)

    def uninstall() -> None:
        if policy in gc.callbacks:
            gc.callbacks.remove(policy)
        gc.unfreeze()

    return uninstall
