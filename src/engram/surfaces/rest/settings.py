"""What a REST deployment may tune: request size limits and where the dashboard mounts."""

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
    accepts only a loopback ``Host`` header."""

    max_body_bytes: int = _MiB
    max_import_bytes: int = 64 * _MiB
    ui_path: str = "/ui"
    mcp_path: str | None = "/mcp"
    host: str = "127.0.0.1"

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

    def limit_for(self, method: str, path: str) -> int:
        """The body limit of one request."""
        if method == "POST" and path == "/v1/import":
            return max(self.max_import_bytes, self.max_body_bytes)
        return self.max_body_bytes
