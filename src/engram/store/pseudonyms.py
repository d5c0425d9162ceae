"""Pseudonyms for the audit log: users appear under a keyed hash, never by their id.

Each (tenant, user) gets a random 32-byte key on its first audited change, kept in
``audit_subjects`` (the only table where the user id sits next to the key). An
audit entry stores ``s:`` + HMAC-SHA256(key, tenant, user), truncated to 128
bits, in its ``user_id`` column (and in an actor such as ``user:<id>``). Reading
a subject's entries recomputes the pseudonym from the key. ``erase_subject``
deletes the key: the subject's entries stay in the hash chain, still verifiable,
but nothing left in the store links them to the user any more (crypto-shredding).

Entries written before migration 0015 keep the plain user id they were written
with: the log is append-only and its hashes cover that column.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac

from engram.store.audit import AuditEntry

__all__ = ["PREFIX", "is_pseudonym", "pseudonym", "pseudonymised"]

PREFIX = "s:"
_CHARS = 32  # hex characters kept: 128 bits


def pseudonym(key: bytes, tenant_id: str, user_id: str) -> str:
    """The audit name of one user of one tenant under its key."""
    mac = hmac.new(key, f"{tenant_id}\x1f{user_id}".encode(), hashlib.sha256)
    return PREFIX + mac.hexdigest()[:_CHARS]


def is_pseudonym(value: str) -> bool:
    """True for a value shaped like one ``pseudonym`` makes. A user id may have that
    shape too (``s:`` and an MD5), so this never decides whether to pseudonymise."""
    body = value[len(PREFIX) :]
    return (
        value.startswith(PREFIX)
        and len(body) == _CHARS
        and all(c in "0123456789abcdef" for c in body)
    )


def pseudonymised(entry: AuditEntry, name: str) -> AuditEntry:
    """``entry`` with its user (and an actor naming that user) replaced by ``name``."""
    actor = f"user:{name}" if entry.actor == f"user:{entry.user_id}" else entry.actor
    return dataclasses.replace(entry, user_id=name, actor=actor)
