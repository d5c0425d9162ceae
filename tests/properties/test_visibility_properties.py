"""Property: no read path ever returns a record the caller may not see (SPEC principle 1).

Random populations over tenants x users x agents x scopes (plus tenant-wide
records written by ``remember_global``) are checked against an independent
re-implementation of the visibility rule, for every read of the SDK and every
candidate query of the store. The oracle below is written from the SPEC, not
from ``engram.scope``: same tenant; the caller's own records in a scope the
context names, bound to no agent or to the caller's agent; or tenant-wide
``global`` records.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import probes

from engram import (
    Context,
    Engram,
    FrozenClock,
    IncompleteIdentity,
    InvalidArgument,
    NotFound,
    Record,
    Status,
    Turn,
)
from engram.scope import resolve
from engram.store.contract import NeighbourProbe, RecentProbe, VectorProbe
from engram.store.predicate import Visibility

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
ALL = tuple(status.value for status in Status)
TENANTS = ("t1", "t2", "t3")
USERS = ("u1", "u2", "u3")
AGENTS = (None, "a1", "a2", "a3")
SCOPES = ("user", "project:p1", "project:p2", "repo:r1", "task:t1", "session:s1")
WORDS = ("alpha", "bravo", "cedar", "delta", "ember", "falcon", "garnet", "harbor")
KEYS = (None, "k1", "k2")
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass(frozen=True)
class Owner:
    """Who owns a record, as the test intended it (never read back from the store)."""

    tenant: str
    user: str | None
    agent: str | None
    scope: str
    key: str | None
    words: frozenset[str]


@dataclass(frozen=True)
class Write:
    tenant: str
    user: str | None  # None: a tenant-wide record via remember_global
    agent: str | None
    scope: str
    key: str | None
    words: tuple[str, ...]


@dataclass
class World:
    """Every record id written, with its intended owner."""

    owners: dict[str, Owner] = field(default_factory=dict)


def named_scopes(ctx: Context) -> set[str]:
    """The scopes a context names (oracle; independent of engram.scope)."""
    pairs = (("project", ctx.project_id), ("repo", ctx.repository_id),
             ("task", ctx.task_id), ("session", ctx.session_id))  # fmt: skip
    return {"user"} | {f"{kind}:{ident}" for kind, ident in pairs if ident}


def visible(owner: Owner, ctx: Context) -> bool:
    """The SPEC's visibility rule."""
    if owner.tenant != ctx.tenant_id:
        return False
    if owner.user is None:
        return owner.scope == "global"
    return (
        owner.user == ctx.user_id
        and owner.scope in named_scopes(ctx)
        and owner.agent in (None, ctx.agent_id)
    )


def writer_context(w: Write) -> Context:
    """A context allowed to write ``w`` (it names the scope)."""
    kind, _, ident = w.scope.partition(":")
    ids = {"project": "project_id", "repo": "repository_id", "task": "task_id",
           "session": "session_id"}  # fmt: skip
    extra = {ids[kind]: ident} if kind in ids else {}
    return Context(tenant_id=w.tenant, user_id=w.user, agent_id=w.agent, **extra)


writes = st.builds(
    Write,
    tenant=st.sampled_from(TENANTS),
    user=st.sampled_from((*USERS, None)),
    agent=st.sampled_from(AGENTS),
    scope=st.sampled_from(SCOPES),
    key=st.sampled_from(KEYS),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(tuple),
)
changes = st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(("retract", "correct"))),
                   max_size=6)  # fmt: skip
readers = st.builds(
    Context,
    tenant_id=st.sampled_from((*TENANTS, "t4")),
    user_id=st.sampled_from((*USERS, "u4")),
    agent_id=st.sampled_from((*AGENTS, "a4")),
    project_id=st.sampled_from((None, "p1", "p2", "p3")),
    repository_id=st.sampled_from((None, "r1", "r2")),
    task_id=st.sampled_from((None, "t1")),
    session_id=st.sampled_from((None, "s1", "s2")),
)


def populate(mem: Engram, plan: list[Write], edits: list[tuple[int, str]]) -> World:
    """Write ``plan``, then retract or correct some records through their owners."""
    world = World()
    for n, w in enumerate(plan):
        content = f"{' '.join(w.words)} note {n}"
        if w.user is None:
            result = mem.remember_global(w.tenant, content)
            owner = Owner(w.tenant, None, None, "global", None, frozenset(w.words))
        else:
            result = mem.remember(writer_context(w), content, scope=w.scope, key=w.key,
                                  value=n if w.key else None)  # fmt: skip
            owner = Owner(w.tenant, w.user, w.agent, w.scope, w.key, frozenset(w.words))
        assert result.record is not None, result.reason
        record = result.record
        if w.user and w.agent and record.agent_id is None:  # took the user's own version's
            owner = dataclasses.replace(owner, agent=None)  # place (write.path._inherited)
            assert result.superseded or result.related
        actual = (record.tenant_id, record.user_id, record.agent_id, record.scope)
        assert actual == (owner.tenant, owner.user, owner.agent, owner.scope)
        world.owners.setdefault(record.id, owner)
    ids = sorted(world.owners)
    for index, action in edits:
        target = ids[index % len(ids)] if ids else None
        if target is None or world.owners[target].user is None:
            continue
        _edit(mem, world, target, action)
    return world


def _edit(mem: Engram, world: World, target: str, action: str) -> None:
    owner = world.owners[target]
    ctx = writer_context(Write(owner.tenant, owner.user, owner.agent, owner.scope, None, ()))
    try:
        if action == "retract":
            mem.retract(ctx, target)
            return
        words = (*sorted(owner.words)[:1], "revised")
        result = mem.correct(ctx, target, f"{' '.join(words)} note {len(world.owners)}")
    except InvalidArgument:  # already superseded or retracted
        return
    assert result.record is not None
    agent = owner.agent
    if agent and result.record.agent_id is None:  # it also replaced the user's own version
        agent = None  # of the key, so it lands there (write.corrections._correction_owner)
        assert len(result.superseded) > 1
    world.owners[result.record.id] = Owner(owner.tenant, owner.user, agent, owner.scope,
                                           owner.key, frozenset(words))  # fmt: skip


def check_reader(mem: Engram, world: World, ctx: Context) -> None:
    """Every read path returns only visible records, and every visible one where it should."""
    expected = {i for i, owner in world.owners.items() if visible(owner, ctx)}
    for memory_id in world.owners:
        try:
            got = mem.get(ctx, memory_id)
        except NotFound:
            assert memory_id not in expected
        else:
            assert memory_id in expected
            assert got.id == memory_id
    listed = mem.list(ctx, status=None, limit=10_000)
    assert {r.id for r in listed} == expected
    # export: the caller's own visible records; the tenant's global ones are not theirs
    own = {i for i in expected if world.owners[i].user is not None}
    assert {row["id"] for row in mem.export(ctx)} == own
    for memory_id in sorted(expected)[:5]:
        chain = {r.id for r in mem.history(ctx, memory_id)}
        assert memory_id in chain
        assert chain <= expected
    check_candidates(mem, world, ctx, expected)


def _every_record(mem: Engram, world: World) -> list[Record]:
    """Every record in the world, read back through each owner's own visibility."""
    found: dict[str, Record] = {}
    for record_id, owner in world.owners.items():
        if owner.user is None:
            ctx = Context(tenant_id=owner.tenant, user_id="reader")
        else:
            write = Write(owner.tenant, owner.user, owner.agent, owner.scope, None, ())
            ctx = writer_context(write)
        (record,) = mem.store.read(Visibility.of(resolve(ctx)), [record_id])
        found[record_id] = record
    return list(found.values())


def check_candidates(mem: Engram, world: World, ctx: Context, expected: set[str]) -> None:
    """The store's candidate queries under ``Visibility.of(resolve(ctx))``."""
    vis = Visibility.of(resolve(ctx))
    keyed = {i for i in expected if world.owners[i].key}
    assert {r.id for r in probes.by_key(mem.store, vis, ["k1", "k2"], ALL, 10_000)} == keyed
    assert {r.id for r in probes.recent(mem.store, vis, ALL, 10_000)} == expected
    active = {r.id for r in mem.list(ctx, limit=10_000)}
    assert active <= expected
    for words in (("alpha",), ("cedar", "harbor"), ("revised",)):
        matching = {i for i in expected if world.owners[i].words & set(words)}
        found = [i for i, _ in probes.lexical(mem.store, vis, " ".join(words), ALL, 10_000)]
        assert set(found) == matching
        assert len(probes.lexical(mem.store, vis, " ".join(words), ALL, 3)) == min(3, len(matching))
        hits = probes.lexical_hits(mem.store, vis, " ".join(words), ALL, 10_000)
        assert [r.id for r, _ in hits] == found
    query = mem.embedder.embed(["alpha bravo note"])[0]
    model = mem.embedder.model_id
    found = [i for i, _ in probes.vector(mem.store, vis, query, model, ALL, 10_000)]
    assert len(found) == len(set(found))
    assert set(found) == expected
    assert len(probes.vector(mem.store, vis, query, model, ALL, 4)) == min(4, len(expected))
    found_active = {i for i, _ in probes.vector(mem.store, vis, query, model, ("active",), 10_000)}
    assert found_active == active
    hits = probes.vector_hits(mem.store, vis, query, model, ALL, 10_000)
    assert [r.id for r, _ in hits] == found
    # records already read are reused, not trusted: their status is checked again
    every = RecentProbe(ALL, 10_000)
    again = mem.store.candidates(vis, [every, VectorProbe(query, model, ("active",), 10_000)])[1]
    assert not isinstance(again, Exception)
    assert {r.id for r, _ in again} == active
    # ... and so is their visibility: the in-memory rule is the SQL one
    everyone = _every_record(mem, world)
    admitted = {r.id for r in everyone if vis.admits(
        r.tenant_id, r.user_id or "", r.scope, r.agent_id or "")}  # fmt: skip
    assert admitted == expected
    if hasattr(mem.store, "_alive_records"):  # a store reusing records it read checks them
        known = {r.id: r for r in everyone}
        assert set(mem.store._alive_records(vis, ALL, known, list(known))) == expected
    assert {r.id for r in probes.keyed(mem.store, vis, ["fact"], ALL, 10_000)} == keyed
    anchors = mem.store.read(vis, sorted(expected)[:3])
    if anchors:
        probe = NeighbourProbe(tuple(anchors), ("fact",), ALL, timedelta(microseconds=10**12), 100)
        assert {r.id for r, _ in probes.hits(mem.store, vis, probe)} <= expected
    if hasattr(mem, "recall"):
        result = mem.recall(ctx, "alpha cedar note k1")
        selected = {item.record.id for item in result.items}
        selected |= {i for item in result.items for i in item.merged_from}
        selected |= {i for conflict in result.conflicts for i in conflict.record_ids}
        assert selected <= expected


@SETTINGS
@given(plan=st.lists(writes, min_size=1, max_size=30), edits=changes,
       contexts=st.lists(readers, min_size=1, max_size=5))  # fmt: skip
def test_every_read_returns_exactly_the_visible_records(
    open_fresh: Callable[..., Engram],
    plan: list[Write],
    edits: list[tuple[int, str]],
    contexts: list[Context],
) -> None:
    with open_fresh(clock=FrozenClock(T0)) as mem:
        world = populate(mem, plan, edits)
        owners = {(o.tenant, o.user) for o in world.owners.values() if o.user}
        chosen = list(contexts)
        for tenant, user in sorted(owners)[:3]:  # readers that certainly see something
            for agent in (None, "a1"):
                chosen.append(Context(tenant_id=tenant, user_id=user, agent_id=agent,
                                      project_id="p1", repository_id="r1", task_id="t1",
                                      session_id="s1"))  # fmt: skip
        for ctx in chosen:
            check_reader(mem, world, ctx)


def test_scoped_before_scoring_k_results_from_one_percent(
    open_fresh: Callable[..., Engram],
) -> None:
    """The caller owns 1 % of the vectors; the other 99 % score higher. k still come back."""
    with open_fresh() as mem:
        me = Context(tenant_id="t1", user_id="u1", agent_id="a1", project_id="p1")
        decoys = "kernel scheduler latency kernel scheduler latency"
        crowd = [
            (Context(tenant_id="t1", user_id="u2", agent_id="a1", project_id="p1"), "user"),
            (Context(tenant_id="t2", user_id="u1", agent_id="a1", project_id="p1"), "user"),
            (Context(tenant_id="t1", user_id="u1", agent_id="a2", project_id="p1"), "user"),
            (Context(tenant_id="t1", user_id="u1", agent_id="a1", project_id="p2"), "project:p2"),
        ]
        for n, (ctx, scope) in enumerate(crowd):
            items = [{"content": f"{decoys} {n} {i}", "scope": scope} for i in range(250)]
            mem.remember_many(ctx, items)
        mine = mem.remember_many(me, [{"content": f"kernel note {i}", "scope": "project:p1"}
                                      for i in range(10)])  # fmt: skip
        own = {w.record.id for w in mine if w.record is not None}
        assert len(own) == 10
        vis = Visibility.of(resolve(me))
        query = mem.embedder.embed([decoys])[0]
        statements: list[str] = []
        mem.store.tracer = lambda sql, params: statements.append(sql)
        try:
            hits = probes.vector(mem.store, vis, query, mem.embedder.model_id, ("active",), 10)
        finally:
            mem.store.tracer = None
        assert {i for i, _ in hits} == own
        # one round: the 99 % were masked out before scoring, not filtered after it (on
        # PostgreSQL: the caller sees fewer than exact_below_rows vectors, so one exact
        # query with the predicate inside it, and no index walk)
        if type(mem.store).__name__ == "PostgresStore":
            scored = [sql for sql in statements if "embedding <=>" in sql]
            assert len(scored) == 1
            assert "MATERIALIZED" in scored[0]
            assert "r.tenant_id = %(vis_tenant)s" in scored[0]
        else:
            assert sum("json_each(:ids)" in sql for sql in statements) == 1
        lexical = probes.lexical(mem.store, vis, "kernel scheduler latency", ("active",), 10)
        assert {i for i, _ in lexical} == own
        assert {r.id for r in probes.recent(mem.store, vis, ("active",), 10)} == own


MISSING_ID = "01HZZZZZZZZZZZZZZZZZZZZZZZ"
PUBLIC_CALLS: dict[str, Callable[[Engram, Context], object]] = {
    "remember": lambda m, c: m.remember(c, "Prefers dark mode."),
    "remember_many": lambda m, c: m.remember_many(c, [{"content": "Prefers dark mode."}]),
    "get": lambda m, c: m.get(c, MISSING_ID),
    "list": lambda m, c: m.list(c),
    "history": lambda m, c: m.history(c, MISSING_ID),
    "correct": lambda m, c: m.correct(c, MISSING_ID, "new text"),
    "retract": lambda m, c: m.retract(c, MISSING_ID),
    "expire": lambda m, c: m.expire(c, MISSING_ID),
    "forget": lambda m, c: m.forget(c, MISSING_ID),
    "export": lambda m, c: m.export(c),
    "import_records": lambda m, c: m.import_records(c, []),
    "recall": lambda m, c: m.recall(c, "what does the user prefer?"),
    "erase_subject": lambda m, c: m.erase_subject(c.tenant_id, c.user_id),  # type: ignore[arg-type]
    "remember_global": lambda m, c: m.remember_global(c.tenant_id, "Rule."),  # type: ignore[arg-type]
    "trace": lambda m, c: m.trace(c, "no-such-trace"),
    "observe": lambda m, c: m.observe(c, [Turn("user", "I prefer dark mode in my editor.")]),
    "working": lambda m, c: m.working(c).set("step", 1),
    "share": lambda m, c: m.share(c, [MISSING_ID], "a9"),
    "export_jsonl": lambda m, c: m.export_jsonl(c, io.StringIO()),
    "import_jsonl": lambda m, c: m.import_jsonl(c, io.StringIO("")),
    "record_outcome": lambda m, c: m.record_outcome(c, MISSING_ID, success=True),
    "consolidate": lambda m, c: m.consolidate(c.tenant_id, c.user_id),  # type: ignore[arg-type]
}


def test_every_context_taking_method_is_covered() -> None:
    taking_ctx = {
        name for name, member in inspect.getmembers(Engram, inspect.isfunction)
        if not name.startswith("_") and "ctx" in inspect.signature(member).parameters
    }  # fmt: skip
    assert taking_ctx <= set(PUBLIC_CALLS), taking_ctx - set(PUBLIC_CALLS)


blank = st.sampled_from((None, "", " ", "\t\n"))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    tenant=st.one_of(blank, st.sampled_from(("t1", "t2"))),
    user=st.one_of(blank, st.sampled_from(("u1", "u2"))),
    agent=st.sampled_from((None, "a1")),
    call=st.sampled_from(sorted(PUBLIC_CALLS)),
)
def test_incomplete_identity_raises_on_every_public_call(
    open_fresh: Callable[..., Engram],
    tenant: str | None,
    user: str | None,
    agent: str | None,
    call: str,
) -> None:
    complete = bool(tenant and tenant.strip()) and bool(user and user.strip())
    if complete or (call == "recall" and not hasattr(Engram, "recall")):
        return
    if call == "remember_global" and tenant and tenant.strip():
        return  # an administrative call names no user
    if call == "consolidate" and tenant and tenant.strip() and user is None:
        return  # no user: every user of the tenant
    ctx = Context(tenant_id=tenant, user_id=user, agent_id=agent)
    with open_fresh(clock=FrozenClock(T0)) as mem:
        mem.remember(Context(tenant_id="t1", user_id="u1"), "Something already stored.")
        before = mem.audit_verify().entries
        with pytest.raises(IncompleteIdentity, match=r"tenant_id|user_id"):
            PUBLIC_CALLS[call](mem, ctx)
        assert mem.audit_verify().entries == before


@pytest.mark.parametrize("turns", [[], [Turn("user", "ok thanks")]])
def test_observe_refuses_an_incomplete_context_even_without_proposals(
    mem: Engram, turns: list[Turn]
) -> None:
    with pytest.raises(IncompleteIdentity):
        mem.observe(Context(tenant_id="", user_id="u1"), turns)


def _kernel_store(mem: Engram) -> tuple[Engram, Context, Record]:
    """A store with one 'kernel' memory of the caller (t1/u1/a1)."""
    me = Context(tenant_id="t1", user_id="u1", agent_id="a1")
    mine = mem.remember(me, "kernel note one").record
    assert mine is not None
    return mem, me, mine


@pytest.mark.parametrize("crowd_agent", ["a2", "a1"], ids=["invisible-crowd", "visible-crowd"])
def test_lexical_finds_visible_matches_of_a_common_term(mem: Engram, crowd_agent: str) -> None:
    mem, me, mine = _kernel_store(mem)
    crowd = Context(tenant_id="t1", user_id="u1", agent_id=crowd_agent)
    mem.remember_many(crowd, [{"content": f"kernel thing {i}"} for i in range(6)])
    vis = Visibility.of(resolve(me))
    found = [i for i, _ in probes.lexical(mem.store, vis, "kernel scheduler latency", ALL, 10)]
    assert mine.id in found


def test_lexical_term_pruning_ignores_records_the_caller_cannot_see(mem: Engram) -> None:
    mem, me, mine = _kernel_store(mem)
    hidden = Context(tenant_id="t1", user_id="u1", agent_id="a2")
    crowd = [f"kernel thing {i}" for i in range(6)] + ["scheduler x", "latency y"]
    mem.remember_many(hidden, [{"content": text} for text in crowd])
    vis = Visibility.of(resolve(me))
    found = [i for i, _ in probes.lexical(mem.store, vis, "kernel scheduler latency", ALL, 10)]
    assert found == [mine.id]
