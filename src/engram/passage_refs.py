"""The passage selector of ``source.ref``: how the passages of one long memory name
their place (``<caller's ref>#p<i>/<n>``) and the group they belong to.

Shared by the write path, which makes passages (``write.passages``), and the read
path, which must never merge two passages of one memory as near-duplicates.
"""

from __future__ import annotations

import re

from engram.types import Record

__all__ = ["group_of", "parsed", "selector"]

_SELECTOR = re.compile(r"#p([1-9][0-9]{0,2})/([1-9][0-9]{0,2})\Z")


def selector(ref: str | None, index: int, count: int) -> str:
    """The ``source.ref`` of passage ``index`` (1-based) of ``count``."""
    return f"{ref or ''}#p{index}/{count}"


def parsed(ref: str | None) -> tuple[str, int, int] | None:
    """(caller's ref, index, count) of a passage ref, or None."""
    match = _SELECTOR.search(ref or "")
    if match is None or ref is None:
        return None
    index, count = int(match.group(1)), int(match.group(2))
    return (ref[: match.start()], index, count) if index <= count else None


def group_of(record: Record) -> str | None:
    """The id of the first passage of ``record``'s long memory (its own id for the
    first passage), or None when ``record`` is not a passage."""
    place = parsed(record.source.ref)
    if place is None:
        return None
    if place[1] == 1:
        return record.id
    derived = record.source.derived_from
    return derived[0] if len(derived) == 1 else None
