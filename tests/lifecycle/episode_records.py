"""Plain episode records for the pure grouping and summariser tests."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from engram.ids import new_id
from engram.types import (
    Authority,
    Record,
    Retention,
    Sensitivity,
    Source,
    Status,
    Tier,
)

__all__ = ["episode"]


def episode(content: str, at: datetime, **fields: Any) -> Record:
    """An active episode of tenant acme, user u1, agent coder, observed at ``at``."""
    base = Record(
        id=new_id(), tenant_id="acme", user_id="u1", agent_id="coder", scope="user",
        tier=Tier.EPISODIC, type="episode", key=None, value=None, content=content,
        authority=Authority.EXPLICIT_USER, confidence=1.0, source=Source(), observed_at=at,
        valid_from=None, valid_to=None, created_at=at, updated_at=at, status=Status.ACTIVE,
        version=1, supersedes=None, superseded_by=None, sensitivity=Sensitivity.LOW,
        purpose=None, consent_basis=None, retention=Retention.LONG_TERM, expires_at=None,
        importance=0.5, access_count=0, last_accessed_at=None, private=False,
        embedding_model=None, content_hash=hashlib.sha256(content.encode()).hexdigest(),
    )  # fmt: skip
    return base.replace(**fields) if fields else base
