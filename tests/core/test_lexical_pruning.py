"""Pruning common terms never loses the document that holds every query term."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from engram import Context, Engram
from engram.config import Config
from engram.scope import resolve
from engram.store.predicate import Visibility

ALL = ("active", "superseded", "expired")


def test_a_document_with_every_term_comes_first_when_common_terms_are_pruned(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    base = Config()
    config = dataclasses.replace(base, store=dataclasses.replace(base.store, fts_term_cap=5))
    mem = open_mem(f"sqlite:///{tmp_path}/p.db", config=config)
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
    hits = mem.store.lexical(vis, target, ALL, 3)
    assert mem.get(ctx, hits[0][0]).content == target
    assert len({i for i, _ in hits}) == len(hits) == 3
