"""Which working-memory backend ``Engram.open`` builds from its ``working`` argument."""

from __future__ import annotations

from engram.errors import ConfigError
from engram.working.base import WorkingStore
from engram.working.config import WorkingConfig
from engram.working.redis_store import RedisWorking
from engram.working.redis_url import RedisTarget
from engram.working.sqlite import SQLiteWorking, working_path

__all__ = ["open_working"]


def open_working(
    spec: object, sqlite_path: str | None, config: WorkingConfig, busy_timeout_ms: int = 5000,
    synchronous: str = "FULL",
) -> WorkingStore:  # fmt: skip
    """``None`` or ``"sqlite"``: a SQLite file beside the store's (``working_path``),
    synced as the store is (``synchronous``); ``"redis://..."`` or ``"rediss://..."``:
    that Redis; a ``WorkingStore``: itself."""
    if spec is None or spec == "sqlite":
        if sqlite_path is None:
            raise ConfigError("this store has no SQLite file: pass working='redis://host:port/db'")
        return SQLiteWorking(working_path(sqlite_path), config, busy_timeout_ms, synchronous)
    if isinstance(spec, str):
        if spec.startswith(("redis://", "rediss://")):
            return RedisWorking(RedisTarget.parse(spec), config)
        scheme = spec.split("://", 1)[0] if "://" in spec else "a bare string"
        raise ConfigError(f"working must be None, 'sqlite' or a redis:// URL, got {scheme!r}")
    needed = ("put", "fetch", "items", "remove", "clear", "erase_subject", "subject_residue",
              "close")  # fmt: skip
    if all(callable(getattr(spec, name, None)) for name in needed):
        return spec  # type: ignore[return-value]
    raise ConfigError(f"working must be None, 'sqlite', a redis:// URL or a WorkingStore, "
                      f"got {type(spec).__name__}")  # fmt: skip
