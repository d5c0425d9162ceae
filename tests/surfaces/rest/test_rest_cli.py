"""``engram keys`` and ``engram serve`` through ``add_command`` (a parser of our own, as
the main command line will register them), and ``serve`` as a real process."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from engram.surfaces.rest.cli import add_command

REPO = Path(__file__).resolve().parents[3]


def run(argv: list[str], parent_db: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog="engram")
    parser.add_argument("--db", default=parent_db)
    add_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    status: int = args.func(args)
    return status


def test_keys_create_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'e.db'}"
    assert (
        run(["keys", "create", "--tenant", "acme", "--admin", "--users", "u1, u2", "--db", db]) == 0
    )
    out = capsys.readouterr().out
    secret = out.strip().splitlines()[-1]
    assert secret.startswith("egm_")
    assert "shown only now" in out
    assert (tmp_path / "e.db-keys.json").exists()  # beside the store
    assert run(["keys", "list"], parent_db=db) == 0  # the parent's --db is honoured
    listing = capsys.readouterr().out
    key_id = secret.split("_")[1]
    assert key_id in listing
    assert "u1,u2/any" in listing
    assert "active" in listing
    assert secret.split("_", 2)[2] not in listing
    assert "sha256" not in listing
    assert run(["keys", "revoke", key_id, "--db", db]) == 0
    assert "revoked" in capsys.readouterr().out
    assert run(["keys", "list", "--json", "--db", db]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown[0]["revoked_at"]
    assert "digest" not in shown[0]


def test_keys_errors_exit_with_the_tables_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = str(tmp_path / "k.json")
    assert run(["keys", "revoke", "0123456789abcdef", "--keys", keys]) == 5  # NotFound
    assert "NotFound" in capsys.readouterr().err
    assert run(["keys", "create", "--tenant", " bad", "--keys", keys]) == 3  # ConfigError
    assert run(["keys", "list", "--db", "sqlite://:memory:"]) == 3  # no file beside it
    assert "--keys" in capsys.readouterr().err


def _start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("ENGRAM_API_KEYS", None)
    env.pop("ENGRAM_KEYS_FILE", None)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engram.surfaces.rest",
            "serve",
            "--port",
            "0",
            "--embedder",
            "hashing",
            "--db",
            f"sqlite:///{tmp_path / 'e.db'}",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: list[str] = []
    deadline = time.monotonic() + 60
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if line.startswith("  curl") and "/v1/recall" in line:
            url = lines[0].split(" on ", 1)[1].split()[0]
            return process, url, lines
    process.kill()
    pytest.fail("engram serve printed no banner:\n" + "\n".join(lines))


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(20)


def test_serve_prints_the_url_a_first_key_and_a_curl_line(tmp_path: Path) -> None:
    process, url, lines = _start(tmp_path)
    try:
        key = lines[2].strip()
        assert key.startswith("egm_")
        assert "admin of tenant 'default'" in lines[1]
        assert any(key in line and line.strip().startswith("curl") for line in lines)
        headers = {"Authorization": f"Bearer {key}"}
        written = httpx.post(
            f"{url}/v1/memories",
            headers=headers,
            timeout=30,
            json={"user_id": "u1", "content": "I prefer dark mode."},
        )
        assert written.status_code == 200
        assert written.json()["record"]["tenant_id"] == "default"
        dashboard = next(line for line in lines if line.startswith("Dashboard: "))
        assert dashboard.split()[1] == f"{url}/ui/"
        page = httpx.get(f"{url}/ui/", timeout=30)
        assert page.status_code == 200
        assert "Engram dashboard" in page.text
    finally:
        _stop(process)
    again, _, lines = _start(tmp_path)  # a second start shows no key, says how to make one
    try:
        assert not any(line.strip().startswith("egm_") for line in lines)
        assert "1 active API key(s)" in lines[1]
        assert "engram keys create" in lines[1]
    finally:
        _stop(again)


def test_serve_with_two_workers_shares_one_store(tmp_path: Path) -> None:
    process, url, lines = _start(tmp_path, "--workers", "2")
    try:
        headers = {"Authorization": f"Bearer {lines[2].strip()}"}
        with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
            for n in range(6):  # connections land on either worker
                body = {"user_id": "u1", "content": f"Service {n} listens on port {9000 + n}."}
                with httpx.Client(base_url=url, headers=headers, timeout=30) as fresh:
                    assert fresh.post("/v1/memories", json=body).status_code == 200
            listed = client.get("/v1/memories?user_id=u1&limit=100").json()["items"]
        assert len(listed) == 6
    finally:
        _stop(process)
    assert process.returncode == 0


def test_one_process_serve_runs_on_uvicorns_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """``engram serve`` without ``--workers`` takes the loop uvicorn would (uvloop when
    installed, as the worker processes do), not asyncio's default: a bare
    ``asyncio.run`` cost every request of a one-process server the slower loop."""
    import asyncio

    import uvicorn
    from fastapi import FastAPI

    from engram.surfaces.rest.serve import run_server

    uvloop = pytest.importorskip("uvloop", reason="the server extra installs uvloop on POSIX")
    seen: list[type] = []

    async def serve(self: uvicorn.Server, sockets: object = None) -> None:
        seen.append(type(asyncio.get_running_loop()))

    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    assert run_server(FastAPI(), "127.0.0.1", 0, False, lambda url: None) == 1  # never listened
    assert seen == [uvloop.Loop]
