"""Step 1 of the write path: validate a caller's arguments into a ``Proposal``.

This is the edge: every argument of ``remember`` is checked here and a bad one
raises ``InvalidArgument`` naming the argument and what to do, before anything
touches storage.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from engram.clock import require_aware
from engram.config import Config
from engram.errors import InvalidArgument
from engram.types import Authority, Proposal, Retention, Sensitivity, Source, parse_enum

__all__ = ["build_proposal", "content_hash", "normalise_content"]

_KEY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,199}$")
_SPACE_RE = re.compile(r"\s+")


def normalise_content(text: str) -> str:
    """Canonical form for duplicate detection: NFKC, casefolded, single spaces."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE_RE.sub(" ", folded).strip().rstrip(".!").strip()


def content_hash(text: str) -> str:
    """SHA-256 of the normalised content."""
    return hashlib.sha256(normalise_content(text).encode()).hexdigest()


def _unit(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InvalidArgument(f"{name} must be a number between 0 and 1, got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise InvalidArgument(f"{name} must be between 0 and 1, got {value!r}")
    return float(value)


def _time(value: object, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{name} must be a timezone-aware datetime or None")
    return require_aware(value, name)


def _optional_text(value: object, name: str, limit: int = 200) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise InvalidArgument(f"{name} must be a non-empty string of at most {limit} characters")
    return value


def _key(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _KEY_RE.match(value):
        raise InvalidArgument(
            f"key must match {_KEY_RE.pattern} (e.g. 'user.timezone'), got {value!r}"
        )
    return value


def _value(value: object) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"value must be JSON-serialisable: {exc}") from None
    return value


def _content(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"content must be a string, got {type(value).__name__}")
    return value.strip()


def build_proposal(
    config: Config,
    content: object,
    *,
    type: object = None,
    scope: str = "user",
    key: object = None,
    value: object = None,
    authority: object = Authority.EXPLICIT_USER,
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
) -> Proposal:
    """Validate ``remember``'s arguments; raise ``InvalidArgument`` on the first bad one.

    Content emptiness and size are policy decisions (REJECT with a reason), not
    argument errors, so they pass through here.
    """
    type_name = config.default_type if type is None else type
    if not isinstance(type_name, str):
        raise InvalidArgument(f"type must be a string, got {type_name!r}")
    config.policy(type_name)
    start, end = _time(valid_from, "valid_from"), _time(valid_to, "valid_to")
    if start is not None and end is not None and end <= start:
        raise InvalidArgument("valid_to must be later than valid_from")
    if not isinstance(private, bool):
        raise InvalidArgument(f"private must be True or False, got {private!r}")
    return Proposal(
        content=_content(content),
        type=type_name,
        scope=scope,
        key=_key(key),
        value=_value(value),
        authority=parse_enum(Authority, authority, "authority"),
        confidence=_unit(confidence, "confidence"),
        observed_at=_time(observed_at, "observed_at"),
        valid_from=start,
        valid_to=end,
        source=Source.coerce(source),
        sensitivity=parse_enum(Sensitivity, sensitivity, "sensitivity"),
        purpose=_optional_text(purpose, "purpose"),
        consent_basis=_optional_text(consent_basis, "consent_basis"),
        retention=None if retention is None else parse_enum(Retention, retention, "retention"),
        importance=_unit(importance, "importance"),
        private=private,
    )
