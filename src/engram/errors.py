"""Every error Engram raises, rooted at one class.

Callers catch ``EngramError`` for anything Engram-specific, or the builtin each
error also derives from (``ValueError``, ``LookupError``, ``PermissionError``)
when they do not care that it came from Engram.

    EngramError
    ├── InvalidArgument (ValueError)       bad input at a public edge
    │   ├── IncompleteIdentity             context lacks tenant or user
    │   ├── ConfigError                    configuration cannot be used
    │   └── Conflict                       the memory changed since the caller read it
    ├── NotFound (LookupError)             no such record in the caller's view
    ├── Forbidden (PermissionError)        the caller may not do this
    ├── StoreError                         the database failed or is unusable
    │   ├── MigrationError                 the schema could not be brought up to date
    │   ├── IndexMismatch                  stored vectors come from another embedder
    │   └── Unavailable                    a server cannot be reached, a file stays locked
    ├── EmbeddingError                     the embedder failed or is not installed
    │   └── EmbeddingTimeout               the embedder did not answer in time
    └── PartialWrite                       a chunked bulk write failed part-way

Recall outcomes such as ``empty`` or ``ambiguous`` are statuses, not errors.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "Conflict",
    "EmbeddingError",
    "EmbeddingTimeout",
    "EngramError",
    "Forbidden",
    "IncompleteIdentity",
    "IndexMismatch",
    "InvalidArgument",
    "MigrationError",
    "NotFound",
    "PartialWrite",
    "StoreError",
    "Unavailable",
]


class EngramError(Exception):
    """Root of every error Engram raises on purpose."""


class InvalidArgument(EngramError, ValueError):
    """An argument is malformed; the message says which one and how to fix it."""


class IncompleteIdentity(InvalidArgument):
    """A context lacks tenant or user, so no visibility can be derived from it."""


class ConfigError(InvalidArgument):
    """A configuration value is missing, malformed or inconsistent."""


class Conflict(InvalidArgument):
    """The memory is no longer in the state the change was asked of: another writer
    superseded, retracted or expired it first. Nothing was written; the message names
    the current version where there is one (see ``history``)."""


class NotFound(EngramError, LookupError):
    """No record with that id is visible to the caller (it may exist elsewhere)."""


class Forbidden(EngramError, PermissionError):
    """The caller's identity does not allow the operation (e.g. writing global scope)."""


class StoreError(EngramError):
    """The storage backend failed or is in a state Engram cannot use."""


class MigrationError(StoreError):
    """The schema could not be migrated; the database was left as it was."""


class IndexMismatch(StoreError):
    """Vector search was refused because stored vectors come from another model."""

    @classmethod
    def between(cls, stored: str, wanted: str) -> IndexMismatch:
        """The error for a store of ``stored`` vectors opened with ``wanted`` (every
        backend words it the same way)."""
        return cls(
            f"stored vectors come from embedding model {stored!r} but this store was opened "
            f"with {wanted!r}; vectors of different models are never compared. Run "
            f"`engram index rebuild` to re-embed every record with the current embedder "
            f"(key and lexical search keep working meanwhile)."
        )


class Unavailable(StoreError):
    """A server the deployment depends on cannot be reached or refused the connection,
    or a lock another writer holds did not come free within the bound (a SQLite
    file past ``sqlite.busy_timeout_ms``, a PostgreSQL tenant's writer lock past
    ``postgres.statement_timeout_ms``); nothing was written, and a retry may succeed.

    The message names the host and port (or the file), never a password from the URL."""


class EmbeddingError(EngramError):
    """The embedder could not produce vectors (not installed, failed, bad answer)."""


class EmbeddingTimeout(EmbeddingError):
    """The embedder did not answer within its configured time (``RecallConfig`` and
    ``WritePolicy`` ``embed_timeout_seconds``): a recall answers without its vector
    channel (status ``partial``), a write stores nothing."""


class PartialWrite(EngramError):
    """A bulk write larger than one chunk failed after some chunks had committed.

    ``results`` are the committed items' results, in input order (the first
    ``len(results)`` items); the cause is chained. Nothing of the failing chunk
    was written.
    """

    def __init__(self, message: str, results: list[object]) -> None:
        super().__init__(message)
        self.results = results
