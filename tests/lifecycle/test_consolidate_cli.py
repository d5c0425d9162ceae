"""``engram consolidate``: registered by ``add_command``, run on a SQLite file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from consolidation_kit import LATER, write_sessions
from tests.conftest import OpenMem

from engram import Context, InvalidArgument, NotFound
from engram.lifecycle.consolidate.cli import add_command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram")
    parser.add_argument("--db")
    parser.add_argument("--embedder", default="hashing")
    add_command(parser.add_subparsers(dest="command", required=True))
    return parser


def _run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    status: int = args.func(args)
    return status


def test_the_command_consolidates_and_prints_json(
    tmp_path: Path, open_mem: OpenMem, ctx: Context, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with open_mem(url) as mem:
        write_sessions(mem, ctx)
    now = LATER.isoformat()
    assert _run(["--db", url, "consolidate", "--tenant", "acme", "--user", "u1",
                 "--now", now, "--json"]) == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert (report["groups"], report["summaries"], report["now"]) == (4, 4, now)
    assert _run(["--db", url, "consolidate", "--tenant", "acme", "--now", now]) == 0
    out = capsys.readouterr().out
    assert "groups 0 from 0 episodes" in out


def test_bad_arguments_are_engram_errors(tmp_path: Path, open_mem: OpenMem, ctx: Context) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with open_mem(url) as mem:
        write_sessions(mem, ctx)
    with pytest.raises(InvalidArgument, match="ISO 8601"):
        _run(["--db", url, "consolidate", "--tenant", "acme", "--now", "tomorrow"])
    with pytest.raises(InvalidArgument, match="timezone"):
        _run(["--db", url, "consolidate", "--tenant", "acme", "--now", "2024-05-09T09:00:00"])
    with pytest.raises(NotFound):
        _run(["--db", url, "consolidate", "--tenant", "acme", "--user", "nobody"])
    with pytest.raises(SystemExit):
        _run(["--db", url, "consolidate"])  # --tenant is required
