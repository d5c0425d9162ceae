"""The ways in: REST API, command line, MCP server, LangGraph store, dashboard.

Each surface only translates: it parses a request, calls the SDK (``engram.Engram``)
and maps errors through the one table in ``surfaces.errors``. Identity never comes
from a request body or a model's arguments.
"""
