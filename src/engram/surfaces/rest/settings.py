"""What a REST deployment may tune: request size and rate limits, where the dashboard mounts."""

from __future__ import annotations

from dataclasses import dataclass

from engram.errors import ConfigError

__all__ = ["RestSettings"]

_MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class RestSettings:
    """Limits of the REST surface.

    ``max_body_bytes`` bounds every request body (413 past it, checked from
    ``Content-Length`` before the body is read and while it streams);
    ``max_import_bytes`` is the larger bound of ``POST /v1/import``, whose body is
    a whole export. ``ui_path`` is reserved for the dashboard. ``mcp_path`` is
    where the MCP streamable HTTP endpoint is mounted (None: not at all; it is
    also absent when the ``mcp`` extra is not installed). ``host`` is where the
    server listens: on a loopback host the MCP SDK's DNS-rebinding protection
    accepts only a loopback ``Host`` header.

    ``rate_limit`` is how many requests a second each API key may make, sustained,
    and ``rate_burst`` how many it may make at once after a pause (a token bucket
    per key: ``surfaces.rest.ratelimit``); past them a request is 429 with
    ``Retry-After``. ``rate_limit=0`` turns the limit off. ``rate_limit_redis``
    (a ``redis://`` URL) keeps the buckets there, shared by every worker process;
    None keeps them in this process (see that module).

    ``recall_concurrency`` is how many recalls one server process runs at once; the
    rest wait their turn in arrival order (``surfaces.gate``), and one that
    waits ``recall_queue_seconds`` is refused with 503 and ``Retry-After``.
    ``recall_concurrency=0`` lets every recall start at once."""

    max_body_bytes: int = _MiB
    max_import_bytes: int = 64 * _MiB
    ui_path: str = "/ui"
    mcp_path: str | None = "/mcp"
    host: str = "127.0.0.1"
    rate_limit: float = 100.0
    rate_burst: int = 200
    rate_limit_redis: str | None = None
    recall_concurrency: int = 1
    recall_queue_seconds: float = 10.0

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_import_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1024:
                raise ConfigError(f"{name} must be an integer of at least 1024 bytes")
        for name in ("ui_path", "mcp_path"):
            path = getattr(self, name)
            if path is not None and (not path.startswith("/") or path.endswith("/")):
                raise ConfigError(f"{name} must start with '/' and not end with one")
        if self.mcp_path is not None and self.mcp_path.startswith(("/v1/", "/problems/")):
            raise ConfigError("mcp_path must not be under /v1/ or /problems/")
        rate = self.rate_limit
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate < 1e9:
            raise ConfigError("rate_limit must be a number of requests a second >= 0 (0: off)")
        burst = self.rate_burst
        if isinstance(burst, bool) or not isinstance(burst, int) or not 1 <= burst <= 10**9:
            raise ConfigError("rate_burst must be an integer of at least 1")
        slots = self.recall_concurrency
        if isinstance(slots, bool) or not isinstance(slots, int) or not 0 <= slots <= 10_000:
            raise ConfigError("recall_concurrency must be an integer from 0 (no limit) to 10000")
        wait = self.recall_queue_seconds
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 < wait <= 3600:
            raise ConfigError("recall_queue_seconds must be a number of seconds in (0, 3600]")

    def limit_for(self, method: str, path: str) -> int:
        """The body limit of one request."""
        if method == "POST" and path == "/v1/import":
            return max(self.max_import_bytes, self.max_body_bytes)
        return self.max_body_bytes
