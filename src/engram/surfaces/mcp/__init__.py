"""The MCP server (``engram mcp``): memory tools for agents, on the official MCP SDK.

``build_server(mem, identity)`` makes the ``MCPServer`` (stdio, in process);
``http_endpoint`` / ``create_http_app`` serve it over streamable HTTP with the
identity of each request's bearer key. Needs the ``mcp`` extra. See docs/mcp.md.
"""

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
