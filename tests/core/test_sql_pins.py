"""Every read carries the scope predicate, and emits a pinned number of statements.

A tracer on the store sees each statement with its parameters. For every read of
the SDK and every candidate query of the store, each reference to ``records`` or
``vectors`` must come with a condition rendered by ``engram.store.predicate``
(``Visibility`` or ``Subject``, bound to the caller's tenant and user, in the
store's dialect), and the number of statements is pinned per backend, so that an
added, unscoped query fails here.
"""

from __future__ import annotations

import ast
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from tests import probes

from engram import Context, Engram
from engram.scope import resolve
from engram.store.contract import NeighbourProbe
from engram.store.dialect import POSTGRES, SQLITE, Dialect
from engram.store.predicate import Subject, Visibility

SRC = Path(__file__).resolve().parents[2] / "src" / "engram"
TABLE_REF = re.compile(r"\b(?:FROM|JOIN)\s+(records|vectors)\b(?!_)")
# A join by primary key onto rows already restricted by a predicate cannot widen them.
KEY_JOINS = ("JOIN records r ON r.id = v.record_id", "k ON r.rowid = k.rid")
ALIASES = ("r", "v", "p", "x")
ALL = ("active", "superseded", "retracted", "expired", "disputed", "deleted")
WORKERS = ("engram-vector", "engram-pg-probe")


def dialect_of(mem: Engram) -> Dialect:
    """The SQL dialect of ``mem``'s store."""
    return POSTGRES if type(mem.store).__name__ == "PostgresStore" else SQLITE


@dataclass
class Collector:
    """A store tracer keeping the statements of the calling thread and of the recall
    workers it hands channels to (SQLite's vector scans, PostgreSQL's probe threads;
    not those of the background usage flush)."""

    thread: int = field(default_factory=threading.get_ident)
    statements: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, sql: str, params: Mapping[str, Any]) -> None:
        current = threading.current_thread()
        if current.ident == self.thread or current.name.startswith(WORKERS):
            self.statements.append((sql, dict(params)))


def _renderings(vis: Visibility, dialect: Dialect) -> tuple[list[str], list[str]]:
    """(full visibility conditions, single-branch conditions) for every alias."""
    full, halves = [], []
    for alias in ALIASES:
        full.append(vis.sql(alias, dialect)[0])
        halves += [text for text, _ in vis.branches(alias, dialect)]
    return full, halves


def _subject_renderings(vis: Visibility, dialect: Dialect) -> list[str]:
    subject = Subject(vis.tenant_id, vis.user_id)
    texts = []
    for alias in ALIASES:
        texts += [subject.sql(alias, dialect)[0], subject.partition_sql(alias, dialect)[0]]
    return texts


def scope_problems(
    sql: str, params: Mapping[str, Any], vis: Visibility, dialect: Dialect = SQLITE
) -> list[str]:
    """Why ``sql`` is not properly scoped to ``vis`` (empty when it is)."""
    refs = [m.group(1) for m in TABLE_REF.finditer(sql)]
    if not refs:
        return []
    problems = []
    full, halves = _renderings(vis, dialect)
    n_full = sum(sql.count(text) for text in full)
    n_half = sum(sql.count(text) for text in halves) - 2 * n_full
    n_subject = sum(sql.count(text) for text in _subject_renderings(vis, dialect))
    n_key_joins = sum(sql.count(text) for text in KEY_JOINS)
    guarded = len(refs) - n_key_joins
    if n_full + n_half + n_subject < guarded:
        problems.append(f"{guarded} table references but {n_full + n_half + n_subject} conditions")
    if n_full or n_half:
        expected = {"vis_tenant": vis.tenant_id, "vis_user": vis.user_id, "vis_agent": vis.agent_id}
        for name, value in expected.items():
            if params.get(name) != value:
                problems.append(f"{name} bound to {params.get(name)!r}, not {value!r}")
    if n_subject:
        if params.get("subj_tenant") != vis.tenant_id:
            problems.append("subject bound to another tenant")
        if params.get("subj_user") not in (vis.user_id, ""):
            problems.append("subject bound to another user")
    return problems


@pytest.fixture
def world(mem: Engram, ctx: Context) -> dict[str, str]:
    """The caller's records, a global record, and neighbours the caller must not see."""
    return build_world(mem, ctx)


def build_world(mem: Engram, ctx: Context) -> dict[str, str]:
    """See ``world``."""
    ids = {}
    w = mem.remember(ctx, "Use Objective-C for the iOS language.", type="constraint",
                     scope="repo:r1", key="ios.language", value="Objective-C")  # fmt: skip
    assert w.record is not None
    ids["keyed"] = w.record.id
    w = mem.correct(ctx, w.record.id, "Use Swift for the iOS language.", value="Swift")
    assert w.record is not None
    ids["current"] = w.record.id
    mem.remember(ctx, "Working on network-state handling for iOS.", type="task_state",
                 scope="task:t1")  # fmt: skip
    w = mem.remember(ctx, "The iOS app crashed on launch last week.", type="incident")
    assert w.record is not None
    ids["plain"] = w.record.id
    mem.remember_global("acme", "All iOS builds are signed by the release team.", type="rule")
    neighbours = [
        Context(tenant_id="acme", user_id="u2", agent_id="coder", repository_id="r1"),
        Context(tenant_id="globex", user_id="u1", agent_id="coder", repository_id="r1"),
        Context(tenant_id="acme", user_id="u1", agent_id="reviewer", repository_id="r1"),
        Context(tenant_id="acme", user_id="u1", agent_id="coder", repository_id="r9"),
    ]
    for n, other in enumerate(neighbours):
        scope = "repo:r9" if other.repository_id == "r9" else "user"
        mem.remember(other, f"Neighbour {n}: the iOS language is Kotlin.", scope=scope,
                     key="ios.language", value="Kotlin", type="constraint")  # fmt: skip
    return ids


def _calls(mem: Engram, ctx: Context, ids: dict[str, str]) -> dict[str, Callable[[], object]]:
    vis = Visibility.of(resolve(ctx))
    query = mem.embedder.embed(["iOS language"])[0]
    model = mem.embedder.model_id
    calls: dict[str, Callable[[], object]] = {
        "get": lambda: mem.get(ctx, ids["current"]),
        "list": lambda: mem.list(ctx, status=None),
        "history": lambda: mem.history(ctx, ids["current"]),
        "export": lambda: mem.export(ctx),
        "by_key": lambda: probes.by_key(mem.store, vis, ["ios.language"], ALL, 10),
        "lexical": lambda: probes.lexical(mem.store, vis, "iOS language", ALL, 10),
        "vector-cold": lambda: probes.vector(mem.store, vis, query, model, ALL, 10),
        "vector-warm": lambda: probes.vector(mem.store, vis, query, model, ALL, 10),
        "recent": lambda: probes.recent(mem.store, vis, ALL, 10),
        "recent-types": lambda: probes.recent(mem.store, vis, ALL, 10, ["task_state"]),
        "fetch": lambda: mem.store.read(vis, list(ids.values())),
        "keyed": lambda: probes.keyed(mem.store, vis, ["constraint", "rule"], ALL, 10),
        "vectors_of": lambda: mem.store.vectors(vis, list(ids.values()), model),
    }
    coder = Visibility.of(resolve(Context(tenant_id="acme", user_id="u1", agent_id="coder")))
    anchor = mem.store.read(coder, [ids["plain"]])[0]
    near = NeighbourProbe((anchor,), ("incident", "fact"), ALL, timedelta(days=1), 5)
    calls["neighbors"] = lambda: probes.hits(mem.store, vis, near)
    if hasattr(mem, "recall"):
        calls["recall"] = lambda: mem.recall(ctx, "Which language for the iOS app?")
    return calls


# A recall also reads its tenant's cache generation first (one primary-key read of
# ``cache_generations``: another process's deletion drops this one's cached copies).
PINNED = {
    "get": 1, "list": 1, "history": 2, "export": 1, "by_key": 1, "lexical": 4,
    "vector-cold": 5, "vector-warm": 3, "recent": 1, "recent-types": 1, "fetch": 1,
    "keyed": 1, "vectors_of": 1, "neighbors": 1, "recall": 9,
}  # fmt: skip
# PostgreSQL answers a probe with one statement, except vectors: the model check,
# the index walk and, as here where fewer than ``limit`` vectors are visible, the
# exact search. No partitions are loaded, so cold and warm are the same.
PINNED_PG = {
    "get": 1, "list": 1, "history": 2, "export": 1, "by_key": 1, "lexical": 1,
    "vector-cold": 3, "vector-warm": 3, "recent": 1, "recent-types": 1, "fetch": 1,
    "keyed": 1, "vectors_of": 1, "neighbors": 1, "recall": 9,
}  # fmt: skip


Statements = list[tuple[str, dict[str, Any]]]
Traced = Callable[[Callable[[], object]], Statements]


def statements_of(mem: Engram, call: Callable[[], object]) -> Statements:
    """The statements ``call`` makes on ``mem``'s store (tracer on only meanwhile)."""
    collector = Collector()
    mem.store.tracer = collector
    try:
        call()
    finally:
        mem.store.tracer = None
    return collector.statements


@pytest.fixture
def traced(mem: Engram) -> Iterator[Traced]:
    """Run a call with a tracer on; its statements (usage writes flushed afterwards)."""

    def run(call: Callable[[], object]) -> Statements:
        statements = statements_of(mem, call)
        if hasattr(mem, "flush"):
            mem.flush()
        return statements

    yield run
    mem.store.tracer = None


@pytest.mark.parametrize("reader", ["owner", "agentless", "other-user"])
def test_every_read_statement_is_scoped_and_counted(
    mem: Engram, ctx: Context, world: dict[str, str], traced: Traced, reader: str
) -> None:
    readers = {
        "owner": ctx,
        "agentless": Context(tenant_id="acme", user_id="u1", repository_id="r1"),
        "other-user": Context(tenant_id="acme", user_id="u2", agent_id="coder"),
    }
    who = readers[reader]
    vis = Visibility.of(resolve(who))
    dialect = dialect_of(mem)
    pinned = PINNED_PG if dialect is POSTGRES else PINNED
    counts = {}
    for name, call in _calls(mem, who, world).items():
        if reader != "owner" and name in ("get", "history"):
            continue  # NotFound for others; covered by the conformance suite
        statements = traced(call)
        counts[name] = len(statements)
        for sql, params in statements:
            problems = scope_problems(sql, params, vis, dialect)
            assert not problems, (name, sql, problems)
    if reader == "owner":
        assert counts == {name: pinned[name] for name in counts}


def _vis(tenant: str = "acme", user: str = "u1", agent: str | None = "coder") -> Visibility:
    return Visibility.of(resolve(Context(tenant_id=tenant, user_id=user, agent_id=agent)))


def test_the_checker_catches_unscoped_statements() -> None:
    vis = _vis()
    cond, params = vis.sql()
    assert scope_problems(f"SELECT r.id FROM records r WHERE {cond}", params, vis) == []
    assert scope_problems("SELECT r.id FROM records r WHERE r.id = :id", {"id": "x"}, vis)
    union = f"SELECT r.id FROM records r WHERE {cond} UNION ALL SELECT r.id FROM records r"
    assert scope_problems(union, params, vis)
    other, other_params = _vis(tenant="globex").sql()
    assert scope_problems(f"SELECT r.id FROM records r WHERE {other}", other_params, vis)
    unscoped_inner = "SELECT r.id FROM records r JOIN (SELECT r.rowid AS rid FROM records r) k"
    assert scope_problems(f"{unscoped_inner} ON r.rowid = k.rid", {}, vis)
    scoped_inner = f"SELECT r.rowid AS rid FROM records r WHERE {cond}"
    joined = f"SELECT r.id FROM records r JOIN ({scoped_inner}) k ON r.rowid = k.rid"
    assert scope_problems(joined, params, vis) == []
    subject, subject_params = Subject("acme", "u2").sql("v")
    assert scope_problems(f"SELECT v.seq FROM vectors v WHERE {subject}", subject_params, vis)


def test_vectors_of_returns_only_visible_records(mem: Engram, ctx: Context) -> None:
    reviewer = Context(tenant_id="acme", user_id="u1", agent_id="reviewer")
    hidden = mem.remember(reviewer, "The reviewer agent's private checklist.").record
    other_repo = Context(tenant_id="acme", user_id="u1", agent_id="coder", repository_id="r9")
    unnamed = mem.remember(other_repo, "Repo r9 uses Bazel.", scope="repo:r9").record
    mine = mem.remember(ctx, "The coder agent's own checklist.").record
    assert hidden is not None
    assert unnamed is not None
    assert mine is not None
    vis = Visibility.of(resolve(ctx))
    model = mem.embedder.model_id
    found = mem.store.vectors(vis, [hidden.id, unnamed.id, mine.id], model)
    assert set(found) == {mine.id}
    expected = mem.embedder.embed([mine.content])[0]
    assert found[mine.id].tolist() == pytest.approx(expected.tolist(), abs=1e-6)
    assert mem.store.vectors(vis, [hidden.id, unnamed.id], model) == {}


def _sql_strings(path: Path) -> Iterator[tuple[int, str]]:
    """String literals of a module (f-strings with ``{}`` holes), docstrings excluded."""
    tree = ast.parse(path.read_text())
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    parts_of_fstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts_of_fstrings.update(id(value) for value in node.values)
            text = "".join(
                str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values
            )
            yield node.lineno, text
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docstrings and id(node) not in parts_of_fstrings):  # fmt: skip
            yield node.lineno, node.value


OWNERSHIP_SQL = re.compile(r"\b(?:tenant_id|user_id)\s*(?:=(?!=)|IN\b|<>|!=)")
# DDL, not a query: the schema's own consistency check (on each backend), and the
# SQLite trigger that deletes a record's outcome statistics and consolidation mark
# with it (what PostgreSQL's ON DELETE CASCADE does).
ALLOWED = {
    ("store/sqlite/schema.py", "user_id = '') = (scope = 'global')"),
    ("store/postgres/schema.py", "user_id = '') = (scope = 'global')"),
    ("store/sqlite/schema.py", "tenant_id = old.tenant_id AND procedure_id = old.id;"),
    ("store/sqlite/schema.py", "tenant_id = old.tenant_id AND user_id = old.user_id AND"),
    ("store/sqlite/schema.py", "user_id = old.user_id AND episode_id = old.id;"),
}


def test_only_the_predicate_module_writes_ownership_conditions() -> None:
    offenders = []
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 20
    for path in files:
        relative = path.relative_to(SRC).as_posix()
        if relative == "store/predicate.py":
            continue
        for line, text in _sql_strings(path):
            for match in OWNERSHIP_SQL.finditer(text):
                rest = text[match.start() :]
                if not any(relative == f and rest.startswith(a) for f, a in ALLOWED):
                    offenders.append(f"{relative}:{line}: {rest[:40]!r}")
    for path in sorted(SRC.rglob("*.sql")):
        if OWNERSHIP_SQL.search(path.read_text()):
            offenders.append(path.relative_to(SRC).as_posix())
    assert offenders == []


def test_the_ownership_scan_sees_sql_in_f_strings(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text(
        '"""Docstring mentioning user_id = 1 is fine."""\n'
        'def q(a):\n    return f"SELECT * FROM records {a} WHERE {a}.tenant_id = :t"\n'
        'X = "DELETE FROM vectors WHERE user_id IN (1)"\n'
    )
    hits = [t for _, t in _sql_strings(module) if OWNERSHIP_SQL.search(t)]
    assert len(hits) == 2
