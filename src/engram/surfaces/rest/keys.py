"""API keys: who may call the REST API, for which tenant, with which reach.

A key is ``egm_<key id>_<secret>``: the key id (16 hex digits) is public and
names the key in lists, logs and audit; the secret (32 random bytes) is shown
once, when the key is created, and never stored. What is stored is the SHA-256
of the whole key; a presented key is found by its id and compared in constant
time (``hmac.compare_digest``), and an unknown id is compared against a dummy
digest so a miss takes as long as a wrong secret.

Each key belongs to one tenant, may be its tenant's admin, and may be limited
to some users and agents (``None``: any). Keys live in a JSON file
(``{"version": 1, "keys": [...]}``, mode 0600, replaced atomically and changed
under a lock, so concurrent ``engram keys`` runs lose nothing) or, for
deployments that inject secrets through the environment, in the same JSON in
``ENGRAM_API_KEYS``. A running server re-reads the file when it changes, so a
revoked key stops working at once; a file that no longer parses authenticates
nobody until it is fixed (fail closed).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engram import limits
from engram.errors import ConfigError, EngramError, Forbidden, NotFound
from engram.surfaces.principal import Principal

__all__ = [
    "ENV_KEYS",
    "ENV_KEYS_FILE",
    "ApiKey",
    "KeyFile",
    "KeyRing",
    "digest",
    "parse_keys",
]

ENV_KEYS = "ENGRAM_API_KEYS"
ENV_KEYS_FILE = "ENGRAM_KEYS_FILE"
_PREFIX = "egm"
_KEY_ID_RE = re.compile(r"[0-9a-f]{16}")
_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
_DUMMY = "sha256:" + "0" * 64
_MAX_KEY_CHARS = 256
_MAX_KEYS = 100_000
_FIELDS = frozenset(
    {"key_id", "tenant_id", "digest", "admin", "users", "agents", "created_at", "revoked_at",
     "note"}
)  # fmt: skip


def digest(key: str) -> str:
    """The stored form of a key: ``sha256:<hex>`` of its UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _key_id_of(key: str) -> str | None:
    """The key id a presented key claims, or None when it is not shaped like a key."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != _PREFIX or not _KEY_ID_RE.fullmatch(parts[1]):
        return None
    return parts[1]


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One stored key: everything but its secret."""

    key_id: str
    tenant_id: str
    digest: str
    admin: bool = False
    users: tuple[str, ...] | None = None
    agents: tuple[str, ...] | None = None
    created_at: str = ""
    revoked_at: str | None = None
    note: str | None = None

    @property
    def revoked(self) -> bool:
        """True once ``engram keys revoke`` has run on it."""
        return self.revoked_at is not None

    def principal(self) -> Principal:
        """The caller this key authenticates."""
        return Principal(
            tenant_id=self.tenant_id, key_id=self.key_id, admin=self.admin,
            users=None if self.users is None else frozenset(self.users),
            agents=None if self.agents is None else frozenset(self.agents),
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """The stored JSON object (the digest, never a secret)."""
        return {
            "key_id": self.key_id, "tenant_id": self.tenant_id, "digest": self.digest,
            "admin": self.admin, "users": None if self.users is None else list(self.users),
            "agents": None if self.agents is None else list(self.agents),
            "created_at": self.created_at, "revoked_at": self.revoked_at, "note": self.note,
        }  # fmt: skip

    def describe(self) -> dict[str, Any]:
        """What ``keys list`` shows: the stored object without the digest."""
        shown = self.to_json()
        del shown["digest"]
        return shown

    @classmethod
    def from_json(cls, raw: object, where: str) -> ApiKey:
        """A stored key, checked; ``ConfigError`` naming ``where`` when malformed."""
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{where} must be an object")
        unknown = sorted(str(name)[:40] for name in raw if name not in _FIELDS)
        if unknown:
            raise ConfigError(f"{where} has unknown fields: {unknown}")
        try:
            return cls(
                key_id=_match(raw.get("key_id"), _KEY_ID_RE, "key_id"),
                tenant_id=limits.identifier(raw.get("tenant_id"), "tenant_id"),
                digest=_match(raw.get("digest"), _DIGEST_RE, "digest"),
                admin=_flag(raw.get("admin", False), "admin"),
                users=_names(raw.get("users"), "users"), agents=_names(raw.get("agents"), "agents"),
                created_at=_stamp(raw.get("created_at"), "created_at") or "",
                revoked_at=_stamp(raw.get("revoked_at"), "revoked_at"),
                note=None if raw.get("note") is None else limits.label(raw["note"], "note", 200),
            )  # fmt: skip
        except EngramError as exc:
            raise ConfigError(f"{where}: {exc}") from None


def _match(value: object, pattern: re.Pattern[str], name: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ConfigError(f"{name} must match {pattern.pattern}")
    return value


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false")
    return value


def _names(value: object, name: str) -> tuple[str, ...] | None:
    """An allow-list: None (anyone) or a list of ids (an empty list allows no one)."""
    if value is None:
        return None
    return limits.identifiers(value, name, 10_000)


def _stamp(value: object, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be an ISO 8601 time")
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{name} must be an ISO 8601 time") from None
    return value


def parse_keys(text: str, where: str) -> dict[str, ApiKey]:
    """The keys of a key document (``{"version": 1, "keys": [...]}``) by key id."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{where} is not JSON: {exc.args[0] if exc.args else exc}") from None
    if not isinstance(document, Mapping) or document.get("version") != 1:
        raise ConfigError(f'{where} must be a JSON object {{"version": 1, "keys": [...]}}')
    raw = document.get("keys")
    if not isinstance(raw, list) or len(raw) > _MAX_KEYS:
        raise ConfigError(f"{where}: keys must be a list of at most {_MAX_KEYS} objects")
    found: dict[str, ApiKey] = {}
    for index, item in enumerate(raw):
        key = ApiKey.from_json(item, f"{where}: keys[{index}]")
        if found.setdefault(key.key_id, key) is not key:
            raise ConfigError(f"{where}: key id {key.key_id} appears twice")
    return found


def _dump(keys: Sequence[ApiKey]) -> str:
    return json.dumps({"version": 1, "keys": [k.to_json() for k in keys]}, indent=2) + "\n"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class KeyFile:
    """The key file ``engram keys`` manages: read, create, revoke (each change under
    an exclusive lock on ``<file>.lock``, written to a temporary file and renamed)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def exists(self) -> bool:
        """Whether the file is there (a first ``engram serve`` creates it)."""
        return self.path.exists()

    def read(self) -> list[ApiKey]:
        """Every key in the file, oldest first; none when the file does not exist."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ConfigError(f"cannot read key file {self.path}: {exc.strerror}") from None
        return list(parse_keys(text, f"key file {self.path}").values())

    def create(self, tenant_id: str, *, admin: bool = False, users: Sequence[str] | None = None,
               agents: Sequence[str] | None = None, note: str | None = None,
               ) -> tuple[ApiKey, str]:  # fmt: skip
        """A new key for ``tenant_id``: its stored form and the key itself (shown once)."""
        key_id = secrets.token_hex(8)
        secret = f"{_PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
        entry = ApiKey.from_json(
            {"key_id": key_id, "tenant_id": tenant_id, "digest": digest(secret), "admin": admin,
             "users": None if users is None else list(users),
             "agents": None if agents is None else list(agents),
             "created_at": _now(), "note": note}, "the new key",
        )  # fmt: skip
        with self._locked() as keys:
            keys.append(entry)
        return entry, secret

    def revoke(self, key_id: str) -> ApiKey:
        """Mark ``key_id`` revoked (kept in the file, so its id stays explained)."""
        with self._locked() as keys:
            for index, entry in enumerate(keys):
                if entry.key_id == key_id:
                    if not entry.revoked:
                        keys[index] = replace(entry, revoked_at=_now())
                    return keys[index]
        raise NotFound(f"no key {limits.shown(key_id)} in {self.path}")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[list[ApiKey]]:
        """The keys, to change in place; written back when the block ends cleanly."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            keys = self.read()
            yield keys
            self._write(keys)
        finally:
            os.close(lock)

    def _write(self, keys: Sequence[ApiKey]) -> None:
        temporary = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}.tmp")
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(_dump(keys))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


class KeyRing:
    """The ``Authenticator`` of the REST API: keys from a file (re-read when it
    changes) or from a fixed document (``ENGRAM_API_KEYS``)."""

    def __init__(self, keys: Mapping[str, ApiKey] | None = None,
                 path: str | Path | None = None) -> None:  # fmt: skip
        self._keys: dict[str, ApiKey] = dict(keys or {})
        self._path = None if path is None else Path(path)
        self._seen: tuple[int, int, int] | None = None
        self._lock = threading.Lock()
        if self._path is not None:  # a malformed file refuses to start (ConfigError)
            self._seen = self._stat(self._path)
            self._keys = {key.key_id: key for key in KeyFile(self._path).read()}

    @classmethod
    def from_environment(cls, path: str | Path | None) -> KeyRing:
        """``ENGRAM_API_KEYS`` when it is set, else the key file at ``path``."""
        text = os.environ.get(ENV_KEYS)
        if text is not None:
            return cls(parse_keys(text, ENV_KEYS))
        if path is None:
            raise ConfigError(f"no API keys: set {ENV_KEYS_FILE} or {ENV_KEYS}, or pass --keys")
        return cls(path=path)

    @property
    def path(self) -> Path | None:
        """The key file this ring follows (None: a fixed set of keys)."""
        return self._path

    def active(self) -> list[ApiKey]:
        """The keys that authenticate now."""
        return [key for key in self._current().values() if not key.revoked]

    def authenticate(self, credential: str) -> Principal:
        """The principal of ``credential``; ``Forbidden`` for an unknown, malformed or
        revoked key (the same message for each, so the answer reveals nothing)."""
        shaped = isinstance(credential, str) and len(credential) <= _MAX_KEY_CHARS
        key_id = _key_id_of(credential) if shaped else None
        entry = self._current().get(key_id) if key_id else None
        presented = digest(credential) if shaped else _DUMMY
        matches = hmac.compare_digest(presented, entry.digest if entry else _DUMMY)
        if entry is None or not matches or entry.revoked:
            raise Forbidden("the API key is unknown or revoked")
        return entry.principal()

    @staticmethod
    def _stat(path: Path) -> tuple[int, int, int]:
        try:
            info = path.stat()
        except FileNotFoundError:
            return (0, 0, 0)
        return (info.st_mtime_ns, info.st_size, info.st_ino)

    def _current(self) -> dict[str, ApiKey]:
        """The keys, re-read first when the file changed since the last read."""
        if self._path is None:
            return self._keys
        seen = self._stat(self._path)
        if seen != self._seen:
            with self._lock:
                if seen != self._seen:
                    self._keys = self._load(self._path, seen)
        return self._keys

    def _load(self, path: Path, seen: tuple[int, int, int]) -> dict[str, ApiKey]:
        """The file's keys; on a malformed file, none (and a warning): fail closed."""
        self._seen = seen
        try:
            return {key.key_id: key for key in KeyFile(path).read()}
        except ConfigError as exc:
            print(f"engram: {exc}; no API key authenticates until it is fixed", file=sys.stderr)
            return {}
