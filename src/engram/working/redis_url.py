"""A Redis URL checked once, described without its password, and turned into a client.

``redis://[[user]:password@]host[:port][/db]`` and ``rediss://`` (TLS). Every
message about the server (``where``: ``host:port``) and every error text passed
through ``redact`` leave the password out, in both its written and its decoded
form, so a log of a failed start never holds the credential.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from engram.errors import ConfigError

__all__ = ["RedisTarget"]

_SCHEMES = ("redis", "rediss")
_DEFAULT_PORT = 6379


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """Where the working memory's Redis is; ``url`` keeps the credential, ``repr`` hides it."""

    url: str = field(repr=False)
    host: str
    port: int
    db: int
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def where(self) -> str:
        """``host:port``, for messages."""
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, url: str) -> RedisTarget:
        """Check the URL's shape; ``ConfigError`` names the host, never the password."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        secrets = tuple(s for s in {parts.password or "", unquote(parts.password or "")} if s)
        if parts.scheme not in _SCHEMES:
            raise ConfigError(f"working memory URL must start with redis:// or rediss://, "
                              f"got {parts.scheme or 'no'} scheme")  # fmt: skip
        if not host:
            raise ConfigError("working memory URL names no host, e.g. redis://127.0.0.1:6379/0")
        try:
            port = parts.port or _DEFAULT_PORT
        except ValueError:
            raise ConfigError(f"working memory URL for Redis at {host} has a bad port") from None
        path = parts.path.lstrip("/")
        if path and not (path.isdigit() and int(path) < 1 << 16):
            raise ConfigError(
                f"working memory URL for Redis at {host}:{port} must end with a database "
                "number such as /0"
            )
        if parts.query or parts.fragment:
            raise ConfigError(f"working memory URL for Redis at {host}:{port} takes no "
                              "query or fragment (set timeouts in WorkingConfig)")  # fmt: skip
        return cls(url, host, port, int(path or 0), secrets)

    def redact(self, message: object) -> str:
        """``str(message)`` with the password (written or decoded) replaced by ``***``."""
        text = str(message)
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    def client(self, timeout_seconds: float) -> Any:
        """A redis-py client (connection pool) for this URL; connects on first use."""
        try:
            import redis
        except ImportError:
            raise ConfigError("working memory on Redis needs redis-py: "
                              "pip install 'engram[redis]'") from None  # fmt: skip
        try:
            return redis.Redis.from_url(
                self.url, socket_connect_timeout=timeout_seconds, socket_timeout=timeout_seconds
            )
        except ValueError as exc:
            raise ConfigError(f"working memory URL for Redis at {self.where} is invalid: "
                              f"{self.redact(exc)}") from None  # fmt: skip
