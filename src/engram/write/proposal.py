"""Step 1 of the write path: validate a caller's arguments into a ``Proposal``.

This is the edge: every argument of ``remember`` is checked here and a bad one
raises ``InvalidArgument`` naming the argument and what to do, before anything
touches storage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from engram import limits
from engram.clock import require_aware
from engram.config import Config
from engram.errors import InvalidArgument
from engram.types import Proposal, Retention, Sensitivity, Source, Turn, parse_enum
from engram.write.provenance import authority_for

__all__ = [
    "build_proposal",
    "check_iterable",
    "check_turns",
    "content_hash",
    "normalise_content",
    "proposal_fields",
]

_KEY_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,199}")
_SPACE_RE = re.compile(r"\s+")
_FIELDS = frozenset(f.name for f in dataclasses.fields(Proposal))
_MAX_ROLE_CHARS = 64


def normalise_content(text: str) -> str:
    """Canonical form for duplicate detection: NFKC, casefolded, single spaces."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE_RE.sub(" ", folded).strip().rstrip(".!").strip()


def content_hash(text: str) -> str:
    """SHA-256 of the normalised content."""
    return hashlib.sha256(normalise_content(text).encode()).hexdigest()


def _unit(value: object, name: str) -> float:
    """A number in [0, 1]; NaN and integers too large for a float fail the comparison."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InvalidArgument(f"{name} must be a number between 0 and 1, got {limits.shown(value)}")
    return float(value)


def _time(value: object, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{name} must be a timezone-aware datetime or None")
    return require_aware(value, name)


def _optional_text(value: object, name: str, limit: int = limits.MAX_LABEL_CHARS) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise InvalidArgument(f"{name} must be a non-empty string of at most {limit} characters")
    return limits.label(value, name, limit)


def _key(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _KEY_RE.fullmatch(value):
        raise InvalidArgument(
            f"key must match {_KEY_RE.pattern} (e.g. 'user.timezone'), got {limits.shown(value)}"
        )
    return value


def _value(value: object) -> Any:
    """Bounded, finite, canonical JSON (see ``engram.limits.json_value``)."""
    try:
        return limits.json_value(value)
    except InvalidArgument as exc:
        raise InvalidArgument(f"value must be JSON-serialisable within the limits: {exc}") from None


def _content(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"content must be a string, got {type(value).__name__}")
    return limits.stored_text(value, "content").strip()


def build_proposal(
    config: Config,
    content: object,
    *,
    type: object = None,
    scope: str = "user",
    key: object = None,
    value: object = None,
    authority: object = None,
    confidence: object = 1.0,
    valid_from: object = None,
    valid_to: object = None,
    observed_at: object = None,
    source: Source | Mapping[str, Any] | None = None,
    sensitivity: object = Sensitivity.LOW,
    purpose: object = None,
    consent_basis: object = None,
    retention: object = None,
    importance: object = 0.5,
    private: object = False,
    agent_scope: object = None,
) -> Proposal:
    """Validate ``remember``'s arguments; raise ``InvalidArgument`` on the first bad one.

    Content emptiness and size are policy decisions (REJECT with a reason), not
    argument errors, so they pass through here (up to ``limits.MAX_TEXT_CHARS``).
    ``authority`` None means the default of the source kind; a claim above the
    kind's cap is refused (``write.provenance``).
    """
    type_name = config.default_type if type is None else type
    if not isinstance(type_name, str):
        raise InvalidArgument(f"type must be a string, got {limits.shown(type_name)}")
    config.policy(type_name)
    start, end = _time(valid_from, "valid_from"), _time(valid_to, "valid_to")
    if start is not None and end is not None and end <= start:
        raise InvalidArgument("valid_to must be later than valid_from")
    if not isinstance(private, bool):
        raise InvalidArgument(f"private must be True or False, got {limits.shown(private)}")
    if agent_scope not in (None, "user", "agent"):
        raise InvalidArgument(f"agent_scope must be 'user', 'agent' or None, got "
                              f"{limits.shown(agent_scope)}")  # fmt: skip
    origin = Source.coerce(source)
    return Proposal(
        content=_content(content),
        type=type_name,
        scope=scope,
        key=_key(key),
        value=_value(value),
        authority=authority_for(origin.kind, authority),
        confidence=_unit(confidence, "confidence"),
        observed_at=_time(observed_at, "observed_at"),
        valid_from=start,
        valid_to=end,
        source=origin,
        sensitivity=parse_enum(Sensitivity, sensitivity, "sensitivity"),
        purpose=_optional_text(purpose, "purpose"),
        consent_basis=_optional_text(consent_basis, "consent_basis"),
        retention=None if retention is None else parse_enum(Retention, retention, "retention"),
        importance=_unit(importance, "importance"),
        private=private,
        agent_scope=agent_scope,
    )


def proposal_fields(item: Mapping[Any, Any], where: str) -> dict[str, Any]:
    """``item`` as keyword arguments of ``build_proposal`` (plus ``content`` and
    ``scope``); an unknown or non-string field is ``InvalidArgument``, not a TypeError."""
    unknown = [name for name in item if not isinstance(name, str) or name not in _FIELDS]
    if unknown:
        names = ", ".join(sorted(repr(name)[:60] for name in unknown))
        raise InvalidArgument(f"{where} has unknown fields: {names}; known: {sorted(_FIELDS)}")
    return dict(item)


def check_iterable(items: object, name: str) -> None:
    """A collection of items, not a string, a mapping or a scalar."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidArgument(f"{name} must be a list of mappings")


def check_turns(turns: object) -> None:
    """A sequence of well-formed ``Turn``: a short role, bounded text, an aware time."""
    if isinstance(turns, (str, bytes)) or not isinstance(turns, Sequence):
        raise InvalidArgument("turns must be a sequence of engram.Turn")
    for index, turn in enumerate(turns):
        where = f"turns[{index}]"
        if not isinstance(turn, Turn):
            raise InvalidArgument(f"{where} must be an engram.Turn")
        limits.text(turn.role, f"{where}.role", _MAX_ROLE_CHARS)
        limits.stored_text(turn.text, f"{where}.text")
        if turn.time is not None:
            require_aware(turn.time, f"{where}.time")
        if turn.ref is not None:
            limits.label(turn.ref, f"{where}.ref", limits.MAX_SOURCE_REF_CHARS)
