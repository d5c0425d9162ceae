"""Golden recall cases as data: the typed model and its loader.

A case is a small world (memories written by named writers, then corrections
and retractions) plus one recall request and what the answer must satisfy. Cases
live in ``cases.json`` next to this module; ``load_cases`` parses and validates
them, so a typo in the data fails at load time with the case id and field, not
as a confusing assertion later.

Memories are referred to by *labels* local to their case; the runner maps labels
to the record ids the store issues. ``fixtures`` hold memory sets that several
cases share (each case still runs on its own fresh store).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from engram.errors import InvalidArgument

__all__ = [
    "CASES_PATH",
    "Action",
    "Conflict",
    "Expectations",
    "GoldenCase",
    "GoldenRequest",
    "Memory",
    "Writer",
    "load_cases",
    "parse_time",
]

CASES_PATH = Path(__file__).with_name("cases.json")

#: ``remember`` keyword arguments a memory may carry, passed through unchanged.
RECORD_FIELDS = (
    "type", "scope", "key", "value", "authority", "confidence", "source", "retention",
    "sensitivity", "consent_basis", "purpose", "importance", "private", "agent_scope",
)  # fmt: skip
TIME_FIELDS = ("valid_from", "valid_to", "observed_at")
STATUSES = ("ok", "empty", "partial", "unavailable", "ambiguous")
Unit = tuple[str, ...]
"""A required unit: satisfied when any one of its labels is selected."""


def parse_time(value: object, where: str) -> datetime:
    """An ISO 8601 string with a UTC offset, as a timezone-aware datetime."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{where}: expected an ISO 8601 string, got {value!r}")
    when = datetime.fromisoformat(value)
    if when.tzinfo is None:
        raise InvalidArgument(f"{where}: {value!r} has no UTC offset")
    return when


def _opt_time(raw: Mapping[str, Any], name: str, where: str) -> datetime | None:
    value = raw.get(name)
    return None if value is None else parse_time(value, f"{where}.{name}")


def _labels(raw: object, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise InvalidArgument(f"{where}: expected a list of labels")
    return tuple(raw)


@dataclass(frozen=True, slots=True)
class Writer:
    """Who writes a memory: a user context, or the tenant's administrator (``global``)."""

    tenant_id: str
    user_id: str
    agent_id: str | None
    admin: bool = False


@dataclass(frozen=True, slots=True)
class Memory:
    """One memory to store, by label; ``write`` is the operation the write path must pick."""

    label: str
    content: str
    fields: Mapping[str, Any]
    times: Mapping[str, datetime]
    written_at: datetime
    writer: Writer
    write: str = "ADD"


@dataclass(frozen=True, slots=True)
class Action:
    """A correction, retraction or expiry applied to a labelled memory after the writes."""

    op: str
    target: str
    at: datetime
    label: str | None = None
    content: str | None = None
    value: Any = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class GoldenRequest:
    """The recall call: identity, query, intent, budget and the two clocks."""

    context: Mapping[str, str | None]
    query: str
    now: datetime
    intent: str | None = None
    max_items: int | None = None
    max_tokens: int | None = None
    per_type: Mapping[str, int] | None = None
    as_of: datetime | None = None


@dataclass(frozen=True, slots=True)
class Conflict:
    """A conflict group under evaluation: its members and the expected winner (None: ask)."""

    key: str
    members: tuple[str, ...]
    winner: str | None
    kind: str


@dataclass(frozen=True, slots=True)
class Expectations:
    """What the answer must satisfy. Every list holds case-local labels.

    ``required_semantic`` names memories that only a semantic embedder can be
    expected to find (a paraphrase sharing no words with the request); they are
    required when the run's embedder is not the hashing test embedder.
    """

    status: str
    required: tuple[Unit, ...] = ()
    required_semantic: tuple[Unit, ...] = ()
    relevant: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    ordered: tuple[tuple[str, str], ...] = ()
    first: str | None = None
    clarification_mentions: tuple[str, ...] = ()
    max_tokens: int | None = None
    max_items: int | None = None
    max_per_type: Mapping[str, int] = field(default_factory=dict)
    dedup_groups: tuple[tuple[str, ...], ...] = ()
    conflict: Conflict | None = None
    prompt_excludes: tuple[str, ...] = ()
    prompt_mentions: tuple[str, ...] = ()

    def required_for(self, semantic: bool) -> tuple[Unit, ...]:
        """The required units; ``required_semantic`` counts only for a semantic embedder."""
        return (*self.required, *self.required_semantic) if semantic else self.required

    @property
    def relevant_labels(self) -> frozenset[str]:
        """Required (every alternative), optionally relevant and dedup-group labels."""
        units = (*self.required, *self.required_semantic)
        labels = {label for unit in units for label in unit}
        labels.update(self.relevant)
        labels.update(label for group in self.dedup_groups for label in group)
        return frozenset(labels)


@dataclass(frozen=True, slots=True)
class GoldenCase:
    """One world, one request, one set of expectations."""

    id: str
    description: str
    tags: tuple[str, ...]
    memories: tuple[Memory, ...]
    actions: tuple[Action, ...]
    request: GoldenRequest
    expect: Expectations

    @property
    def labels(self) -> frozenset[str]:
        """Every label a memory or a correction defines."""
        made = {m.label for m in self.memories}
        made.update(a.label for a in self.actions if a.label)
        return frozenset(made)


def _writer(raw: Mapping[str, Any], ctx: Mapping[str, str | None]) -> Writer:
    spec: Mapping[str, Any] = raw.get("writer") or {}
    merged = {**ctx, **spec}
    tenant, user = str(merged["tenant_id"]), str(merged["user_id"])
    if raw.get("admin"):
        return Writer(tenant, "admin", None, admin=True)
    return Writer(tenant, user, merged.get("agent_id"))


def _memory(raw: Mapping[str, Any], ctx: Mapping[str, str | None], where: str) -> Memory:
    known = {"label", "content", "written_at", "writer", "admin", "write", *RECORD_FIELDS,
             *TIME_FIELDS}  # fmt: skip
    unknown = set(raw) - known
    if unknown:
        raise InvalidArgument(f"{where}: unknown memory fields {sorted(unknown)}")
    times = {name: t for name in TIME_FIELDS if (t := _opt_time(raw, name, where)) is not None}
    return Memory(
        label=str(raw["label"]),
        content=str(raw["content"]),
        fields={name: raw[name] for name in RECORD_FIELDS if name in raw},
        times=times,
        written_at=parse_time(raw["written_at"], f"{where}.written_at"),
        writer=_writer(raw, ctx),
        write=str(raw.get("write", "ADD")),
    )


def _action(raw: Mapping[str, Any], where: str) -> Action:
    if raw.get("op") not in ("correct", "retract", "expire"):
        raise InvalidArgument(f"{where}: op must be correct, retract or expire")
    return Action(op=raw["op"], target=str(raw["target"]),
                  at=parse_time(raw["at"], f"{where}.at"), label=raw.get("label"),
                  content=raw.get("content"), value=raw.get("value"),
                  reason=raw.get("reason"))  # fmt: skip


def _request(raw: Mapping[str, Any], base: Mapping[str, Any], where: str) -> GoldenRequest:
    ctx = {**base["context"], **raw.get("context", {})}
    budget = raw.get("budget") or {}
    return GoldenRequest(
        context=ctx, query=str(raw["query"]),
        now=parse_time(raw.get("now", base["now"]), f"{where}.now"),
        intent=raw.get("intent"), max_items=budget.get("max_items"),
        max_tokens=budget.get("max_tokens"), per_type=budget.get("per_type"),
        as_of=_opt_time(raw, "as_of", where),
    )  # fmt: skip


def _conflict(raw: Mapping[str, Any] | None, where: str) -> Conflict | None:
    if raw is None:
        return None
    members = _labels(raw.get("members"), f"{where}.members")
    winner = raw.get("winner")
    if len(members) < 2 or (winner is not None and winner not in members):
        raise InvalidArgument(f"{where}: a conflict needs 2+ members and a winner among them")
    return Conflict(str(raw["key"]), members, winner, str(raw.get("kind", "authority")))


def _units(raw: object, where: str) -> tuple[Unit, ...]:
    if not isinstance(raw, list):
        raise InvalidArgument(f"{where}: expected a list")
    return tuple((item,) if isinstance(item, str) else _labels(item, where) for item in raw)


def _expect(raw: Mapping[str, Any], where: str) -> Expectations:
    status = raw.get("status")
    if status not in STATUSES:
        raise InvalidArgument(f"{where}.status must be one of {STATUSES}, got {status!r}")
    pairs = raw.get("ordered", [])
    return Expectations(
        status=status,
        required=_units(raw.get("required", []), f"{where}.required"),
        required_semantic=_units(raw.get("required_semantic", []), f"{where}.required"),
        relevant=_labels(raw.get("relevant"), f"{where}.relevant"),
        forbidden=_labels(raw.get("forbidden"), f"{where}.forbidden"),
        stale=_labels(raw.get("stale"), f"{where}.stale"),
        ordered=tuple((str(a), str(b)) for a, b in pairs),
        first=raw.get("first"),
        clarification_mentions=_labels(raw.get("clarification_mentions"), where),
        max_tokens=raw.get("max_tokens"),
        max_items=raw.get("max_items"),
        max_per_type=dict(raw.get("max_per_type", {})),
        dedup_groups=tuple(_labels(g, where) for g in raw.get("dedup_groups", [])),
        conflict=_conflict(raw.get("conflict"), f"{where}.conflict"),
        prompt_excludes=_labels(raw.get("prompt_excludes"), where),
        prompt_mentions=_labels(raw.get("prompt_mentions"), where),
    )


def _referenced(expect: Expectations) -> set[str]:
    refs = set(expect.relevant_labels) | set(expect.forbidden) | set(expect.stale)
    refs.update(label for pair in expect.ordered for label in pair)
    refs.update([expect.first] if expect.first else [])
    refs.update(expect.conflict.members if expect.conflict else ())
    return refs


def _case(raw: Mapping[str, Any], doc: Mapping[str, Any]) -> GoldenCase:
    where = f"case {raw.get('id')!r}"
    fixtures: Mapping[str, Any] = doc.get("fixtures", {})
    shared = fixtures[raw["fixture"]] if "fixture" in raw else {}
    request = _request(raw["request"], doc, f"{where}.request")
    mems = [*shared.get("memories", []), *raw.get("memories", [])]
    acts = [*shared.get("actions", []), *raw.get("actions", [])]
    case = GoldenCase(
        id=str(raw["id"]), description=str(raw["description"]),
        tags=tuple(raw.get("tags", [])),
        memories=tuple(_memory(m, request.context, f"{where}.memories") for m in mems),
        actions=tuple(_action(a, f"{where}.actions") for a in acts),
        request=request, expect=_expect(raw["expect"], f"{where}.expect"),
    )  # fmt: skip
    missing = _referenced(case.expect) - case.labels
    if missing:
        raise InvalidArgument(f"{where}: expectations name unknown labels {sorted(missing)}")
    return case


def load_cases(path: Path | str | None = None) -> list[GoldenCase]:
    """Parse and validate the golden cases (default: the bundled ``cases.json``).

    Raises:
        InvalidArgument: a case is malformed, reuses an id or names an unknown label.
    """
    doc = json.loads(Path(path or CASES_PATH).read_text(encoding="utf-8"))
    cases = [_case(raw, doc) for raw in doc["cases"]]
    ids = [case.id for case in cases]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise InvalidArgument(f"duplicate golden case ids: {duplicates}")
    return cases
