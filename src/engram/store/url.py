"""Store URLs: which backend ``open_store`` opens, and which SQLite file.

Kept apart from the facade so that the URL rules (and their refusals) have one
home; a second backend parses the rest of its own URLs.
"""

from __future__ import annotations

import unicodedata
from urllib.parse import parse_qsl

from engram.errors import ConfigError

__all__ = ["scheme_of", "sqlite_options", "sqlite_path"]

# Settings a sqlite:// URL may carry after ``?`` (``SQLiteConfig`` field names):
# a deployment configured by one URL (``ENGRAM_DB``, ``engram serve --db``) can
# choose its durability without code.
SQLITE_URL_OPTIONS = frozenset({"synchronous"})

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


def sqlite_options(url: str) -> dict[str, str]:
    """The settings after ``?`` in a ``sqlite://`` URL, e.g.
    ``sqlite:///engram.db?synchronous=FULL``; empty for a bare path (whose name may
    hold a ``?``). An unknown name, a repeated one or an empty value is refused:
    a misspelt durability setting must not be ignored."""
    _check_text(url)
    if not url.startswith("sqlite://") or "?" not in url:
        return {}
    query = url.split("?", 1)[1]
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError as exc:
        raise ConfigError(f"sqlite URL options must look like ?synchronous=FULL: {exc}") from exc
    options: dict[str, str] = {}
    for name, value in pairs:
        if name not in SQLITE_URL_OPTIONS:
            raise ConfigError(f"unknown sqlite URL option {name!r}; known: "
                              f"{sorted(SQLITE_URL_OPTIONS)}")  # fmt: skip
        if name in options or not value:
            raise ConfigError(f"sqlite URL option {name!r} must be given once, with a value")
        options[name] = value
    return options


def sqlite_path(url: str) -> str:
    """``sqlite:///rel.db``, ``sqlite:////abs.db``, ``sqlite://:memory:`` or a bare path;
    options after ``?`` in a ``sqlite://`` URL are not part of it (``sqlite_options``).

    Surrounding whitespace and control characters are refused: a path that only
    looks like another would silently open (or create) a second database."""
    _check_text(url)
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://") :].split("?", 1)[0]
        if rest in (":memory:", "/:memory:"):
            return ":memory:"
        if not rest.startswith("/") or len(rest) < 2:
            raise ConfigError(f"sqlite URL must be sqlite:///path or sqlite://:memory:, got {url}")
        return rest[1:]
    if "://" in url:
        scheme = url.split("://", 1)[0]
        raise ConfigError(f"unsupported store URL scheme {scheme!r}; use sqlite:///path")
    return url
