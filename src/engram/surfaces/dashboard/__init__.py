"""The web dashboard at ``/ui``: plain HTML, CSS and one script, served by the API.

Nothing is built or downloaded at install time. The page talks to the REST API
with the API key the person pastes (kept in the tab's sessionStorage), so it can
show only what that key may see. Every response carries a Content-Security-Policy
that allows scripts from this origin only and no inline script, and the script
writes server values into the page as text, never as markup: a memory holding
HTML or a script renders inert.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CSP", "dashboard_app", "redirect_to"]

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _static_dir() -> Path:
    return Path(str(resources.files(__name__).joinpath("static")))


class _Secured:
    """Adds the dashboard's security headers to every response of ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.lower().encode(), v.encode()) for k, v in _HEADERS.items()]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, sending)


def dashboard_app() -> ASGIApp:
    """The ASGI app to mount at ``/ui`` (``/ui`` itself redirects to ``/ui/``)."""
    static = StaticFiles(directory=_static_dir(), html=True)
    return _Secured(static)


def redirect_to(target: str) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint of ``GET /ui``: a redirect to ``target`` (``/ui/``), so the page's
    relative asset paths resolve under the mount."""

    async def redirect(_request: Request) -> Response:
        return RedirectResponse(target, status_code=307)

    return redirect
