"""Consolidation reads a NUL in an episode stored before NUL was refused as a space.

``limits.stored_text`` now refuses NUL (U+0000) in new content on every backend,
but a SQLite file written by an earlier version may hold episodes with one. Their
summary and their facts are derived text: before, building them raised
``InvalidArgument`` and stopped the whole run for the user, on every later run.
PostgreSQL's ``text`` never held a NUL, so only SQLite files are concerned.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from tests.conftest import T0
from tests.lifecycle.consolidation_kit import LATER, SESSIONS, summaries, write_sessions

from engram import Context, Engram
from engram.types import Authority, Proposal, Turn

CTX = Context(tenant_id="acme", user_id="u1")


def _with_legacy_nul(path: Path) -> None:
    """Episodes written, then two of them given a NUL as an older version stored it."""
    with Engram.open(f"sqlite:///{path}", embedder="hashing") as mem:
        write_sessions(mem, CTX, SESSIONS, T0)
    db = sqlite3.connect(path)
    try:
        for phrase in ("lock timeout", "short commit"):  # a summary's and a fact's episode
            spaced = phrase.replace(" ", "' || char(0) || '")
            db.execute(f"UPDATE records SET content = replace(content, '{phrase}', '{spaced}')")
        db.commit()
        held = db.execute("SELECT count(*) FROM records WHERE instr(content, char(0)) > 0")
        assert held.fetchone()[0] == 2
    finally:
        db.close()


def test_a_legacy_nul_is_read_as_a_space(tmp_path: Path) -> None:
    path = tmp_path / "legacy.db"
    _with_legacy_nul(path)
    with Engram.open(f"sqlite:///{path}", embedder="hashing") as mem:
        report = mem.consolidate("acme", "u1", now=LATER, progress=False)
        assert report.summaries == len(SESSIONS)
        assert report.facts_accepted >= 1
        made = summaries(mem, CTX)
        assert all("\x00" not in s.content for s in made)
        assert any("lock timeout" in s.content for s in made)
        facts = [r for r in mem.list(CTX, limit=100) if r.type not in ("episode", "summary")]
        assert all("\x00" not in f.content for f in facts)
        assert any("short commit" in f.content for f in facts), [f.content for f in facts]
        again = mem.consolidate("acme", "u1", now=LATER, progress=False)
        assert again.summaries == 0  # the run completed and marked its groups


class _CarelessProposer:
    """A custom proposer whose facts are built by hand: one with a NUL, one with an
    impossible confidence, one claiming an admin's authority, one fine."""

    def propose(self, turns: Sequence[Turn]) -> list[Proposal]:
        base = Proposal(content="The team squash merges every pull request.", type="fact",
                        observed_at=turns[0].time)  # fmt: skip
        return [
            dataclasses.replace(base, content="Squash\x00merges are the rule."),
            dataclasses.replace(base, content="Releases carry a changelog.", confidence=7.0),
            dataclasses.replace(base, content="Admin said so.", authority=Authority.EXPLICIT_ADMIN),
            base,
        ]


def test_a_custom_proposers_refusable_facts_are_dropped(tmp_path: Path) -> None:
    """A proposer builds ``Proposal`` values itself; consolidation checks them as
    ``remember`` checks its arguments, so a NUL or an out-of-range field drops that
    fact (it would fail the write on PostgreSQL, every run) and keeps the others."""
    with Engram.open(f"sqlite:///{tmp_path / 'm.db'}", embedder="hashing") as mem:
        write_sessions(mem, CTX, SESSIONS[:1], T0)
        report = mem.consolidate("acme", "u1", now=LATER, proposer=_CarelessProposer(),
                                 progress=False)  # fmt: skip
        assert report.summaries == 1
        facts = {r.content for r in mem.list(CTX, status=None, limit=100) if r.type == "fact"}
        assert facts == {"The team squash merges every pull request."}
        assert report.facts_proposed == len(SESSIONS[0])  # one kept of four per episode
