"""The caller of a request: its API key, resolved by the app's ``Authenticator``.

``Caller`` is the dependency every ``/v1`` route takes: it reads
``Authorization: Bearer <key>`` and never anything of the body. A missing or
unusable header and an unknown or revoked key are ``Unauthenticated`` (401 with
``WWW-Authenticate``); the principal is kept on ``request.state`` so the error
handlers can tell "names another tenant" (403) from a plain invalid field.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from engram.engram import Engram
from engram.errors import Forbidden
from engram.surfaces.gate import RecallGate
from engram.surfaces.principal import Authenticator, Principal
from engram.surfaces.rest.ratelimit import Limiter

__all__ = [
    "Caller", "Gate", "Mem", "Unauthenticated", "authenticate_late", "current_engram",
    "principal", "recall_gate",
]  # fmt: skip

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An Engram API key (`engram keys create`): `Authorization: Bearer <key>`.",
)


class Unauthenticated(Exception):
    """No usable credential; ``error`` is RFC 6750's code (None when none was sent)."""

    def __init__(self, detail: str, error: str | None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.error = error

    @property
    def challenge(self) -> str:
        """The ``WWW-Authenticate`` header value."""
        if self.error is None:
            return 'Bearer realm="engram"'
        return f'Bearer realm="engram", error="{self.error}"'


async def principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The authenticated caller of ``request`` (async: a digest and a stat, no I/O wait),
    after one token of its key's rate limit (``RateLimited`` when none is left; a
    shared limiter's Redis round trip runs off the event loop)."""
    if credentials is None:
        raise Unauthenticated("send the API key as 'Authorization: Bearer <key>'", None)
    authenticator: Authenticator = request.app.state.authenticator
    try:
        found = authenticator.authenticate(credentials.credentials)
    except Forbidden as exc:
        raise Unauthenticated(str(exc), "invalid_token") from None
    request.state.principal = found
    limiter: Limiter | None = request.app.state.limiter
    if limiter is not None:  # before the handler: a refused request does nothing
        await limiter.acquire(found.key_id)
    return found


async def authenticate_late(request: Request) -> None:
    """Authenticate a request whose dependencies never ran (FastAPI parses a JSON
    body before it resolves them), so a malformed body from a caller without a
    valid key is answered 401, like any other request of theirs, not 400.

    Raises:
        Unauthenticated: no key, or one that is unknown or revoked.
    """
    if getattr(request.state, "principal", None) is None:
        await principal(request, await _bearer(request))


async def current_engram(request: Request) -> Engram:
    """The app's SDK instance (async: a lookup, kept off the thread pool)."""
    mem: Engram = request.app.state.engram
    return mem


async def recall_gate(request: Request) -> RecallGate | None:
    """The app's recall gate (None: no limit; ``surfaces.gate``)."""
    gate: RecallGate | None = request.app.state.recall_gate
    return gate


Caller = Annotated[Principal, Depends(principal)]
Mem = Annotated[Engram, Depends(current_engram)]
Gate = Annotated[RecallGate | None, Depends(recall_gate)]
