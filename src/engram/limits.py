"""Documented bounds on every field a caller hands in, and the checks that enforce them.

Each limit is a named constant (the table in ``docs/sdk.md`` lists them) so that
no field is unbounded: one oversized ``value`` or ``source.ref`` slows every
later recall of its owner, and a value that JSON or SQLite cannot round-trip
(NaN, an integer beyond 64 bits, a lone surrogate, a non-string dict key) either
breaks ``export()`` or makes identical writes look different. Every check raises
``InvalidArgument`` naming the field and what to do, never a builtin error.
"""

from __future__ import annotations

import json
import math
import re
import reprlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from engram.errors import InvalidArgument

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_DERIVED_FROM",
    "MAX_IDENTIFIER_CHARS",
    "MAX_INT",
    "MAX_LABEL_CHARS",
    "MAX_OFFSET",
    "MAX_QUERY_CHARS",
    "MAX_REASON_CHARS",
    "MAX_SOURCE_REF_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_VALUE_BYTES",
    "MAX_VALUE_DEPTH",
    "MIN_INT",
    "check_moment",
    "identifier",
    "identifiers",
    "json_value",
    "label",
    "shown",
    "stored_text",
    "text",
]

MAX_IDENTIFIER_CHARS = 200  # tenant, user, agent, scope ids, memory and trace ids
MAX_TEXT_CHARS = 1_048_576  # content and turn text; content above the policy's bytes is REJECTed
MAX_QUERY_CHARS = 32_768  # a recall query
MAX_REASON_CHARS = 1_000  # a retraction reason
MAX_LABEL_CHARS = 200  # purpose, consent_basis
MAX_SOURCE_REF_CHARS = 1_000  # source.ref
MAX_DERIVED_FROM = 256  # ids in source.derived_from
MAX_VALUE_BYTES = 16_384  # value, serialised as compact UTF-8 JSON
MAX_VALUE_DEPTH = 32  # nesting of lists and objects in value
MIN_INT, MAX_INT = -(2**63), 2**63 - 1  # integers SQLite and common JSON readers keep exactly
MAX_OFFSET = 2**31 - 1  # list(offset=...)
# Datetimes a caller may pass: far enough from datetime.min/max that adding a
# retention period or converting between time zones can never overflow.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9000, 12, 31, tzinfo=UTC)

_SURROGATE = re.compile("[\ud800-\udfff]")
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 3, 60, 60


def shown(value: object) -> str:
    """A short repr for an error message: bounded in length and nesting (a plain
    ``repr`` of a 10 MB string or a 5,000-deep list is the problem, not the message)."""
    return _SHOWN.repr(value)


def _no_surrogates(value: str, name: str) -> None:
    if _SURROGATE.search(value):
        raise InvalidArgument(f"{name} holds a lone surrogate; pass valid Unicode text")


def identifier(value: object, name: str) -> str:
    """A printable id: non-empty, no surrounding whitespace, at most 200 characters.

    ``str.isprintable`` refuses control, format, surrogate, private-use and
    unassigned characters and every separator except the ASCII space, so
    ``"u42\\n"`` or ``"u42\\u200b"`` can never become a second identity.
    """
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a string, got {type(value).__name__}")
    if not 0 < len(value) <= MAX_IDENTIFIER_CHARS:
        raise InvalidArgument(f"{name} must be 1-{MAX_IDENTIFIER_CHARS} characters long")
    if value != value.strip() or not value.isprintable():
        raise InvalidArgument(
            f"{name} must be printable characters without surrounding whitespace, "
            f"got {shown(value)}"
        )
    return value


def identifiers(value: object, name: str, limit: int) -> tuple[str, ...]:
    """A list (not a string) of at most ``limit`` identifiers."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidArgument(f"{name} must be a list of record ids")
    if len(value) > limit:
        raise InvalidArgument(f"{name} holds {len(value)} ids; the limit is {limit}")
    return tuple(identifier(item, f"{name}[{i}]") for i, item in enumerate(value))


def text(value: object, name: str, limit: int = MAX_TEXT_CHARS) -> str:
    """A string of at most ``limit`` characters that encodes as UTF-8."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise InvalidArgument(f"{name} is {len(value)} characters; the limit is {limit}")
    _no_surrogates(value, name)
    return value


def stored_text(value: object, name: str, limit: int = MAX_TEXT_CHARS) -> str:
    """Text a memory is made of (content, a turn's text): ``text`` without NUL
    (U+0000), which PostgreSQL's ``text`` type cannot hold. Refused on every backend
    alike, so a write that SQLite would take is not a 500 on PostgreSQL."""
    checked = text(value, name, limit)
    if "\x00" in checked:
        raise InvalidArgument(f"{name} holds a NUL character (U+0000); remove it")
    return checked


def nul_as_space(text: str) -> str:
    """``text`` with each NUL (U+0000) read as a space: for text Engram derives from
    stored or generated text (a summary, a turn made of an older episode), which a
    record written before ``stored_text`` refused NUL may still hold."""
    return text.replace("\x00", " ")


def label(value: object, name: str, limit: int) -> str:
    """Short printable text (a reference, a purpose): no control or format characters."""
    checked = text(value, name, limit)
    if not checked.strip() or not checked.isprintable():
        raise InvalidArgument(
            f"{name} must be non-empty printable text of at most {limit} characters"
        )
    return checked


def check_moment(value: datetime, name: str) -> datetime:
    """An aware datetime inside [EARLIEST, LATEST]; later arithmetic cannot overflow."""
    try:
        inside = EARLIEST <= value <= LATEST
    except OverflowError:
        inside = False
    if not inside:
        raise InvalidArgument(f"{name} must lie between {EARLIEST.date()} and {LATEST.date()}")
    return value


class _Walk:
    """One pass over a JSON value: types, depth, finiteness, integer range, a size budget."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.budget = MAX_VALUE_BYTES

    def spend(self, amount: int, path: str) -> None:
        self.budget -= amount
        if self.budget < 0:
            raise InvalidArgument(
                f"{self.name} is larger than {MAX_VALUE_BYTES} bytes of JSON (at {path})"
            )

    def visit(self, item: object, path: str, depth: int) -> None:
        if depth > MAX_VALUE_DEPTH:
            raise InvalidArgument(f"{path} nests deeper than {MAX_VALUE_DEPTH} levels")
        self.spend(1, path)
        if item is None or isinstance(item, bool):
            return
        if isinstance(item, int):
            if not MIN_INT <= item <= MAX_INT:
                raise InvalidArgument(f"{path} is an integer outside the signed 64-bit range")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidArgument(f"{path} must be a finite number, got {shown(item)}")
        elif isinstance(item, str):
            self.spend(len(item), path)
            _no_surrogates(item, path)
        elif isinstance(item, (list, tuple)):
            for i, child in enumerate(item):
                self.visit(child, f"{path}[{i}]", depth + 1)
        elif isinstance(item, dict):
            self.mapping(item, path, depth)
        else:
            raise InvalidArgument(
                f"{path} must be JSON (null, bool, number, string, list or object with string "
                f"keys), got {type(item).__name__}"
            )

    def mapping(self, item: dict[Any, Any], path: str, depth: int) -> None:
        for key, child in item.items():
            if not isinstance(key, str):
                raise InvalidArgument(f"{path} has a non-string key {type(key).__name__}")
            self.spend(len(key), path)
            _no_surrogates(key, f"{path} key")
            self.visit(child, f"{path}.{key}", depth + 1)


def json_value(value: object, name: str = "value") -> Any:
    """The canonical JSON form of ``value`` (tuples become lists), or ``InvalidArgument``.

    Returning what a JSON round trip gives back means the stored value compares
    equal to the next identical write, so CONFIRM is decided, not a new version.
    """
    if value is None:
        return None
    _Walk(name).visit(value, name, 0)
    dumped = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if len(dumped.encode()) > MAX_VALUE_BYTES:
        raise InvalidArgument(f"{name} is larger than {MAX_VALUE_BYTES} bytes of JSON")
    return json.loads(dumped)
