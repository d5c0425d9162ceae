"""Stateful API fuzzing: a Hypothesis state machine whose rules call the REST app in
process (ASGI) with requests drawn from the OpenAPI schema's strategies
(schemathesis), and whose later calls use what earlier ones returned: a remembered
memory is read, its history listed, corrected, retracted, expired, scored and
forgotten by its returned id; a recall's trace is read by its returned trace id; a
working-memory item is set, read back and deleted; an export is imported again.

Why not schemathesis' own state machine: it infers no link from this schema (the ids
sit in nested bodies, ``record.id``, and every request names its identity), and an
OpenAPI link cannot carry the identity into a POST body (a link's ``requestBody``
replaces the whole body), so links written by hand would be wrong for half the
operations. The rules here pass ids and identities the way a client does.

Every answer passes schemathesis' checks (``fuzz_api_support.CHECKS``). A small
model says what some answers must be, from what this run was told, never from
reading the store: the identity that wrote a memory reads it back (200) until it is
forgotten; a forgotten memory, or one of tenant ``globex``, is never answered 200;
a recall's trace reads back under its recaller; a working item reads back with the
value set, and a delete removes exactly the live ones. An operation with a wide
effect (``sweep``, deleting a user, consolidation, any write of the ``other`` rule)
starts a new epoch: what was known before it is no longer asserted."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import schemathesis
from fuzz_api_support import CHECKS, OTHER, Seeded, sent_as_generated, tenant_digest
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, multiple, rule

from engram import Engram

__all__ = ["IDENTITIES", "Env", "RestMachine", "Who", "ndjson_bodies"]

IDENTITY = ("user_id", "agent_id", "session_id", "project_id", "repository_id", "task_id")
IDENTITIES: tuple[dict[str, str], ...] = (
    {"user_id": "u1", "agent_id": "coder", "session_id": "s1"},
    {"user_id": "u1", "agent_id": "coder", "session_id": "s2", "project_id": "p1",
     "task_id": "t1"},
    {"user_id": "u1"},
    {"user_id": "u2", "agent_id": "coder", "session_id": "s1"},
    {"user_id": "u1", "agent_id": "reviewer", "session_id": "s1"},
)  # fmt: skip
CONTENTS = ("Use Swift for iOS work.", "I prefer tabs.", "Deploys happen on Fridays.",
            "The build uses Bazel.", "Run the linter before committing.")  # fmt: skip
WORK_KEYS = ("step", "notes", "plan/next", "ключ", "a b")
NDJSON = "application/x-ndjson"
DELETED = object()  # a working item known to be gone
# Operations the ``other`` rule draws from: every one no dedicated rule drives.
DEDICATED = frozenset({
    "POST /v1/memories", "GET /v1/memories/{memory_id}", "GET /v1/memories/{memory_id}/history",
    "POST /v1/memories/{memory_id}/correct", "POST /v1/memories/{memory_id}/retract",
    "POST /v1/memories/{memory_id}/expire", "POST /v1/memories/{memory_id}/outcome",
    "DELETE /v1/memories/{memory_id}", "POST /v1/recall", "GET /v1/traces/{trace_id}",
    "PUT /v1/working/{key}", "GET /v1/working/{key}", "DELETE /v1/working/{key}",
    "DELETE /v1/working", "GET /v1/export", "POST /v1/import",
})  # fmt: skip
FOREIGN_OPS = tuple(f"{m} /v1/{p}" for m, p in (
    ("GET", "memories/{id}"), ("GET", "memories/{id}/history"), ("DELETE", "memories/{id}"),
    ("POST", "memories/{id}/correct"), ("POST", "memories/{id}/retract"),
    ("POST", "memories/{id}/expire"), ("POST", "memories/{id}/outcome"), ("GET", "traces/{id}"),
))  # fmt: skip
# Operations that may remove what the model knows: it asserts nothing older after one.
WIDE = frozenset({"POST /v1/sweep", "DELETE /v1/users/{user_id}", "POST /v1/consolidate"})


@dataclass(frozen=True)
class Who:
    """Who sends a request: one of the fuzzing keys and an identity of ``acme``."""

    key: str
    identity: tuple[tuple[str, str], ...]

    def ids(self) -> dict[str, str]:
        """The identity as request fields."""
        return dict(self.identity)


@dataclass(frozen=True)
class Ref:
    """Something a call returned: its id, who got it, and the epoch it belongs to
    (``foreign``: tenant ``globex``'s, never to be answered)."""

    id: str
    who: Who
    epoch: tuple[int, int]
    foreign: bool = False
    kind: str | None = None  # a working item's ``kind`` parameter


@dataclass
class Env:
    """The app under test, its store, the seeded data and what the run has learnt."""

    mem: Engram
    seeded: Seeded
    ops: Mapping[str, Any]  # "METHOD /path" -> schemathesis APIOperation
    digest: str  # of ``globex`` before the run
    epoch: int = 0  # bumped by an operation with a wide effect
    trace_epoch: int = 0  # bumped by a forget: queued traces may be gone
    gone: set[str] = field(default_factory=set)  # memory ids forgotten
    # (identity, kind parameter) -> the working scope a PUT answered (the key plays no part)
    scopes: dict[tuple[Any, str | None], tuple[str, ...]] = field(default_factory=dict)
    working: dict[tuple[tuple[str, ...], str], tuple[Any, int]] = field(default_factory=dict)
    statuses: Counter[str] = field(default_factory=Counter)
    verdicts: Counter[str] = field(default_factory=Counter)  # model assertions made
    steps: int = 0
    examples: int = 0

    def now(self) -> tuple[int, int]:
        """The current epochs."""
        return self.epoch, self.trace_epoch


def _who(key: str, identity: dict[str, str]) -> Who:
    return Who(key, tuple(sorted(identity.items())))


WHO = st.builds(_who, st.sampled_from(("admin", "user", "scoped")), st.sampled_from(IDENTITIES))


def _strip(container: Any) -> dict[str, Any]:
    """A generated body or query without its identity fields (a dict, else empty)."""
    if not isinstance(container, dict):
        return {}
    return {k: v for k, v in container.items() if k not in IDENTITY}


@contextmanager
def ndjson_bodies() -> Iterator[None]:
    """Let schemathesis send an export file (``application/x-ndjson``) as text, for
    the duration of a test (it has no serializer of its own for that type)."""
    from schemathesis.transport.asgi import ASGI_TRANSPORT
    from schemathesis.transport.requests import REQUESTS_TRANSPORT
    from schemathesis.transport.wsgi import WSGI_TRANSPORT

    schemathesis.serializer.alias(NDJSON, "text/plain")
    try:
        yield
    finally:
        for transport in (ASGI_TRANSPORT, REQUESTS_TRANSPORT, WSGI_TRANSPORT):
            transport.unregister_serializer(NDJSON)


class RestMachine(RuleBasedStateMachine):
    """The rules; ``env`` is set on a subclass per test (``machine_for``)."""

    env: ClassVar[Env]
    memories = Bundle("memories")
    traces = Bundle("traces")
    items = Bundle("items")
    foreign = Bundle("foreign")
    exports = Bundle("exports")

    def __init__(self) -> None:
        super().__init__()
        self.returned: list[str] = []  # memory and trace ids this sequence got back

    # -- sending -------------------------------------------------------------------

    def case(self, data: st.DataObject, label: str) -> Any:
        """A case of ``label`` drawn from the schema's strategy (positive mode)."""
        return data.draw(self.env.ops[label].as_strategy(), label=label)

    def send(self, case: Any, who: Who, rule_name: str) -> tuple[int, Any]:
        """Send ``case`` with ``who``'s key; check the answer against the schema;
        the status and the JSON body (None when not JSON)."""
        headers = {"Authorization": f"Bearer {self.env.seeded.keys[who.key]}"}
        response = case.call(headers=headers)
        self.env.statuses[f"{rule_name} {response.status_code}"] += 1
        self.env.steps += 1
        case.validate_response(response, checks=CHECKS)
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, None

    def as_query(self, case: Any, who: Who) -> None:
        case.query = {**_strip(case.query), **who.ids()}

    def as_body(self, case: Any, who: Who, **fields: Any) -> None:
        case.body = {**_strip(case.body), **who.ids(), **fields}

    def reader(self, data: st.DataObject, ref: Ref) -> tuple[Who, bool]:
        """Who reads ``ref``: its own caller half the time, else anyone."""
        mine = data.draw(st.booleans(), label="as the caller that got it")
        return (ref.who, True) if mine else (data.draw(WHO, label="who"), False)

    def must_find(self, ref: Ref, mine: bool, status: int) -> None:
        """The model's verdict on a call that names the memory ``ref``."""
        if ref.foreign or ref.id in self.env.gone:
            self.env.verdicts["foreign" if ref.foreign else "forgotten"] += 1
            assert status != 200, f"{ref.id} is {'globex' if ref.foreign else 'forgotten'}"
        elif mine and ref.epoch == self.env.now():
            self.env.verdicts["found by its caller"] += 1
            assert status == 200, f"the caller that wrote {ref.id} got {status}"

    # -- the data the run starts from ------------------------------------------------

    @initialize(target=foreign)
    def seeded_foreign(self) -> Any:
        """Tenant ``globex``'s seeded memories and trace: no call may answer them."""
        writer = _who("user", {"user_id": "u1", "agent_id": "coder", "session_id": "s1"})
        self.env.examples += 1
        return multiple(*(Ref(i, writer, (-1, -1), foreign=True)
                          for i in self.env.seeded.ids[4:]))  # fmt: skip

    @rule(ref=foreign, data=st.data(), op=st.sampled_from(FOREIGN_OPS))
    def poke(self, ref: Ref, data: st.DataObject, op: str) -> None:
        """A memory route, or the trace route, with an id of ``globex``: never a 200."""
        label = op.replace("{id}", "{trace_id}" if op.endswith("traces/{id}") else "{memory_id}")
        case = self.case(data, label)
        who = data.draw(WHO, label="who")
        case.path_parameters = {next(iter(case.path_parameters)): ref.id}
        if case.method.upper() in ("GET", "DELETE"):
            self.as_query(case, who)
        else:
            self.as_body(case, who)
        status, _ = self.send(case, who, "globex-id")
        self.must_find(ref, False, status)

    # -- memories --------------------------------------------------------------------

    @rule(target=memories, who=WHO, data=st.data())
    def remember(self, who: Who, data: st.DataObject) -> Any:
        """POST /v1/memories: a generated body, or a plain one, with ``who``'s identity."""
        case = self.case(data, "POST /v1/memories")
        if data.draw(st.booleans(), label="plain"):
            case.body = {"content": data.draw(st.sampled_from(CONTENTS), label="content")}
            for name, pool in (("type", ("fact", "preference", "procedure")),
                               ("key", ("ios.language", "editor"))):  # fmt: skip
                if data.draw(st.booleans(), label=name):
                    case.body[name] = data.draw(st.sampled_from(pool), label=name)
        self.as_body(case, who)
        status, body = self.send(case, who, "remember")
        if status == 200 and body["record"] is not None:
            self.returned.append(body["record"]["id"])
            return Ref(body["record"]["id"], who, self.env.now())
        return multiple()

    @rule(ref=memories, data=st.data(), history=st.booleans())
    def read(self, ref: Ref, data: st.DataObject, history: bool) -> None:
        """GET the memory, or its history, by the returned id."""
        label = "GET /v1/memories/{memory_id}" + ("/history" if history else "")
        case = self.case(data, label)
        who, mine = self.reader(data, ref)
        case.path_parameters = {"memory_id": ref.id}
        self.as_query(case, who)
        status, body = self.send(case, who, "history" if history else "get")
        self.must_find(ref, mine, status)
        if status == 200:
            found = [v["id"] for v in body["versions"]] if history else [body["id"]]
            assert ref.id in found, (ref.id, found)

    @rule(target=memories, ref=memories, data=st.data())
    def correct(self, ref: Ref, data: st.DataObject) -> Any:
        """POST .../correct: a new version, which later rules use in turn."""
        case = self.case(data, "POST /v1/memories/{memory_id}/correct")
        who, _ = self.reader(data, ref)
        case.path_parameters = {"memory_id": ref.id}
        self.as_body(case, who)
        status, body = self.send(case, who, "correct")
        self.must_find(ref, False, status)
        if status == 200 and body["record"] is not None:
            self.returned.append(body["record"]["id"])
            return Ref(body["record"]["id"], who, self.env.now())
        return multiple()

    @rule(ref=memories, data=st.data(),
          change=st.sampled_from(("retract", "expire", "outcome")))  # fmt: skip
    def change(self, ref: Ref, data: st.DataObject, change: str) -> None:
        """POST .../retract, .../expire or .../outcome on the returned id."""
        case = self.case(data, f"POST /v1/memories/{{memory_id}}/{change}")
        who, _ = self.reader(data, ref)
        case.path_parameters = {"memory_id": ref.id}
        self.as_body(case, who)
        status, _ = self.send(case, who, change)
        self.must_find(ref, False, status)

    @rule(ref=memories, data=st.data())
    def forget(self, ref: Ref, data: st.DataObject) -> None:
        """DELETE the memory: every id the receipt names is gone from then on."""
        case = self.case(data, "DELETE /v1/memories/{memory_id}")
        who, mine = self.reader(data, ref)
        case.path_parameters = {"memory_id": ref.id}
        self.as_query(case, who)
        status, body = self.send(case, who, "forget")
        self.must_find(ref, mine, status)
        if status == 200:
            assert ref.id in body["deleted"], body
            self.env.gone.update(body["deleted"], body["derived"])
            # Traces still queued in this process are dropped by any deletion in the
            # tenant, naming the erased ids or not (recall/usage.py: usage and traces
            # are best-effort), so from here a recaller may no longer find its trace.
            self.env.trace_epoch += 1

    # -- recall and traces -----------------------------------------------------------

    @rule(target=traces, who=WHO, data=st.data())
    def recall(self, who: Who, data: st.DataObject) -> Any:
        """POST /v1/recall: its trace id goes to ``traces``."""
        case = self.case(data, "POST /v1/recall")
        if data.draw(st.booleans(), label="plain"):
            case.body = {"query": data.draw(st.sampled_from(CONTENTS), label="query")}
        self.as_body(case, who)
        status, body = self.send(case, who, "recall")
        if status != 200:
            return multiple()
        self.returned.append(body["trace_id"])
        return Ref(body["trace_id"], who, self.env.now())

    @rule(ref=traces, data=st.data())
    def trace(self, ref: Ref, data: st.DataObject) -> None:
        """GET /v1/traces/{trace_id}: the recaller reads it back."""
        case = self.case(data, "GET /v1/traces/{trace_id}")
        who, mine = self.reader(data, ref)
        case.path_parameters = {"trace_id": ref.id}
        self.as_query(case, who)
        status, _ = self.send(case, who, "trace")
        self.must_find(ref, mine, status)

    # -- working memory --------------------------------------------------------------

    @rule(target=items, who=WHO, data=st.data())
    def put(self, who: Who, data: st.DataObject) -> Any:
        """PUT /v1/working/{key}; the answer names the scope the item went to."""
        case = self.case(data, "PUT /v1/working/{key}")
        if data.draw(st.booleans(), label="pooled key") or not sent_as_generated(case):
            case.path_parameters = {"key": data.draw(st.sampled_from(WORK_KEYS), label="key")}
        kind = data.draw(st.sampled_from((None, "session", "task")), label="kind")
        ttl = {} if data.draw(st.booleans(), label="default ttl") else {"ttl_seconds": 3600.0}
        value = case.body.get("value") if isinstance(case.body, dict) else None
        case.body = {"value": value, **ttl, **({} if kind is None else {"kind": kind})}
        self.as_body(case, who)
        status, body = self.send(case, who, "put")
        if status != 200:
            return multiple()
        scope = (who.ids()["user_id"], who.ids().get("agent_id", ""), body["kind"],
                 body["scope_id"])  # fmt: skip
        self.env.scopes[(who.identity, kind)] = scope
        key = case.path_parameters["key"]
        self.env.working[(scope, key)] = (json.loads(json.dumps(value)), self.env.epoch)
        return Ref(key, who, self.env.now(), kind=kind)

    def known_item(self, who: Who, ref: Ref) -> tuple[tuple[str, ...] | None, Any]:
        """The scope ``who`` reaches with ``ref``'s kind, and the model's value there
        (None: not known in this epoch)."""
        scope = self.env.scopes.get((who.identity, ref.kind))
        found = self.env.working.get((scope, ref.id)) if scope is not None else None
        if scope is None or found is None or found[1] != self.env.epoch:
            return scope, None
        return scope, found[0]

    @rule(ref=items, data=st.data(), delete=st.booleans())
    def item(self, ref: Ref, data: st.DataObject, delete: bool) -> None:
        """GET or DELETE /v1/working/{key}, by the key a PUT answered."""
        label = ("DELETE" if delete else "GET") + " /v1/working/{key}"
        case = self.case(data, label)
        who, _ = self.reader(data, ref)
        case.path_parameters = {"key": ref.id}
        case.query = {**who.ids(), **({} if ref.kind is None else {"kind": ref.kind})}
        status, body = self.send(case, who, "delete-item" if delete else "get-item")
        scope, value = self.known_item(who, ref)
        self.env.verdicts["working item known" if value is not None else "working unknown"] += 1
        if value is not None and status == 200:
            if delete:
                assert body["removed"] == (0 if value is DELETED else 1), (ref, body)
            elif value is DELETED:
                raise AssertionError(f"working item {ref.id!r} was deleted, yet read back")
            else:
                assert body["value"] == value, (ref, body, value)
        elif value is not None and value is not DELETED and not delete:
            assert status == 200, (ref, status)
        if delete and status == 200:
            self.forget_items(scope, ref.id)

    def forget_items(self, scope: tuple[str, ...] | None, key: str | None) -> None:
        """A delete (``key``) or a clear (None) went through in ``scope``: known gone
        there; in a scope the model cannot name, nothing it may have hit is known."""
        for where, name in list(self.env.working):
            if key is None or name == key:
                if scope is None:
                    del self.env.working[(where, name)]
                elif where == scope:
                    self.env.working[(where, name)] = (DELETED, self.env.epoch)

    @rule(ref=items, data=st.data())
    def clear(self, ref: Ref, data: st.DataObject) -> None:
        """DELETE /v1/working, the scope of an item a PUT answered (or another's):
        every known item of the scope is gone."""
        who, kind = self.reader(data, ref)[0], ref.kind
        query = {**who.ids(), **({"kind": kind} if kind else {})}
        case = self.env.ops["DELETE /v1/working"].Case(query=query)
        status, body = self.send(case, who, "clear")
        scope = self.env.scopes.get((who.identity, kind))
        if status != 200:
            return
        live = [k for (where, k), (value, epoch) in self.env.working.items()
                if where == scope and epoch == self.env.epoch and value is not DELETED]  # fmt: skip
        assert body["removed"] >= len(live), (live, body)
        self.forget_items(scope, None)

    # -- export and import -----------------------------------------------------------

    @rule(target=exports, who=WHO, jsonl=st.booleans())
    def export(self, who: Who, jsonl: bool) -> Any:
        """GET /v1/export, as JSON rows or as the export file."""
        query = {**who.ids(), **({"format": "jsonl"} if jsonl else {})}
        case = self.env.ops["GET /v1/export"].Case(query=query)
        headers = {"Authorization": f"Bearer {self.env.seeded.keys[who.key]}"}
        response = case.call(headers=headers)
        self.env.statuses[f"export {response.status_code}"] += 1
        self.env.steps += 1
        case.validate_response(response, checks=CHECKS)
        if response.status_code != 200:
            return multiple()
        kind = "jsonl" if jsonl else "json"
        return Ref(response.text if jsonl else json.dumps(response.json()), who, self.env.now(),
                   kind=kind)  # fmt: skip

    @rule(ref=exports, who=WHO, rehome=st.booleans())
    def import_(self, ref: Ref, who: Who, rehome: bool) -> None:
        """POST /v1/import of an earlier export, by its exporter or another identity."""
        op = self.env.ops["POST /v1/import"]
        if ref.kind == "jsonl":
            query = {**who.ids(), **({"rehome": True} if rehome else {})}
            case = op.Case(query=query, body=ref.id, media_type=NDJSON)
        else:
            body = {**who.ids(), "rows": json.loads(ref.id)["rows"]}
            case = op.Case(body=body, media_type="application/json")
        self.send(case, who, f"import-{ref.kind}")

    # -- everything else ---------------------------------------------------------------

    @rule(data=st.data(), who=WHO)
    def other(self, data: st.DataObject, who: Who) -> None:
        """Any other operation, generated, its ids steered to returned ones and, half
        the time, its identity to ``who``'s; a wide one (``WIDE``) starts an epoch."""
        label = data.draw(st.sampled_from(sorted(set(self.env.ops) - DEDICATED)), label="op")
        case = self.case(data, label)
        steer = data.draw(st.booleans(), label="steer")
        real = self.env.seeded.ids + self.returned
        memory_id, trace_id = (data.draw(st.sampled_from(real), label="id") for _ in "mt")
        for container in (case.path_parameters, case.query, case.body):
            if not isinstance(container, dict):
                continue
            for name, real_id in (("memory_id", memory_id), ("procedure_id", memory_id),
                                  ("trace_id", trace_id)):  # fmt: skip
                if name in container and steer:
                    container[name] = real_id
            if "ids" in container and steer:
                container["ids"] = [memory_id]
            if "user_id" in container and (steer or container is case.path_parameters):
                container["user_id"] = who.ids()["user_id"]
        if not sent_as_generated(case):
            return
        status, _ = self.send(case, who, f"other {label}")
        if status == 200 and label in WIDE:
            self.env.epoch += 1

    def teardown(self) -> None:
        """No step changed tenant ``globex``, and the audit chain verifies."""
        assert tenant_digest(self.env.mem, OTHER)[0] == self.env.digest, "globex changed"
        assert self.env.mem.audit_verify().ok
