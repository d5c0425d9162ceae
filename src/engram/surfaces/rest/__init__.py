"""The REST API: FastAPI over the SDK, authenticated by per-tenant API keys.

``create_app(mem, auth, settings)`` builds the app (``app``); ``KeyRing`` and
``KeyFile`` hold the keys (``keys``); ``add_command`` registers ``engram serve``
and ``engram keys`` (``cli``). See docs/rest.md. Names are loaded on first use,
so the command line imports ``engram.surfaces.rest.cli`` without FastAPI
installed (``engram serve`` then says which extra to install).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engram.surfaces.rest.app import create_app
    from engram.surfaces.rest.keys import ApiKey, KeyFile, KeyRing
    from engram.surfaces.rest.settings import RestSettings

__all__ = ["ApiKey", "KeyFile", "KeyRing", "RestSettings", "create_app"]

_HOMES = {"create_app": "app", "ApiKey": "keys", "KeyFile": "keys", "KeyRing": "keys",
          "RestSettings": "settings"}  # fmt: skip


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
