"""One table that maps every Engram error to what each surface reports.

A surface looks an exception up here instead of choosing a status of its own, so
the REST API, the command line and the MCP server agree on what each failure
means. The lookup walks the exception's class hierarchy, most specific first, so
a subclass without a row of its own inherits its parent's.

``PROTOCOL`` holds the failures a network surface meets before or beside the SDK
(no credential, a body too large, malformed JSON, no such route), keyed by
their HTTP status, so those too have one row each.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram import errors

__all__ = ["PROTOCOL", "TABLE", "Outcome", "outcome_for", "protocol_outcome"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one error class is reported.

    ``http_status`` is the REST status, ``problem`` the last segment of the
    ``application/problem+json`` type URI, ``title`` its human title, and
    ``exit_code`` the command line's exit status. The command line keeps 0 (done),
    1 (the command answered no: a broken audit chain, an unconfirmed erasure) and
    130 (interrupted) for itself; 2 is argparse's usage error and, on purpose, the
    code of a refused argument too (both mean: bad input, nothing was done); 70,
    the root row, is an internal error (``EX_SOFTWARE``). See docs/cli.md.
    """

    http_status: int
    problem: str
    title: str
    exit_code: int


TABLE: dict[type[BaseException], Outcome] = {
    errors.InvalidArgument: Outcome(422, "invalid-argument", "Invalid argument", 2),
    errors.IncompleteIdentity: Outcome(422, "incomplete-identity", "Incomplete identity", 2),
    errors.ConfigError: Outcome(422, "config-error", "Configuration error", 3),
    errors.Conflict: Outcome(409, "conflict", "Conflict", 4),
    errors.NotFound: Outcome(404, "not-found", "Not found", 5),
    errors.Forbidden: Outcome(403, "forbidden", "Forbidden", 6),
    errors.StoreError: Outcome(500, "store-error", "Store error", 7),
    errors.MigrationError: Outcome(500, "migration-error", "Migration error", 7),
    errors.IndexMismatch: Outcome(409, "index-mismatch", "Index mismatch", 8),
    errors.Unavailable: Outcome(503, "unavailable", "Service unavailable", 9),
    errors.EmbeddingError: Outcome(503, "embedding-error", "Embedding failed", 10),
    errors.PartialWrite: Outcome(500, "partial-write", "Partial write", 11),
    errors.EngramError: Outcome(500, "engram-error", "Engram error", 70),
}


def outcome_for(exc: BaseException) -> Outcome:
    """The row for ``exc``: its own class's, else its nearest ancestor's; errors
    that are not Engram's get the root row (a surface reports them as internal)."""
    for cls in type(exc).__mro__:
        row = TABLE.get(cls)
        if row is not None:
            return row
    return TABLE[errors.EngramError]


# Failures of the transport itself, not of the SDK: keyed by HTTP status.
PROTOCOL: dict[int, Outcome] = {
    400: Outcome(400, "malformed-request", "Malformed request", 2),
    401: Outcome(401, "unauthorized", "Unauthorized", 6),
    403: Outcome(403, "forbidden", "Forbidden", 6),
    404: Outcome(404, "no-route", "No such route", 5),
    405: Outcome(405, "method-not-allowed", "Method not allowed", 2),
    413: Outcome(413, "content-too-large", "Content too large", 2),
    415: Outcome(415, "unsupported-media-type", "Unsupported media type", 2),
    422: Outcome(422, "invalid-request", "Invalid request", 2),
    429: Outcome(429, "rate-limited", "Too many requests", 9),
    500: Outcome(500, "internal-error", "Internal error", 1),
}


def protocol_outcome(status: int) -> Outcome:
    """The row for a transport failure of HTTP ``status``; a status without a row of
    its own gets a generic one with that status (the title from its class: 4xx, 5xx)."""
    row = PROTOCOL.get(status)
    if row is not None:
        return row
    if 400 <= status < 500:
        return Outcome(status, "client-error", "Client error", 2)
    return Outcome(status, "internal-error", "Internal error", 1)
