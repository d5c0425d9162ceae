"""What ``forget`` and ``erase_subject`` return: what was deleted, and what was checked.

A receipt claims only what its verification pass checked after the commit
(``lifecycle.verify``): ``checked`` names every check made, ``counts`` what each
found (rows, keys or 1 for a file that still held erased bytes; 0 everywhere
after a clean erasure), ``failed`` the checks that found something, and
``verified`` is True only when none did. ``audit_id`` is the hash of the audit
entry the deletion wrote; the entry names ids and a reason, never content.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["ErasureReceipt", "ForgetReceipt"]


def _none() -> Mapping[str, int]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ForgetReceipt:
    """What ``forget`` deleted and what was verified afterwards.

    ``deleted`` is the version chain (and a passage group's head chain), ``derived``
    the copies derived from it; ``traces`` counts stored and queued traces
    removed; ``tombstones`` the contents tombstoned (``store.tombstones``);
    ``scanned`` erased texts were looked for in the files (``short`` were under
    8 bytes, not scanned)."""

    deleted: tuple[str, ...]
    derived: tuple[str, ...]
    verified: bool
    traces: int = 0
    checked: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    scanned: int = 0
    short: int = 0
    counts: Mapping[str, int] = field(default_factory=_none)
    audit_id: str | None = None
    tombstones: int = 0


@dataclass(frozen=True, slots=True)
class ErasureReceipt:
    """What ``erase_subject`` deleted and what was verified afterwards (see
    ``ForgetReceipt``); ``working`` counts the working-memory items erased."""

    tenant_id: str
    user_id: str
    records: int
    derived: int
    traces: int
    verified: bool
    checked: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    scanned: int = 0
    short: int = 0
    working: int = 0
    counts: Mapping[str, int] = field(default_factory=_none)
    audit_id: str | None = None
    tombstones: int = 0
