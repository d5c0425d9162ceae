"""``engram mcp`` as a process: over stdio (the client launches it, as an IDE does) and
over streamable HTTP with the identity it was started with (``--no-auth``), and over
HTTP with the REST API's key file by default, on a temporary SQLite file with the
hashing embedder."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters
from mcp_support import Client, free_port, http_client, list_tools, structured

from engram import Context, Engram

MEMORY = {"content": "Prefers Python for data scripts.", "type": "preference"}


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}


def _stdio(db: str, *identity: str) -> StdioServerParameters:
    args = ["-m", "engram", "--db", db, "--embedder", "hashing", "mcp", *identity]
    return StdioServerParameters(command=sys.executable, args=args, env=_environment())


def _over_stdio(db: str, identity: tuple[str, ...], calls: list[tuple[str, dict[str, Any]]]) -> Any:
    async def main() -> list[Any]:
        async with Client(_stdio(db, *identity)) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(main)


def test_stdio_serves_the_identity_it_was_started_with(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'stdio.db'}"
    u1 = ("--tenant", "acme", "--user", "u1", "--agent", "coder")
    added, recalled, bad = _over_stdio(
        db,
        u1,
        [
            ("remember", MEMORY),
            ("recall", {"query": "Which language should a data script use?"}),
            ("remember", {"content": "Prefers tea.", "user_id": "u2"}),
        ],
    )
    memory_id = structured(added)["id"]
    assert [i["id"] for i in structured(recalled)["items"]] == [memory_id]
    assert bad.is_error
    assert "user_id" in bad.content[0].text
    (seen,) = _over_stdio(db, ("--tenant", "acme", "--user", "u2"), [("list", {})])
    assert structured(seen)["memories"] == []
    with Engram.open(db, embedder="hashing") as mem:
        assert [r.id for r in mem.list(Context("acme", "u1"))] == [memory_id]
        assert mem.list(Context("acme", "u2")) == []


def _engram(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engram", "--embedder", "hashing", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=_environment(),
    )


def test_a_server_without_a_whole_identity_or_on_a_remote_host_does_not_start(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'refused.db'}"
    no_user = _engram("--db", db, "mcp", "--tenant", "acme")
    assert no_user.returncode == 2
    assert "incomplete-identity" in no_user.stderr
    remote = _engram(
        "--db",
        db,
        "mcp",
        "--transport",
        "http",
        "--host",
        "0.0.0.0",
        "--no-auth",
        "--tenant",
        "acme",
        "--user",
        "u1",
    )
    assert remote.returncode == 3
    assert "loopback only" in remote.stderr
    unloadable = _engram(
        "--db", db, "mcp", "--transport", "http", "--authenticator", "no_such_module:keys"
    )
    assert unloadable.returncode == 3
    assert "cannot be loaded" in unloadable.stderr


FIXED = ("--no-auth", "--tenant", "acme", "--user", "u1")


@contextmanager
def _http_server(db: str, port: int, log: Path, *options: str) -> Iterator[str]:
    """``engram mcp --transport http`` in a process, until its port accepts connections."""
    command = [
        sys.executable,
        "-m",
        "engram",
        "--db",
        db,
        "--embedder",
        "hashing",
        "mcp",
        "--transport",
        "http",
        "--port",
        str(port),
        *options,
    ]
    with log.open("w") as stderr:
        process = subprocess.Popen(command, env=_environment(), stderr=stderr, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _accepts(port):
            assert process.poll() is None, f"engram mcp exited: {log.read_text()}"
            assert time.monotonic() < deadline, f"engram mcp did not listen: {log.read_text()}"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_http_with_no_auth_serves_a_fixed_identity_on_loopback(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'http.db'}"
    with _http_server(db, free_port(), tmp_path / "server.log", *FIXED) as url:

        async def main() -> Any:
            async with http_client(url) as client:
                return await client.call_tool("remember", MEMORY)

        added = structured(anyio.run(main))
    with Engram.open(db, embedder="hashing") as mem:
        assert [r.id for r in mem.list(Context("acme", "u1"))] == [added["id"]]


def test_http_uses_the_rest_api_key_file_by_default(tmp_path: Path) -> None:
    from engram.surfaces.rest import KeyFile

    db = f"sqlite:///{tmp_path / 'keyed.db'}"
    keys = KeyFile(tmp_path / "keyed.db-keys.json")  # where engram serve keeps them
    key = keys.create("acme", users=["u1"])[1]
    revoked, old_key = keys.create("acme", users=["u1"])
    keys.revoke(revoked.key_id)

    async def call(**headers: str) -> Any:
        async with http_client(url, **headers) as client:
            return await client.call_tool("remember", MEMORY)

    with _http_server(db, free_port(), tmp_path / "server.log") as url:
        added = structured(anyio.run(lambda: call(Authorization=f"Bearer {key}")))
        for refused in (None, old_key, "egm_0000000000000000_nope"):
            answer = list_tools(url, refused)
            assert answer.status_code == 401, refused
            assert answer.headers["www-authenticate"].startswith("Bearer")
        assert list_tools(url, key).status_code == 200
    with Engram.open(db, embedder="hashing") as mem:
        assert [r.id for r in mem.list(Context("acme", "u1"))] == [added["id"]]


def test_http_with_keys_limits_each_keys_rate_as_engram_serve_does(tmp_path: Path) -> None:
    """Past a key's burst the standalone server answers 429 with ``Retry-After``; another
    key keeps its own bucket; ``--rate-limit 0`` turns the limit off; a bad setting does
    not start."""
    from engram.surfaces.rest import KeyFile

    db = f"sqlite:///{tmp_path / 'limited.db'}"
    keys = KeyFile(tmp_path / "limited.db-keys.json")
    first, second = (keys.create("acme", users=["u1"])[1] for _ in range(2))
    limited = ("--rate-limit", "0.01", "--rate-burst", "2")
    with _http_server(db, free_port(), tmp_path / "limited.log", *limited) as url:
        answers = [list_tools(url, first) for _ in range(3)]
        assert [a.status_code for a in answers] == [200, 200, 429]
        assert int(answers[-1].headers["retry-after"]) >= 1
        assert "rate limit" in answers[-1].json()["detail"]
        assert list_tools(url, second).status_code == 200
    with _http_server(db, free_port(), tmp_path / "open.log", "--rate-limit", "0") as url:
        assert {list_tools(url, first).status_code for _ in range(5)} == {200}
    bad = _engram("--db", db, "mcp", "--transport", "http", "--rate-burst", "0")
    assert bad.returncode == 3
    assert "rate_burst" in bad.stderr


def test_http_options_that_exclude_each_other_do_not_start(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'refused.db'}"
    both = _engram(
        "--db",
        db,
        "mcp",
        "--transport",
        "http",
        "--no-auth",
        "--keys",
        "k.json",
        "--tenant",
        "acme",
        "--user",
        "u1",
    )
    assert both.returncode == 3
    assert "exclude each other" in both.stderr
    stdio = _engram("--db", db, "mcp", "--keys", "k.json", "--tenant", "acme", "--user", "u1")
    assert stdio.returncode == 3
    assert "--keys is for --transport http" in stdio.stderr


def test_the_authenticator_option_loads_a_class_a_factory_or_an_instance() -> None:
    from mcp_support import Keys

    from engram.errors import ConfigError
    from engram.surfaces.mcp.cli import load_authenticator

    assert isinstance(load_authenticator("mcp_support:Keys"), Keys)
    module = sys.modules["mcp_support"]
    module.made_keys = lambda: Keys()  # type: ignore[attr-defined]
    module.ready_keys = Keys()  # type: ignore[attr-defined]
    assert isinstance(load_authenticator("mcp_support:made_keys"), Keys)
    assert load_authenticator("mcp_support:ready_keys") is module.ready_keys  # type: ignore[attr-defined]
    for spec in ("mcp_support", "mcp_support:KEYS", "mcp_support:nothing_here"):
        with pytest.raises(ConfigError):
            load_authenticator(spec)


def test_without_the_sdk_engram_mcp_says_which_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from engram.cli import main

    for name in [m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "mcp_types"))]:
        monkeypatch.setitem(sys.modules, name, None)  # importing it fails, as if not installed
    monkeypatch.setitem(sys.modules, "mcp", None)
    for name in ("engram.surfaces.mcp.http", "engram.surfaces.mcp.server"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    code = main(
        [
            "--db",
            f"sqlite:///{tmp_path / 'x.db'}",
            "--embedder",
            "hashing",
            "mcp",
            "--tenant",
            "acme",
            "--user",
            "u1",
        ]
    )
    assert code == 3
    assert "pip install 'engram-governed[mcp]'" in capsys.readouterr().err
