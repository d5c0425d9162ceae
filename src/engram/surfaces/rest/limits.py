"""The request size limit, enforced before a body is parsed.

``BodyLimit`` is plain ASGI middleware. A request whose ``Content-Length``
exceeds its limit is answered 413 at once, before the app runs and before any
of the body is read. A body without a length (chunked) or one that lies about
it is counted as it streams: the read that passes the limit raises an
``HTTPException(413)``, which FastAPI passes through its body parsing to the
problem handler, so nothing is parsed or stored. The limit per request comes
from ``RestSettings.limit_for`` (the import route takes a larger one).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.surfaces.errors import PROTOCOL
from engram.surfaces.rest.problems import problem_response
from engram.surfaces.rest.settings import RestSettings

__all__ = ["BodyLimit"]


def _too_large(limit: int) -> str:
    return f"the request body exceeds {limit} bytes (the server's limit for this route)"


def _declared_length(scope: Scope) -> int | None:
    """The ``Content-Length`` the client declared (None: absent or unreadable)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class BodyLimit:
    """Refuses bodies over the limit with 413 problem+json (see the module notes)."""

    def __init__(self, app: ASGIApp, settings: RestSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app with a receive channel that stops at the limit."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.settings.limit_for(scope["method"], scope["path"])
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            response = problem_response(PROTOCOL[413], _too_large(limit), scope["path"],
                                        {"Connection": "close"})  # fmt: skip
            await response(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise HTTPException(413, _too_large(limit))
            return message

        await self.app(scope, limited, send)
