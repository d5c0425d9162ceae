"""Lexical ranking: the document holding every query term comes first, and a dominant
caller still finds its own matches among others' better-scored ones."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests import probes

from engram import Context, Engram
from engram.scope import resolve
from engram.store.predicate import Visibility

ALL = ("active", "superseded", "expired")


def test_a_document_with_every_term_comes_first_when_common_terms_are_pruned(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    mem = open_mem(f"sqlite:///{tmp_path}/p.db")
    teams = ["search", "billing", "payments", "identity", "analytics", "platform"]
    items = [{"content": f"Per Grace, Grace joined the {team} team in {month} {year}",
              "type": "fact"}
             for team in teams for month in ("May", "June") for year in (2021, 2022)]  # fmt: skip
    items += [{"content": f"Dana left the security group in {m} 2023", "type": "fact"}
              for m in ("March", "April", "July", "October", "November", "December")]  # fmt: skip
    # "august", the one term rare enough to survive pruning, is denser elsewhere.
    items += [{"content": f"August review: {t} met in August", "type": "fact"} for t in teams[:4]]
    target = "Grace joined the security team in August 2023"
    items.append({"content": target, "type": "fact"})
    mem.remember_many(ctx, items)
    vis = Visibility.of(resolve(ctx))
    hits = probes.lexical(mem.store, vis, target, ALL, 3)
    assert mem.get(ctx, hits[0][0]).content == target
    assert len({i for i, _ in hits}) == len(hits) == 3


def test_a_dominant_caller_still_finds_matches_that_others_outrank(
    open_mem: Callable[..., Engram], tmp_path: Path
) -> None:
    """Other users' better-scored matches must never crowd out the caller's own."""
    mem = open_mem(f"sqlite:///{tmp_path}/d.db")
    alice = Context(tenant_id="acme", user_id="alice", agent_id="coder")
    bob = Context(tenant_id="acme", user_id="bob", agent_id="coder")
    mem.remember_many(alice, [{"content": f"alice note {i} about topic t{i}", "type": "fact"}
                              for i in range(150)])  # fmt: skip
    filler = " ".join(f"filler{j}" for j in range(40))
    mem.remember_many(alice, [{"content": f"zebra {filler} w{i}", "type": "fact"}
                              for i in range(3)])  # fmt: skip
    mem.remember_many(bob, [{"content": f"zebra zebra b{i}", "type": "fact"} for i in range(60)])
    vis = Visibility.of(resolve(alice))
    hits = probes.lexical(mem.store, vis, "zebra", ALL, 5)
    assert len(hits) == 3
    assert all("zebra" in mem.get(alice, i).content for i, _ in hits)
