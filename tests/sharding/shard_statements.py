"""What a store sends, and whether each statement stays inside one tenant.

``captured`` observes every statement any psycopg cursor executes (the store's
own, its pool's session settings, its migrations) while it is active: it
records the SQL text and the bound parameters and then runs the statement
unchanged. ``examine`` asks PostgreSQL itself how it would run one statement
(``EXPLAIN (VERBOSE, FORMAT JSON)`` with the same parameters) and reads every
scan of a table from the plan: a scan of a tenant table must carry an equality
``tenant_id = <one value>`` that the whole condition implies (a top-level
conjunct, or one in every arm of an ``OR``), and every such scan in a statement
must name the same tenant. An ``INSERT`` into a tenant table must list
``tenant_id`` among its columns. That is the condition under which Citus routes a
statement to a single shard, so a statement failing it is a cross-shard query.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg

__all__ = ["Sent", "Verdict", "captured", "examine", "implied_tenant", "plan_relations"]

_EXPLAINABLE = ("SELECT", "WITH", "INSERT", "UPDATE", "DELETE")
_CONDITIONS = ("Index Cond", "Recheck Cond", "Filter", "TID Cond")
_VALUE = r"'(?:[^']|'')*'::text|\$\d+"
_EQUALITY = (
    re.compile(rf"(?:\w+\.)?tenant_id = ({_VALUE})"),
    re.compile(rf"({_VALUE}) = (?:\w+\.)?tenant_id"),
)
_INSERT = re.compile(r"INSERT INTO (\w+)\s*\(([^)]*)\)", re.IGNORECASE)


@dataclass(frozen=True)
class Sent:
    """One statement as the driver was asked to run it."""

    sql: Any  # str, bytes (a script of several statements) or a psycopg.sql value
    params: Any

    @property
    def raw(self) -> str:
        """The SQL text as sent."""
        if isinstance(self.sql, bytes):
            return self.sql.decode()
        return self.sql if isinstance(self.sql, str) else str(self.sql.as_string(None))

    @property
    def text(self) -> str:
        """The SQL text, whitespace collapsed."""
        return " ".join(self.raw.split())

    @property
    def explainable(self) -> bool:
        """A single DML statement (a migration script, sent as bytes, is DDL)."""
        single = not isinstance(self.sql, bytes)
        return single and self.text.lstrip("(").split(" ", 1)[0].upper() in _EXPLAINABLE


@dataclass
class Verdict:
    """What the plan of one statement touches."""

    relations: list[str] = field(default_factory=list)  # every scanned or written table
    tenants: set[str] = field(default_factory=set)  # the tenant values its scans imply
    unfiltered: list[str] = field(default_factory=list)  # tenant tables read without one


@contextmanager
def captured() -> Iterator[list[Sent]]:
    """Record every statement psycopg cursors execute while the block runs."""
    sent: list[Sent] = []
    lock = threading.Lock()
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def recording_execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        with lock:
            sent.append(Sent(query, params))
        return execute(self, query, params, **kwargs)

    def recording_executemany(self: Any, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        rows = list(params_seq)
        with lock:
            sent.extend(Sent(query, params) for params in rows)
        return executemany(self, query, rows, **kwargs)

    psycopg.Cursor.execute = recording_execute  # type: ignore[method-assign]
    psycopg.Cursor.executemany = recording_executemany  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]


def _unwrap(expr: str) -> str:
    """``expr`` without parentheses that enclose all of it."""
    expr = expr.strip()
    while expr.startswith("(") and _closing(expr, 0) == len(expr) - 1:
        expr = expr[1:-1].strip()
    return expr


def _closing(expr: str, start: int) -> int:
    """The index of the parenthesis closing the one at ``start`` (quotes respected)."""
    depth, quoted = 0, False
    for i in range(start, len(expr)):
        char = expr[i]
        if char == "'":
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split(expr: str, word: str) -> list[str]:
    """``expr`` split at ``word`` (AND, OR) where no parenthesis or quote is open."""
    parts, depth, quoted, start = [], 0, False, 0
    token = f" {word} "
    i = 0
    while i < len(expr):
        char = expr[i]
        if char == "'":
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")":
            depth -= 1
        elif not quoted and depth == 0 and expr.startswith(token, i):
            parts.append(expr[start:i])
            i += len(token)
            start = i
            continue
        i += 1
    parts.append(expr[start:])
    return parts


def implied_tenant(expr: str) -> str | None:
    """The one tenant value a plan condition implies ``tenant_id`` equals, or None."""
    expr = _unwrap(expr)
    conjuncts = _split(expr, "AND")
    if len(conjuncts) > 1:
        found = [implied_tenant(part) for part in conjuncts]
        return next((value for value in found if value is not None), None)
    arms = _split(expr, "OR")
    if len(arms) > 1:
        values = {implied_tenant(arm) for arm in arms}
        return values.pop() if len(values) == 1 and None not in values else None
    for pattern in _EQUALITY:
        match = pattern.fullmatch(expr)
        if match:
            return match.group(1)
    return None


def plan_relations(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a plan tree (sub-plans and init-plans included) naming a table."""
    if "Relation Name" in plan:
        yield plan
    for child in plan.get("Plans", ()):
        yield from plan_relations(child)


def _inserted_columns(text: str) -> dict[str, set[str]]:
    return {
        match.group(1).lower(): {c.strip().lower() for c in match.group(2).split(",")}
        for match in _INSERT.finditer(text)
    }


def examine(conn: psycopg.Connection[Any], sent: Sent, tenant_tables: set[str]) -> Verdict:
    """The plan of ``sent`` on ``conn`` (the statement itself is not run)."""
    row = conn.execute(f"EXPLAIN (VERBOSE, FORMAT JSON) {sent.raw}", sent.params).fetchone()
    assert row is not None
    verdict = Verdict()
    inserted = _inserted_columns(sent.text)
    for node in plan_relations(row[0][0]["Plan"]):
        table = str(node["Relation Name"])
        verdict.relations.append(table)
        if table not in tenant_tables:
            continue
        if node["Node Type"] == "ModifyTable":
            if node["Operation"] == "Insert" and "tenant_id" not in inserted.get(table, set()):
                verdict.unfiltered.append(f"INSERT INTO {table} without a tenant_id column")
            continue  # an UPDATE or DELETE is judged on the scan below it
        conditions = [str(node[key]) for key in _CONDITIONS if key in node]
        value = implied_tenant(" AND ".join(f"({c})" for c in conditions)) if conditions else None
        if value is None:
            verdict.unfiltered.append(
                f"{node['Node Type']} on {table}: {conditions or 'no filter'}"
            )
        else:
            verdict.tenants.add(value)
    return verdict
