"""Store URLs: which SQLite file (or in-memory database) ``Engram.open`` opens.

Kept apart from the facade so that the URL rules (and their refusals) have one
home that a second backend's URL parsing can sit next to.
"""

from __future__ import annotations

import unicodedata

from engram.errors import ConfigError

__all__ = ["sqlite_path"]


def sqlite_path(url: str) -> str:
    """``sqlite:///rel.db``, ``sqlite:////abs.db``, ``sqlite://:memory:`` or a bare path.

    Surrounding whitespace and control characters are refused: a path that only
    looks like another would silently open (or create) a second database."""
    if url != url.strip() or any(unicodedata.category(c)[0] == "C" for c in url):
        raise ConfigError("store URL must not have surrounding whitespace or control characters")
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://") :]
        if rest in (":memory:", "/:memory:"):
            return ":memory:"
        if not rest.startswith("/") or len(rest) < 2:
            raise ConfigError(f"sqlite URL must be sqlite:///path or sqlite://:memory:, got {url}")
        return rest[1:]
    if "://" in url:
        scheme = url.split("://", 1)[0]
        raise ConfigError(f"unsupported store URL scheme {scheme!r}; use sqlite:///path")
    return url
