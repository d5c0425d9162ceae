"""How PostgreSQL failures reach callers: engram errors that name the server and
database, never the password.

``Unavailable`` is a ``StoreError`` for a database that cannot answer now (down,
unreachable, refused the login, cancelled a statement at its timeout, dropped
the connection): the shared ``engram.errors.Unavailable``, so the write path and
recall can tell it from a bug in a query, which stays a plain ``StoreError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

from engram.errors import ConfigError, StoreError, Unavailable

__all__ = [
    "ConstraintViolation",
    "Server",
    "StatementTimeout",
    "Unavailable",
    "mapped",
    "translate",
]


class StatementTimeout(Unavailable):
    """The server cancelled a statement that ran past ``statement_timeout_ms``."""


class ConstraintViolation(StoreError):
    """A change broke a rule the database enforces (one active version per key, a
    unique id, a check); the transaction wrote nothing. A ``StoreError``, as the
    SQLite store raises for the same rules."""


@dataclass(frozen=True, slots=True)
class Server:
    """Where a URL points, without its password: for messages."""

    host: str
    port: str
    database: str
    user: str
    password: str | None = field(default=None, repr=False)  # only to scrub messages

    @classmethod
    def of(cls, url: str) -> Server:
        """Parse a ``postgresql://`` URL or a ``key=value`` connection string."""
        try:
            parts = conninfo_to_dict(url)
        except psycopg.ProgrammingError:
            # the parser's message quotes pieces of the URL, the password among them
            raise ConfigError(
                "malformed PostgreSQL URL: expected postgresql://user:password@host:port/db"
                " with special characters percent-encoded (the URL is not repeated here,"
                " since it may hold a password)"
            ) from None
        host = str(parts.get("host") or "localhost")
        return cls(
            host=host,
            port=str(parts.get("port") or "5432"),
            database=str(parts.get("dbname") or parts.get("user") or "postgres"),
            user=str(parts.get("user") or ""),
            password=None if parts.get("password") is None else str(parts.get("password")),
        )

    def where(self) -> str:
        """``database 'x' on host:port`` (a socket directory counts as the host)."""
        return f"database {self.database!r} on {self.host}:{self.port}"

    def scrub(self, text: str) -> str:
        """``text`` with the password (if any) replaced by ``***``."""
        return _scrubbed(text, self.password)


def _scrubbed(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "***")
    return text


def translate(exc: BaseException, server: Server, doing: str) -> StoreError:
    """The engram error for a psycopg (or pool) failure while ``doing`` something."""
    from psycopg_pool import PoolTimeout

    detail = server.scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc))
    if isinstance(exc, pg_errors.QueryCanceled):
        return StatementTimeout(f"PostgreSQL {server.where()} cancelled {doing}: {detail}")
    if isinstance(exc, PoolTimeout):
        return Unavailable(f"no PostgreSQL connection to {server.where()} for {doing} within "
                           "the pool timeout: the server is down or every connection is "
                           "busy (PostgresConfig.pool_timeout_s)")  # fmt: skip
    if isinstance(exc, psycopg.IntegrityError):
        return ConstraintViolation(f"{doing} broke a rule of {server.where()}: {detail}")
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return Unavailable(f"PostgreSQL {server.where()} is unavailable for {doing}: {detail}")
    return StoreError(f"PostgreSQL error in {doing} ({server.where()}): {detail}")


@contextmanager
def mapped(server: Server, doing: str) -> Iterator[None]:
    """Run a block, turning psycopg and pool failures into engram errors (the
    driver's exception is not chained: its text is rewritten without secrets)."""
    from psycopg_pool import PoolTimeout

    try:
        yield
    except (psycopg.Error, PoolTimeout) as exc:
        raise translate(exc, server, doing) from None
