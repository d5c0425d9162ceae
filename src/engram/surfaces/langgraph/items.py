"""LangGraph items as Engram records, and back: pure code, no storage.

An item's dict is stored in the record's ``value`` inside an envelope that also
carries what LangGraph needs and Engram has no column for::

    {"langgraph": 1, "namespace": [...labels without the user...], "key": "...",
     "value": {...the item...}, "created_at": "<ISO time>", "ttl": minutes | null,
     "index": true | false}

The record's ``content`` (what Engram embeds, indexes and shows in a recall) is
derived from the dict: the text at the ``index`` fields when given (LangGraph's
path syntax), else its ``content``, ``text`` or ``memory`` field when that is a
string, else its compact JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langgraph.store.base import Item, SearchItem, get_text_at_path

from engram import limits
from engram.errors import InvalidArgument
from engram.types import Record

__all__ = ["TEXT_FIELDS", "Stored", "content_of", "envelope", "item_of", "matches_filter",
           "stored", "ttl_minutes"]  # fmt: skip

TEXT_FIELDS = ("content", "text", "memory")
_MARK = "langgraph"
_MAX_TTL_MINUTES = 1_000 * 365 * 24 * 60  # a thousand years: far from datetime's limits
_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


@dataclass(frozen=True, slots=True)
class Stored:
    """What an item's record holds about it (the envelope, read back)."""

    path: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    ttl: float | None
    indexed: bool


def checked_value(value: object, where: str) -> dict[str, Any]:
    """An item's value: a mapping with string keys (LangGraph's contract)."""
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"{where}: value must be a dict (or None to delete), "
                              f"got {type(value).__name__}")  # fmt: skip
    bad = [name for name in value if not isinstance(name, str)]
    if bad:
        raise InvalidArgument(f"{where}: value keys must be strings, got {limits.shown(bad[0])}")
    return dict(value)


def ttl_minutes(ttl: object, where: str) -> float | None:
    """A time to live in minutes: None (no expiry) or a positive finite number."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise InvalidArgument(f"{where}: ttl must be minutes (a number) or None")
    if not (math.isfinite(ttl) and 0 < ttl <= _MAX_TTL_MINUTES):
        raise InvalidArgument(f"{where}: ttl must be a positive number of minutes, at most "
                              f"{_MAX_TTL_MINUTES}; got {limits.shown(ttl)}")  # fmt: skip
    return float(ttl)


def content_of(value: Mapping[str, Any], fields: Sequence[str] | None) -> str:
    """The text Engram embeds and shows for an item (see the module notes); index
    fields that hold no text fall back to the default, so an item is never empty."""
    if fields:
        try:
            texts = [text for path in fields for text in get_text_at_path(value, path)]
        except (ValueError, TypeError, IndexError, KeyError) as exc:
            raise InvalidArgument(f"index fields {limits.shown(list(fields))} are not "
                                  f"LangGraph paths: {exc}") from None  # fmt: skip
        if any(text.strip() for text in texts):
            return "\n".join(texts)
    for name in TEXT_FIELDS:
        field = value.get(name)
        if isinstance(field, str) and field.strip():
            return field
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                      default=str)  # fmt: skip


def envelope(path: Sequence[str], key: str, value: dict[str, Any], created_at: datetime,
             ttl: float | None, indexed: bool) -> dict[str, Any]:  # fmt: skip
    """The record value of an item."""
    return {_MARK: 1, "namespace": list(path), "key": key, "value": value,
            "created_at": created_at.isoformat(), "ttl": ttl, "index": indexed}  # fmt: skip


def stored(record: Record) -> Stored | None:
    """The item a record holds, or None when the record is not one this store wrote
    (a memory written through the SDK, a tenant-wide one, a working item)."""
    body = record.value
    if not (isinstance(body, dict) and body.get(_MARK) == 1 and record.key):
        return None
    try:
        path, key, value = body["namespace"], body["key"], body["value"]
        created = datetime.fromisoformat(body["created_at"])
        ttl, indexed = body.get("ttl"), body.get("index", True)
    except (KeyError, TypeError, ValueError):
        return None
    if not (isinstance(path, list) and all(isinstance(p, str) for p in path)
            and isinstance(key, str) and isinstance(value, dict)):  # fmt: skip
        return None
    return Stored(tuple(path), key, value, created, ttl if isinstance(ttl, (int, float)) else None,
                  indexed is not False)  # fmt: skip


def item_of(namespace: tuple[str, ...], held: Stored, record: Record,
            score: float | None = None, ranked: bool = False) -> Item:  # fmt: skip
    """The LangGraph item of a record: ``SearchItem`` when ``ranked`` or scored."""
    if ranked or score is not None:
        return SearchItem(namespace, held.key, held.value, held.created_at, record.updated_at,
                          score)  # fmt: skip
    return Item(value=held.value, key=held.key, namespace=namespace,
                created_at=held.created_at, updated_at=record.updated_at)  # fmt: skip


def matches_filter(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """LangGraph's filter: every field equal (nested dicts and lists compared
    recursively), or satisfying ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``."""
    return all(_compare(value.get(name), want) for name, want in (wanted or {}).items())


def check_filter(wanted: object, where: str) -> None:
    """A filter is None or a dict with string keys whose operators are known."""
    if wanted is None:
        return
    if not isinstance(wanted, Mapping):
        raise InvalidArgument(f"{where}: filter must be a dict, got {type(wanted).__name__}")
    for name, want in wanted.items():
        if not isinstance(name, str):
            raise InvalidArgument(f"{where}: filter keys must be strings")
        _check_operators(want, where)


def _check_operators(want: object, where: str) -> None:
    if isinstance(want, Mapping):
        unknown = [k for k in want if isinstance(k, str) and k.startswith("$")
                   and k not in _OPERATORS]  # fmt: skip
        if unknown:
            raise InvalidArgument(f"{where}: unknown filter operator {limits.shown(unknown[0])}; "
                                  f"known: {', '.join(sorted(_OPERATORS))}")  # fmt: skip
        for inner in want.values():
            _check_operators(inner, where)


def _compare(have: Any, want: Any) -> bool:
    if isinstance(want, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in want):
            return all(_operator(have, op, operand) for op, operand in want.items())
        return isinstance(have, Mapping) and all(_compare(have.get(k), v) for k, v in want.items())
    if isinstance(want, (list, tuple)):
        return (isinstance(have, (list, tuple)) and len(have) == len(want)
                and all(_compare(h, w) for h, w in zip(have, want, strict=True)))  # fmt: skip
    return bool(have == want)


def _operator(have: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(have == operand)
    if op == "$ne":
        return bool(have != operand)
    left, right = _number(have), _number(operand)
    if left is None or right is None:
        return False  # a missing or non-numeric field never satisfies a comparison
    return {"$gt": left > right, "$gte": left >= right, "$lt": left < right,
            "$lte": left <= right}[op]  # fmt: skip


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except ValueError:
        return None
