"""The installed entry points as separate processes (``python -m engram``, ``python -m
engram.cli``): real exit statuses, stdout and stderr kept apart, stdin piped; and
one smoke run on PostgreSQL with working memory on Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from cli_support import ID

from backends import REDIS_URL, RecycledDatabase, redis_client


def _run(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, module: str = "engram"
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        input=stdin,
        text=True,
        capture_output=True,
        timeout=120,
        check=False,
        env={**clean, **(env or {})},
    )


def test_a_session_of_commands_in_separate_processes(tmp_path: Path) -> None:
    env = {
        "ENGRAM_DB": f"sqlite:///{tmp_path / 'p.db'}",
        "ENGRAM_EMBEDDER": "hashing",
        "ENGRAM_TENANT": "acme",
        "ENGRAM_USER": "u1",
    }
    added = _run(
        "remember", "Prefers Python for data scripts.", "--type", "preference", "--json", env=env
    )
    assert added.returncode == 0, added.stderr
    memory_id = json.loads(added.stdout)["id"]
    recalled = _run("recall", "Which language for a data script?", "--json", env=env)
    assert recalled.returncode == 0, recalled.stderr
    assert [i["id"] for i in json.loads(recalled.stdout)["items"]] == [memory_id]
    missing = _run("get", "01NOSUCHMEMORY", env=env)
    assert missing.returncode == 5
    assert missing.stdout == ""
    assert missing.stderr.startswith("engram: not-found: ")
    declined = _run("erase", stdin="no\n", env=env)
    assert declined.returncode == 1
    erased = _run("erase", "--json", stdin="y\n", env=env)
    assert erased.returncode == 0, erased.stderr
    assert json.loads(erased.stdout)["records"] == 1
    assert json.loads(_run("list", "--json", env=env).stdout) == []


def test_usage_errors_exit_2_and_help_exits_0() -> None:
    usage = _run("remember", "--tenant", "acme")
    assert usage.returncode == 2
    assert "usage: engram remember" in usage.stderr
    helped = _run("--help", module="engram.cli")
    assert helped.returncode == 0
    assert "recall" in helped.stdout
    assert "erase" in helped.stdout


@pytest.fixture
def pg_store(pg_database: RecycledDatabase) -> str:
    """A fresh PostgreSQL store (the session's recycled database)."""
    return pg_database.fresh_url()


def test_postgres_and_redis_smoke(pg_store: str) -> None:
    client: Any = redis_client()  # skips (or fails under CI=true) without Redis
    client.close()
    tenant = f"t{uuid.uuid4().hex[:10]}"
    who = ("--tenant", tenant, "--user", "u1")
    root = ("--db", pg_store, "--embedder", "hashing", "--working", REDIS_URL)
    added = _run(
        *root, "remember", "Deploys are frozen on Fridays.", "--type", "rule", *who, "--json"
    )
    assert added.returncode == 0, added.stderr
    memory_id = json.loads(added.stdout)["id"]
    task = (*who, "--task", "release")
    assert _run(*root, "working", "set", "step", "2", *task).returncode == 0
    recalled = _run(*root, "recall", "Can I deploy on Friday?", *task, "--json")
    assert recalled.returncode == 0, recalled.stderr
    assert memory_id in [i["id"] for i in json.loads(recalled.stdout)["items"]]
    no_working = _run("--db", pg_store, "--embedder", "hashing", "list", *who)
    assert no_working.returncode == 3  # a server store needs --working for working memory
    assert "redis://" in no_working.stderr
    erased = _run(*root, "erase", *who, "--yes", "--json")
    assert erased.returncode == 0, erased.stderr
    assert json.loads(erased.stdout)["working"] == 1
    assert _run(*root, "audit", "verify").returncode == 0


def test_id_options_are_shared_by_every_user_command() -> None:
    ran = _run("list", "--help")
    for option in (*ID[::2], "--agent", "--session", "--project", "--repository", "--task"):
        assert option in ran.stdout
