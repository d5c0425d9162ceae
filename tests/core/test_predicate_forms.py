"""The visibility rule has three forms (SQL, the in-memory partition mask, and a
single row in memory); over every combination of owner columns they agree."""

from __future__ import annotations

import itertools
import sqlite3

import numpy as np

from engram.scope import GLOBAL, USER
from engram.store.predicate import Visibility

USERS = ["", "u1", "u2"]
AGENTS = ["", "a1", "a2"]
SCOPES = [USER, GLOBAL, "task:x", "session:s", "repo:r", "project:p", "project:q"]
NAMED = [
    (None, None, None, None),
    ("task:x", None, None, None),
    ("task:x", "session:s", "repo:r", "project:p"),
    (None, "repo:r", None, None),
]


def test_sql_mask_and_row_forms_agree() -> None:
    rows = list(itertools.product(USERS, SCOPES, AGENTS))  # one tenant: partitions are
    db = sqlite3.connect(":memory:")  # per tenant, and SQL checks the tenant too
    db.execute("CREATE TABLE records (id INTEGER PRIMARY KEY, tenant_id TEXT, user_id TEXT,"
               " scope TEXT, agent_id TEXT)")  # fmt: skip
    db.executemany("INSERT INTO records (tenant_id, user_id, scope, agent_id)"
                   " VALUES ('t1', ?, ?, ?)", rows)  # fmt: skip
    vocab = {value: code for code, value in enumerate(sorted({*USERS, *SCOPES, *AGENTS}))}
    users, scopes, agents = (np.array([vocab[r[i]] for r in rows], dtype=np.int32)
                             for i in range(3))  # fmt: skip
    for user, agent, named in itertools.product(["u1", "u2"], ["a1", ""], NAMED):
        vis = Visibility("t1", user, agent, named)
        cond, params = vis.sql("r")
        in_sql = {row[0] - 1 for row in db.execute(f"SELECT id FROM records r WHERE {cond}",
                                                   params)}  # fmt: skip
        mask = vis.row_mask(vocab, users, scopes, agents)
        assert set(np.flatnonzero(mask).tolist()) == in_sql, vis
        assert {i for i, row in enumerate(rows) if vis.admits("t1", *row)} == in_sql, vis
        assert not vis.admits("t2", user, USER, "")
