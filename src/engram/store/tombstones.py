"""Tombstones: keyed digests of erased contents, so a replay cannot re-create them.

When ``forget`` or ``erase_subject`` deletes a record, the store keeps a
tombstone of its content for its owner: ``HMAC-SHA256(tenant key, owner, content
hash)``, where the content hash is the SHA-256 of the normalised content the
write path already computes for duplicate detection
(``write.proposal.content_hash``: NFKC, casefolded, single spaces, no final full
stop) and the owner is the record's user id (``NO_USER`` for tenant-wide
records). The tenant's key is random, made on its first tombstone
(``tombstone_keys``), and never leaves the store; no text is stored. So a
tombstone matches only the same content for the same owner: one user's erasure
never stops another user's write of the same sentence.

A tombstone row names its owner in a column of its own: the user id after
``forget``; ``ERASED`` after ``erase_subject`` (the subject's own tombstones, and
those of every record of theirs the erasure deleted). An erased subject's rows
thus name no user; their digests still depend on the user id, so a write for
that user id (a replayed conversation re-creating the subject) is refused. What
remains is a suppression list: nothing in it can be read back, and confirming
that a given user once had a given sentence needs the tenant's key, the user id
and the exact sentence; deleting the tenant's ``tombstone_keys`` row makes every
tombstone of the tenant meaningless (``docs/erasure.md``).

The write path asks ``Store.tombstoned`` for the contents it is about to write;
see ``write.tombstones`` for who is refused and who lifts a tombstone.
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["ERASED", "KEY_BYTES", "digest"]

# The row owner of an erased subject's tombstones. Context ids may not start with
# ":" (``engram.scope``), so no user id is ever this value.
ERASED = ":erased"
KEY_BYTES = 32


def digest(key: bytes, owner: str, content_hash: str) -> str:
    """The tombstone of a content for its owner under its tenant's key (hex, 256 bits)."""
    return hmac.new(key, f"{owner}\x1f{content_hash}".encode(), hashlib.sha256).hexdigest()
