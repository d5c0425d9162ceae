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

from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import schemathesis
from fuzz_api_support import CHECKS, OTHER, Seeded, tenant_digest
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, multiple, rule

from engram import Engram

__all__ = ["DELETED", "IDENTITIES", "WHO", "Env", "MemoryRules", "Ref", "Who", "ndjson_bodies"]

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
NDJSON = "application/x-ndjson"
DELETED = object()  # a working item known to be gone
FOREIGN_OPS = tuple(f"{m} /v1/{p}" for m, p in (
    ("GET", "memories/{id}"), ("GET", "memories/{id}/history"), ("DELETE", "memories/{id}"),
    ("POST", "memories/{id}/correct"), ("POST", "memories/{id}/retract"),
    ("POST", "memories/{id}/expire"), ("POST", "memories/{id}/outcome"), ("GET", "traces/{id}"),
))  # fmt: skip


@dataclass(frozen=True)
class Who:
    """Who sends a request: one of the fuzzing keys and an identity of ``acme``."""

    key: str
    identity: tuple[tuple[str, str], ...]

    def ids(self) -> dict[str, str]:
        """The identity as request fields."""
        return dict(self.identity)

    @property
    def allowed(self) -> bool:
        """Whether the key may act for the identity (the limited key: ``u1`` as ``coder``)."""
        ids = self.ids()
        return self.key != "scoped" or (ids["user_id"], ids.get("agent_id")) == ("u1", "coder")


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


class MemoryRules(RuleBasedStateMachine):
    """The model's helpers and the rules of memories and traces; ``env`` is set on a
    subclass per test. ``fuzz_stateful_machine.RestMachine`` adds the other rules."""

    env: ClassVar[Env]
    memories = Bundle("memories")
    traces = Bundle("traces")
    foreign = Bundle("foreign")

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
        if not who.allowed and not rule_name.startswith("other"):  # refused before any lookup
            self.env.verdicts["refused to the limited key"] += 1
            assert response.status_code in (403, 422), (who, response.status_code)
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

    def teardown(self) -> None:
        """No step changed tenant ``globex``, and the audit chain verifies."""
        assert tenant_digest(self.env.mem, OTHER)[0] == self.env.digest, "globex changed"
        assert self.env.mem.audit_verify().ok
