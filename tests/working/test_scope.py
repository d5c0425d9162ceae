"""Scope isolation: no item of one tenant, user, agent, session or task reaches another.

Ids may hold the separators a key format uses (``:``, ``%``, ``/``), the glob
characters ``SCAN MATCH`` reads, and non-ASCII text: the escaping must keep every
scope's keys apart (Redis) as the composite key does (SQLite).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram import Context, Engram, InvalidArgument
from engram.working import WorkingScope
from engram.working.redis_store import escape, index_key, item_key

BASE = Context(tenant_id="acme", user_id="u1", agent_id="coder", session_id="s1", task_id="t1")
NEIGHBOURS = {
    "tenant": dataclasses.replace(BASE, tenant_id="other"),
    "user": dataclasses.replace(BASE, user_id="u2"),
    "agent": dataclasses.replace(BASE, agent_id="reviewer"),
    "no agent": dataclasses.replace(BASE, agent_id=None),
    "task": dataclasses.replace(BASE, task_id="t2"),
    "session only": dataclasses.replace(BASE, task_id=None),
    "session": dataclasses.replace(BASE, task_id=None, session_id="s2"),
}
# Printable ids (no surrounding whitespace, not starting with ':') built from the
# characters most likely to break a key format.
_ALPHABET = st.sampled_from(list("ab:%/*?[]\\{}-_.~ é界0"))
IDS = st.text(_ALPHABET, min_size=1, max_size=8).filter(
    lambda s: s == s.strip() and not s.startswith(":")
)


@pytest.mark.parametrize("neighbour", list(NEIGHBOURS))
def test_no_other_scope_sees_reads_or_clears_an_item(wmem: Engram, neighbour: str) -> None:
    own = wmem.working(BASE)
    own.set("step", "mine")
    other = wmem.working(NEIGHBOURS[neighbour])
    assert other.get("step") is None
    assert other.list() == []
    assert other.delete("step") is False
    assert other.clear() == 0
    other.set("step", "theirs")
    mine = own.get("step")
    assert mine is not None
    assert mine.value == "mine"
    assert [i.value for i in own.list()] == ["mine"]


def test_a_context_without_a_session_or_task_is_refused(wmem: Engram) -> None:
    bare = Context(tenant_id="acme", user_id="u1", project_id="p1")
    with pytest.raises(InvalidArgument, match="session_id or task_id"):
        wmem.working(bare)
    with pytest.raises(InvalidArgument, match="task_id"):
        wmem.working(dataclasses.replace(BASE, task_id=None), kind="task")
    with pytest.raises(InvalidArgument, match="kind"):
        wmem.working(BASE, kind="project")


_FIXTURE = [HealthCheck.function_scoped_fixture]


@settings(max_examples=40, deadline=None, suppress_health_check=_FIXTURE)
@given(first=st.tuples(IDS, IDS, IDS, IDS, IDS), second=st.tuples(IDS, IDS, IDS, IDS, IDS))
def test_scopes_with_separator_ids_never_meet(
    wmem: Engram, first: tuple[str, ...], second: tuple[str, ...]
) -> None:
    """Two scopes (tenant, user, agent, session, key) that differ anywhere share nothing."""
    a, b = (Context(tenant_id=t, user_id=u, agent_id=g, session_id=s) for t, u, g, s, _ in
            (first, second))  # fmt: skip
    wa, wb = wmem.working(a), wmem.working(b)
    wa.clear()
    wb.clear()
    wa.set(first[4], "a")
    got = wb.get(second[4])
    if first == second:
        assert got is not None
        assert got.value == "a"
        return
    assert got is None
    same_scope = first[:4] == second[:4]
    assert [i.value for i in wb.list()] == (["a"] if same_scope else [])
    wb.set(second[4], "b")
    assert sorted(i.value for i in wa.list()) == (["a", "b"] if same_scope else ["a"])


KIND = st.sampled_from(["session", "task"])
SCOPES = st.builds(WorkingScope, IDS, IDS, st.none() | IDS, KIND, IDS)


@given(first=SCOPES, second=SCOPES, k1=IDS, k2=IDS)
def test_redis_keys_are_injective_and_prefix_exact(
    first: WorkingScope, second: WorkingScope, k1: str, k2: str
) -> None:
    """Distinct (scope, key) pairs give distinct keys; a user's erase prefix matches
    exactly that user's keys; an item key is never an index key."""
    assert (item_key("p", first, k1) == item_key("p", second, k2)) == ((first, k1) == (second, k2))
    assert (index_key("p", first) == index_key("p", second)) == (first == second)
    erase = f"p:wm:{escape(second.tenant_id)}:{escape(second.user_id)}:"
    same_user = (first.tenant_id, first.user_id) == (second.tenant_id, second.user_id)
    assert item_key("p", first, k1).startswith(erase) == same_user
    assert not index_key("p", first).startswith("p:wm:")
    for part in (escape(first.tenant_id), escape(k1)):
        assert not set(part) & set(":*?[]\\")
