"""Store URLs: which backend ``open_store`` opens, and which SQLite file.

Kept apart from the facade so that the URL rules (and their refusals) have one
home; a second backend parses the rest of its own URLs.
"""

from __future__ import annotations

import unicodedata

from engram.errors import ConfigError

__all__ = ["scheme_of", "sqlite_path"]

_POSTGRES = ("postgresql", "postgres")


def _check_text(url: str) -> None:
    if url != url.strip() or any(unicodedata.category(c)[0] == "C" for c in url):
        raise ConfigError("store URL must not have surrounding whitespace or control characters")


def scheme_of(url: str) -> str:
    """The backend a URL names: ``sqlite`` (also for a bare path) or ``postgresql``
    (``postgresql://`` or ``postgres://``, with an optional ``+driver``); any other
    scheme is returned as written, for the caller to refuse."""
    _check_text(url)
    if "://" not in url:
        return "sqlite"
    scheme = url.split("://", 1)[0].lower()
    return "postgresql" if scheme.split("+", 1)[0] in _POSTGRES else scheme


def sqlite_path(url: str) -> str:
    """``sqlite:///rel.db``, ``sqlite:////abs.db``, ``sqlite://:memory:`` or a bare path.

    Surrounding whitespace and control characters are refused: a path that only
    looks like another would silently open (or create) a second database."""
    _check_text(url)
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
