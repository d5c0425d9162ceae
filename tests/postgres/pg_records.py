"""Records for the PostgreSQL store tests: every field set, a deterministic vector."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import numpy as np
from numpy.typing import NDArray

from engram.ids import new_id
from engram.scope import GLOBAL, USER
from engram.types import Authority, Record, Retention, Sensitivity, Source, Status, Tier

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
MODEL = "hashing-384"
DIM = 384


def vector_for(text: str) -> NDArray[np.float32]:
    """A deterministic unit vector for ``text`` (the embedder is faked in tests)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def make_record(
    content: str,
    *,
    tenant: str = "acme",
    user: str | None = "u1",
    agent: str | None = None,
    scope: str = USER,
    key: str | None = None,
    type_name: str = "fact",
    status: Status = Status.ACTIVE,
    at: datetime = T0,
    supersedes: str | None = None,
    version: int = 1,
    expires_at: datetime | None = None,
    derived_from: tuple[str, ...] = (),
    embedded: bool = True,
) -> Record:
    """A record with every field set to a plausible value."""
    if scope == GLOBAL:
        user = None
    return Record(
        id=new_id(), tenant_id=tenant, user_id=user, agent_id=agent, scope=scope,
        tier=Tier.SEMANTIC, type=type_name, key=key, value=None, content=content,
        authority=Authority.EXPLICIT_USER, confidence=0.9,
        source=Source(derived_from=derived_from), observed_at=at, valid_from=None,
        valid_to=None, created_at=at, updated_at=at, status=status, version=version,
        supersedes=supersedes, superseded_by=None, sensitivity=Sensitivity.LOW, purpose=None,
        consent_basis=None, retention=Retention.LONG_TERM, expires_at=expires_at,
        importance=0.5, access_count=0, last_accessed_at=None, private=False,
        embedding_model=MODEL if embedded else None,
        content_hash=hashlib.sha256(content.lower().encode()).hexdigest(),
    )  # fmt: skip


def later(minutes: int) -> datetime:
    """``T0`` plus some minutes."""
    return T0 + timedelta(minutes=minutes)
