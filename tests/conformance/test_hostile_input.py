"""Hostile input: every public SDK method, every argument, a battery of bad values.

Whatever a caller passes, only Engram's own errors come out (``InvalidArgument``
and its ``IncompleteIdentity``, ``NotFound``, ``Forbidden``), never a builtin
``RecursionError``, ``TypeError``, ``UnicodeEncodeError``, ``OverflowError`` or
a bare ``ValueError``; and afterwards the store's earlier data is intact and its
export is valid JSON.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
from collections.abc import Callable, Hashable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram import Budget, Context, Engram, EngramError, Turn
from engram.errors import Forbidden, InvalidArgument, NotFound

ALLOWED = (InvalidArgument, NotFound, Forbidden)


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def _cycle() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


BAD: list[Any] = [
    None,
    math.nan,
    math.inf,
    -math.inf,
    2**64,
    10**400,
    -(2**70),
    "x" * 10_000_000,
    "\ud800",
    "ok\udfffok",
    b"bytes",
    "u42\n",
    " padded ",
    "\x00",
    "zero\u200bwidth",
    "",
    _deep(5000),
    _cycle(),
    {1: "int key"},
    {"nested": [math.nan]},
    {"big": 2**80},
    object(),
    [],
    {},
    -1,
    True,
    datetime(2024, 1, 1),
    datetime.max.replace(tzinfo=timezone(timedelta(hours=-5))),
    datetime.min.replace(tzinfo=timezone(timedelta(hours=5))),
    {"kind": "document", "ref": "r\x00" * 600},
    {"kind": "tool", "derived_from": ["id"] * 1000},
    {"kind": "tool", "derived_from": [None]},
]
IDS = [f"bad{i}" for i in range(len(BAD))]

FIELDS = ["type", "scope", "key", "value", "authority", "confidence", "valid_from",
          "valid_to", "observed_at", "source", "sensitivity", "purpose", "consent_basis",
          "retention", "importance", "private"]  # fmt: skip
CONTEXT_FIELDS = [f.name for f in dataclasses.fields(Context)]


def _calls(mem: Engram, ctx: Context, mid: str) -> dict[str, Callable[[Any], object]]:
    """One call per (method, argument): the bad value goes in that argument only."""
    calls: dict[str, Callable[[Any], object]] = {
        "open.url": lambda b: Engram.open(b, embedder="hashing").close(),
        "open.config": lambda b: Engram.open(":memory:", embedder="hashing", config=b).close(),
        "open.clock": lambda b: Engram.open(":memory:", embedder="hashing", clock=b).close(),
        "open.embedder": lambda b: Engram.open(":memory:", embedder=b).close(),
        "remember.content": lambda b: mem.remember(ctx, b),
        "remember.now": lambda b: mem.remember(ctx, "Hostile now.", now=b),
        "remember.unknown-field": lambda b: mem.remember(ctx, "Unknown.", bogus=b),
        "remember_many.items": lambda b: mem.remember_many(ctx, b),
        "remember_many.item": lambda b: mem.remember_many(ctx, [b]),
        "remember_many.field": lambda b: mem.remember_many(ctx, [{"content": "x y", _key(b): 1}]),
        "observe.turns": lambda b: mem.observe(ctx, b),
        "observe.text": lambda b: mem.observe(ctx, [Turn("user", b)]),
        "observe.role": lambda b: mem.observe(ctx, [Turn(b, "I prefer tea.")]),
        "observe.time": lambda b: mem.observe(ctx, [Turn("user", "I prefer tea.", b)]),
        "observe.ref": lambda b: mem.observe(ctx, [Turn("user", "I prefer tea.", None, b)]),
        "observe.now": lambda b: mem.observe(ctx, [Turn("user", "I prefer tea.")], now=b),
        "remember_global.tenant": lambda b: mem.remember_global(b, "A global rule."),
        "remember_global.content": lambda b: mem.remember_global("acme", b),
        "remember_global.value": lambda b: mem.remember_global("acme", "Rule v.", value=b),
        "correct.id": lambda b: mem.correct(ctx, b, "Corrected."),
        "correct.content": lambda b: mem.correct(ctx, mid, b),
        "correct.value": lambda b: mem.correct(ctx, mid, "Corrected value.", value=b),
        "correct.now": lambda b: mem.correct(ctx, mid, "Corrected now.", now=b),
        "retract.id": lambda b: mem.retract(ctx, b),
        "retract.reason": lambda b: mem.retract(ctx, "01NOSUCHRECORD", reason=b),
        "retract.now": lambda b: mem.retract(ctx, "01NOSUCHRECORD", now=b),
        "expire.id": lambda b: mem.expire(ctx, b),
        "expire.now": lambda b: mem.expire(ctx, "01NOSUCHRECORD", now=b),
        "forget.id": lambda b: mem.forget(ctx, b),
        "erase_subject.tenant": lambda b: mem.erase_subject(b, "nobody"),
        "erase_subject.user": lambda b: mem.erase_subject("nobody-tenant", b),
        "recall.query": lambda b: mem.recall(ctx, b),
        "recall.intent": lambda b: mem.recall(ctx, "tea", intent=b),
        "recall.budget": lambda b: mem.recall(ctx, "tea", budget=b),
        "recall.budget.items": lambda b: mem.recall(ctx, "tea", budget=Budget(max_items=b)),
        "recall.budget.tokens": lambda b: mem.recall(ctx, "tea", budget=Budget(max_tokens=b)),
        "recall.budget.per_type": lambda b: mem.recall(ctx, "tea", budget=Budget(per_type=b)),
        "recall.budget.quota": lambda b: mem.recall(
            ctx, "tea", budget=Budget(per_type={"fact": b})
        ),
        "recall.as_of": lambda b: mem.recall(ctx, "tea", as_of=b),
        "recall.now": lambda b: mem.recall(ctx, "tea", now=b),
        "trace.id": lambda b: mem.trace(ctx, b),
        "get.id": lambda b: mem.get(ctx, b),
        "list.type": lambda b: mem.list(ctx, type=b),
        "list.status": lambda b: mem.list(ctx, status=b),
        "list.status-item": lambda b: mem.list(ctx, status=[b]),
        "list.limit": lambda b: mem.list(ctx, limit=b),
        "list.offset": lambda b: mem.list(ctx, offset=b),
        "history.id": lambda b: mem.history(ctx, b),
        "import.rows": lambda b: mem.import_records(ctx, b),
        "import.row": lambda b: mem.import_records(ctx, [b]),
        "import.content": lambda b: mem.import_records(ctx, [_row(content=b)]),
        "import.ctx": lambda b: mem.export(b),
    }
    for name in FIELDS:
        calls[f"remember.{name}"] = lambda b, n=name: mem.remember(ctx, "Hostile field.", **{n: b})
        calls[f"import.{name}"] = lambda b, n=name: mem.import_records(ctx, [_row(**{n: b})])
    for name in CONTEXT_FIELDS:
        calls[f"context.{name}"] = lambda b, n=name: mem.recall(
            dataclasses.replace(ctx, **{n: b}), "tea"
        )
        calls[f"context.{name}.write"] = lambda b, n=name: mem.remember(
            dataclasses.replace(ctx, **{n: b}), "Context write."
        )
    return calls


def _key(bad: Any) -> Any:
    """``bad`` as a mapping key (an unhashable value cannot be one)."""
    return bad if isinstance(bad, Hashable) else "unhashable"


def _row(**changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": "R1",
        "content": "An imported fact about tea.",
        "created_at": "2024-01-01T00:00:00+00:00",
        "status": "active",
    }
    return {**row, **changes}


def _snapshot(mem: Engram, ctx: Context) -> str:
    """The export as strict JSON (NaN or a lone surrogate would fail here)."""
    return json.dumps(mem.export(ctx), allow_nan=False, ensure_ascii=False).encode().decode()


def _seed(mem: Engram, ctx: Context) -> str:
    mem.remember(ctx, "I take my tea without sugar.", key="tea.sugar", value=False)
    record = mem.remember(ctx, "The kettle is in the left cupboard.").record
    assert record is not None
    return record.id


def _exercise(call: Callable[[Any], object], bad: Any) -> None:
    try:
        call(bad)
    except ALLOWED:
        pass
    except EngramError as exc:  # any other Engram error is a bug at the edge here
        pytest.fail(f"unexpected {type(exc).__name__}: {exc}")


def test_every_sdk_method_refuses_every_bad_value_with_an_engram_error(
    mem: Engram, ctx: Context
) -> None:
    keeper = Context(tenant_id="acme", user_id="keeper")
    _seed(mem, keeper)
    kept = _snapshot(mem, keeper)
    mid = _seed(mem, ctx)
    before = {row["id"] for row in mem.export(ctx)}
    failures = []
    for name, call in _calls(mem, ctx, mid).items():
        for index, bad in enumerate(BAD):
            try:
                _exercise(call, bad)
            except BaseException as exc:
                if isinstance(exc, pytest.fail.Exception):
                    failures.append(f"{name} {IDS[index]}: {exc}")
                else:
                    failures.append(f"{name} {IDS[index]}: {type(exc).__name__}: {exc!s:.120}")
    assert not failures, "\n".join(failures)
    assert _snapshot(mem, keeper) == kept
    assert before <= {row["id"] for row in mem.export(ctx)}
    _snapshot(mem, ctx)
    assert mem.audit_verify().ok
    assert mem.recall(keeper, "tea sugar").status in ("ok", "ambiguous")


JSONISH = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text() | st.binary(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=5) | st.integers(), children, max_size=4)
        | st.tuples(children, children)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    field=st.sampled_from([*FIELDS, "content"]),
    value=JSONISH,
    ident=st.text(max_size=8),
)
def test_fuzzed_fields_and_identities_raise_only_engram_errors(
    mem: Engram, ctx: Context, field: str, value: Any, ident: str
) -> None:
    fields = {field: value} if field != "content" else {}
    content = value if field == "content" else "A fuzzed memory about tea."
    for call in (
        lambda: mem.remember(ctx, content, **fields),
        lambda: mem.import_records(ctx, [_row(**fields, content=content)]),
        lambda: mem.recall(dataclasses.replace(ctx, user_id=ident), "tea"),
        lambda: mem.get(dataclasses.replace(ctx, agent_id=ident), ident),
    ):
        with contextlib.suppress(*ALLOWED):
            call()
    json.dumps(mem.export(ctx), allow_nan=False)


def test_nan_and_tuples_in_value_cannot_fork_versions(mem: Engram, ctx: Context) -> None:
    with pytest.raises(InvalidArgument, match=r"value\.a\[1\] must be a finite number"):
        mem.remember(ctx, "Ratio.", key="ratio", value={"a": [1, math.nan]})
    first = mem.remember(ctx, "Size is two by three.", key="size", value=(2, 3))
    again = mem.remember(ctx, "Size is two by three.", key="size", value=[2, 3])
    assert (first.operation, again.operation) == ("ADD", "CONFIRM")
    assert [r.value for r in mem.list(ctx, status=None)] == [[2, 3]]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("u42\n", "surrounding whitespace"),
        (" u42", "surrounding whitespace"),
        ("u42\u200b", "printable"),
        ("u" * 201, "1-200 characters"),
    ],
)
def test_an_identifier_with_invisible_differences_is_refused(
    mem: Engram, ctx: Context, value: str, message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        mem.remember(dataclasses.replace(ctx, user_id=value), "A second identity?")
    assert mem.export(dataclasses.replace(ctx, user_id="u42")) == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"value": "v" * 16_385}, "16384 bytes"),
        ({"value": _deep(40)}, "deeper than 32"),
        ({"value": 2**63}, "64-bit"),
        ({"source": {"kind": "tool", "ref": "r" * 1001}}, "source.ref"),
        ({"source": {"kind": "tool", "ref": "line\nbreak"}}, "source.ref"),
        ({"source": {"kind": "tool", "derived_from": ["a"] * 257}}, "the limit is 256"),
        ({"source": {"kind": "tool", "derived_from": ["a\n"]}}, r"derived_from\[0\]"),
        ({"key": "user.timezone\n"}, "key must match"),
    ],
)
def test_field_limits_are_enforced(
    mem: Engram, ctx: Context, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        mem.remember(ctx, "A memory at the limits.", **fields)
    assert mem.export(ctx) == []


def test_values_at_the_limits_are_accepted(mem: Engram, ctx: Context) -> None:
    value = {"blob": "v" * (16_384 - len('{"blob":""}'))}
    w = mem.remember(ctx, "A memory at the limits.", value=value,
                     source={"kind": "tool", "ref": "r" * 1000,
                             "derived_from": ["a"] * 256})  # fmt: skip
    assert w.operation == "ADD"
    assert mem.remember(ctx, "Deep.", value=_deep(32)).operation == "ADD"
    assert w.record is not None
    assert mem.get(ctx, w.record.id).value == value
    assert len(json.dumps(mem.export(ctx), allow_nan=False)) > 16_384
