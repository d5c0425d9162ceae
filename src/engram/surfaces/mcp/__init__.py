"""The MCP server (``engram mcp``): memory tools for agents, on the official MCP SDK.

``build_server(mem, identity)`` makes the ``MCPServer`` (stdio, in process);
``http_endpoint`` / ``create_http_app`` serve it over streamable HTTP with the
identity of each request's bearer key. Needs the ``mcp`` extra. See docs/mcp.md.

The names load on first use (PEP 562): importing the SDK takes a second or more,
and ``engram.surfaces.mcp.cli`` must not make every ``engram`` command pay it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engram.surfaces.mcp.http import McpEndpoint, create_http_app, http_endpoint
    from engram.surfaces.mcp.identity import Fixed, FromRequest, Identity, context_for
    from engram.surfaces.mcp.server import build_server

__all__ = [
    "Fixed",
    "FromRequest",
    "Identity",
    "McpEndpoint",
    "build_server",
    "context_for",
    "create_http_app",
    "http_endpoint",
]

_HOME = {
    "McpEndpoint": "http",
    "create_http_app": "http",
    "http_endpoint": "http",
    "Fixed": "identity",
    "FromRequest": "identity",
    "Identity": "identity",
    "context_for": "identity",
    "build_server": "server",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
