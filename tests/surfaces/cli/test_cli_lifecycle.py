"""``engram grants``, ``engram share`` and ``engram outcome``: each one SDK call, its
answer printed as text or ``--json``, its refusals mapped to the error table's codes."""

from __future__ import annotations

from collections.abc import Callable

from cli_support import ID, Engram

from engram import Context
from engram import Engram as EngramSdk

CODER = (*ID, "--agent", "coder")
PAIR = ("--tenant", "acme", "--from", "coder", "--to", "reviewer")
DEPLOY = "Deploy the API with the blue-green script in ops/deploy.sh."


def _reviewer_sees(db_url: str) -> list[str]:
    with EngramSdk.open(db_url, embedder="hashing") as mem:
        return [r.content for r in mem.list(Context("acme", "u1", "reviewer"), type="procedure")]


def test_grants_add_list_revoke(engram: Engram) -> None:
    added = engram("grants", "add", *PAIR, "--type", "procedure", "--type", "fact", "--json")
    assert added.code == 0, added.err
    assert sorted(g["type"] for g in added.json()) == ["fact", "procedure"]
    listed = engram("grants", "list", "--tenant", "acme")
    assert listed.code == 0
    assert "coder" in listed.out
    assert "procedure" in listed.out
    revoked = engram("grants", "revoke", *PAIR, "--type", "fact", "--json")
    assert revoked.code == 0, revoked.err
    assert [g["type"] for g in revoked.json()["revoked"]] == ["fact"]
    assert [g["type"] for g in engram("grants", "list", "--tenant", "acme", "--json").json()] == [
        "procedure"
    ]
    assert engram("grants", "revoke", *PAIR, "--type", "fact").code == 5  # NotFound
    unknown = engram("grants", "add", *PAIR, "--type", "gossip")
    assert unknown.code == 3  # ConfigError: no such memory type
    assert "gossip" in unknown.err
    assert engram("grants", "add", *PAIR).code == 2  # --type is required
    assert "no share grants" in engram("grants", "list", "--tenant", "globex").out


def test_share_by_ids_and_by_query(
    engram: Engram, remembered: Callable[..., str], db_url: str
) -> None:
    procedure = remembered(DEPLOY, "--type", "procedure", "--agent", "coder")
    without = engram("share", procedure, "--to", "reviewer", *CODER)
    assert without.code == 6  # Forbidden: no grant
    assert "no grant" in without.err
    assert _reviewer_sees(db_url) == []
    assert engram("grants", "add", *PAIR, "--type", "procedure").code == 0
    shared = engram("share", procedure, "--to", "reviewer", *CODER)
    assert shared.code == 0, shared.err
    assert shared.out.startswith("shared 1 of 1 memories from agent coder to agent reviewer")
    assert _reviewer_sees(db_url) == [DEPLOY]
    again = engram("share", "--query", "How do we deploy the API?", "--to", "reviewer", *CODER,
                   "--json")  # fmt: skip
    assert again.code == 0, again.err
    assert again.json()["shared"] == []
    assert again.json()["items"][0]["outcome"] == "already_shared"
    both = engram("share", procedure, "--query", "deploy?", "--to", "reviewer", *CODER)
    assert both.code == 2
    assert engram("share", "01NOSUCHMEMORY000000000000", "--to", "reviewer", *CODER).code == 5
    assert _reviewer_sees(db_url) == [DEPLOY]


def test_outcome_counts_successes_and_failures(
    engram: Engram, remembered: Callable[..., str]
) -> None:
    procedure = remembered(DEPLOY, "--type", "procedure", "--agent", "coder")
    first = engram("outcome", procedure, "--success", "--reward", "0.5", *CODER)
    assert first.code == 0, first.err
    assert "1 successes, 0 failures" in first.out
    second = engram("outcome", procedure, "--failure", *CODER, "--json")
    assert second.code == 0, second.err
    assert (second.json()["successes"], second.json()["failures"]) == (1, 1)
    assert engram("outcome", procedure, *CODER).code == 2  # --success or --failure
    assert engram("outcome", procedure, "--success", "--reward", "7", *CODER).code == 2
    fact = remembered("The office is on the third floor.", "--type", "fact")
    refused = engram("outcome", fact, "--success", *ID)
    assert refused.code == 2
    assert "not a procedure" in refused.err
