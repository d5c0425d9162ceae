"""API keys: stored hashed, found by id, compared in constant time, revocable, reloaded."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from engram.errors import ConfigError, Forbidden, NotFound
from engram.surfaces.rest.keys import ENV_KEYS, KeyFile, KeyRing, digest


def test_a_key_is_stored_only_as_its_digest(tmp_path: Path) -> None:
    file = KeyFile(tmp_path / "keys.json")
    entry, secret = file.create("acme", admin=True, users=["u1"], agents=["coder"], note="ci")
    text = file.path.read_text()
    assert secret not in text
    assert secret.split("_", 2)[2] not in text
    assert json.loads(text)["keys"][0]["digest"] == digest(secret)
    assert stat.S_IMODE(file.path.stat().st_mode) == 0o600
    principal = KeyRing(path=file.path).authenticate(secret)
    assert (principal.tenant_id, principal.key_id, principal.admin) == ("acme", entry.key_id, True)
    assert principal.users == frozenset({"u1"})
    assert principal.agents == frozenset({"coder"})


def test_keys_are_high_entropy_and_distinct(tmp_path: Path) -> None:
    file = KeyFile(tmp_path / "keys.json")
    secrets = {file.create("acme")[1] for _ in range(20)}
    assert len(secrets) == 20
    assert all(len(s.split("_", 2)[2]) >= 43 for s in secrets)  # 32 random bytes


@pytest.mark.parametrize("wrong", ["", "egm", "egm_zz_zz", "x" * 10_000, "Bearer abc"])
def test_malformed_unknown_and_tampered_keys_are_refused_alike(tmp_path: Path, wrong: str) -> None:
    file = KeyFile(tmp_path / "keys.json")
    _, secret = file.create("acme")
    ring = KeyRing(path=file.path)
    tampered = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    for credential in (wrong, tampered, secret.replace("egm_", "egx_")):
        with pytest.raises(Forbidden, match="unknown or revoked"):
            ring.authenticate(credential)


def test_revoke_takes_effect_in_a_running_ring(tmp_path: Path) -> None:
    file = KeyFile(tmp_path / "keys.json")
    entry, secret = file.create("acme")
    ring = KeyRing(path=file.path)
    ring.authenticate(secret)
    assert file.revoke(entry.key_id).revoked
    with pytest.raises(Forbidden):
        ring.authenticate(secret)
    assert file.revoke(entry.key_id).revoked_at == file.read()[0].revoked_at  # idempotent
    with pytest.raises(NotFound):
        file.revoke("0123456789abcdef")


def test_a_key_created_later_works_without_a_restart(tmp_path: Path) -> None:
    file = KeyFile(tmp_path / "keys.json")
    ring = KeyRing(path=file.path)  # no file yet: no key authenticates
    assert ring.active() == []
    _, secret = file.create("acme")
    assert ring.authenticate(secret).tenant_id == "acme"


def test_a_malformed_file_refuses_to_start_and_fails_closed_later(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "keys.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not JSON"):
        KeyRing(path=path)
    path.unlink()
    file = KeyFile(path)
    _, secret = file.create("acme")
    ring = KeyRing(path=path)
    ring.authenticate(secret)
    document = json.loads(path.read_text())
    document["keys"][0]["admin"] = "yes"
    path.write_text(json.dumps(document))
    with pytest.raises(Forbidden):
        ring.authenticate(secret)
    assert "admin must be true or false" in capsys.readouterr().err


@pytest.mark.parametrize(
    "document",
    [
        {"version": 2, "keys": []},
        {"version": 1, "keys": {}},
        {"version": 1, "keys": [{}]},
        {
            "version": 1,
            "keys": [{"key_id": "0123456789abcdef", "tenant_id": "a", "digest": "md5:x"}],
        },
        {
            "version": 1,
            "keys": [
                {"key_id": "0123456789abcdef", "tenant_id": " a", "digest": "sha256:" + "0" * 64}
            ],
        },
    ],
)
def test_bad_key_documents_are_config_errors(document: object) -> None:
    os.environ[ENV_KEYS] = json.dumps(document)
    try:
        with pytest.raises(ConfigError):
            KeyRing.from_environment(None)
    finally:
        del os.environ[ENV_KEYS]


def test_keys_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = KeyFile(tmp_path / "keys.json")
    _, secret = file.create("acme", admin=True)
    monkeypatch.setenv(ENV_KEYS, file.path.read_text())
    ring = KeyRing.from_environment(tmp_path / "ignored.json")
    assert ring.path is None
    assert ring.authenticate(secret).admin
    monkeypatch.delenv(ENV_KEYS)
    with pytest.raises(ConfigError, match="no API keys"):
        KeyRing.from_environment(None)


def test_concurrent_creates_lose_no_key(tmp_path: Path) -> None:
    file = KeyFile(tmp_path / "keys.json")
    made: list[str] = []

    def create() -> None:
        for _ in range(5):
            made.append(KeyFile(file.path).create("acme")[0].key_id)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(k.key_id for k in file.read()) == sorted(made)
    assert len(made) == 20
