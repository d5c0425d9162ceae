"""Fixtures for the command-line tests: ``engram(...)`` runs ``main`` in process on a real
SQLite file with the hashing embedder and returns the exit code and both outputs.

The ``ENGRAM_*`` variables are cleared for each test, so a developer's environment
cannot change a default the tests rely on (the parser reads them when built).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_support import ID, Engram, Ran

from engram.cli import main


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ENGRAM_DB", "ENGRAM_EMBEDDER", "ENGRAM_WORKING", "ENGRAM_TENANT", "ENGRAM_USER"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """A SQLite file store for one test."""
    return f"sqlite:///{tmp_path / 'cli.db'}"


@pytest.fixture
def engram(
    db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Engram:
    """``engram(*args, stdin="")``: run ``engram --db <file> --embedder hashing *args``."""

    def run(*args: str, stdin: str = "", db: str | None = None) -> Ran:
        capsys.readouterr()
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        try:
            code = main(["--db", db or db_url, "--embedder", "hashing", *args])
        except SystemExit as exc:  # argparse: usage errors and --help
            code = exc.code if isinstance(exc.code, int) else 1
        done = capsys.readouterr()
        return Ran(code, done.out, done.err)

    return run


@pytest.fixture
def remembered(engram: Engram) -> Callable[..., str]:
    """``remembered(content, *options)``: remember as acme/u1 and return the new id."""

    def remember(content: str, *options: str) -> str:
        ran = engram("remember", content, *ID, *options, "--json")
        assert ran.code == 0, ran.err
        memory_id: str = ran.json()["id"]
        return memory_id

    return remember
