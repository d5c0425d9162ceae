"""Revoking a grant erases its copies as ``forget`` does, not just their rows.

The copies go with the traces naming them (stored, or still queued for the
usage flush), and the receipt says what was checked afterwards.
"""

from __future__ import annotations

import dataclasses

import pytest

from engram import Context, Engram, NotFound

CODER = Context(tenant_id="acme", user_id="u1", agent_id="coder")
REVIEWER = dataclasses.replace(CODER, agent_id="reviewer")
PORT = "The staging server runs on port 8443 behind nginx"


@pytest.mark.parametrize("flushed", [True, False])
def test_revoking_erases_the_traces_naming_a_copy(mem: Engram, flushed: bool) -> None:
    original = mem.remember(CODER, PORT, agent_scope="agent").record
    assert original is not None
    mem.grant_share("acme", "coder", "reviewer", ["fact"])
    (copy,) = mem.share(CODER, [original.id], "reviewer").shared
    answer = mem.recall(REVIEWER, "which port does staging use")
    assert copy in answer.ids
    if flushed:
        mem.flush()
        assert copy in str(mem.trace(REVIEWER, answer.trace.trace_id))
    report = mem.revoke_share("acme", "coder", "reviewer")
    assert report.deleted == (copy,)
    assert report.traces >= 1
    assert report.verified, report.failed
    assert "records" in " ".join(report.checked)
    mem.flush()
    with pytest.raises(NotFound):
        mem.trace(REVIEWER, answer.trace.trace_id)
    assert original.id in mem.recall(CODER, "which port does staging use").ids
