"""``engram sweep``: the command registered by ``sweep_cli.add_command`` sweeps the
store named by ``--db`` and prints counts, never content."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from tests.conftest import T0

from engram import Context, Engram, FrozenClock, InvalidArgument
from engram.lifecycle import sweep_cli


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram")
    parser.add_argument("--db")
    parser.add_argument("--embedder", default="hashing")
    commands = parser.add_subparsers(dest="command", required=True)
    sweep_cli.add_command(commands)
    return parser


def _run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    status: int = args.func(args)
    return status


def test_sweep_deletes_what_is_due_and_prints_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    ctx = Context(tenant_id="acme", user_id="u1")
    with Engram.open(url, embedder="hashing", clock=FrozenClock(T0)) as mem:
        due = mem.remember(ctx, "The temporary door code is 4471.", retention="transient").record
        kept = mem.remember(ctx, "The office opens at nine.").record
    assert due is not None
    assert kept is not None
    now = (T0.replace(hour=12)).isoformat()

    assert _run(["--db", url, "sweep", "--tenant", "acme", "--now", now, "--json"]) == 0

    out = capsys.readouterr().out
    report = json.loads(out)
    assert report["deleted"] == {"retention_ended": 1, "decay_pruned": 0}
    assert report["tenants"] == ["acme"]
    assert "door code" not in out
    with Engram.open(url, embedder="hashing", clock=FrozenClock(T0)) as mem:
        assert [r.id for r in mem.list(ctx)] == [kept.id]
    assert _run(["--db", url, "sweep", "--now", now]) == 0
    assert "0 expired, 0 pruned" in capsys.readouterr().out


def test_a_bad_now_is_refused_before_the_store_is_opened(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/never.db"
    for bad in ("yesterday", "2024-06-01T00:00:00"):
        with pytest.raises(InvalidArgument):
            _run(["--db", url, "sweep", "--now", bad])
    assert not (tmp_path / "never.db").exists()
