"""Random reads from random identities over a ``World``, checked against its oracle.

A surface (``SdkSurface``: the Python SDK; ``RestSurface``: the REST API through an
httpx client, one key per tenant) answers six calls — get, list, history, recall,
export, trace — as an ``Answer``: ``ok`` with the JSON of what came back,
``missing`` (NotFound / 404) or ``refused`` (InvalidArgument, IncompleteIdentity /
422). ``run_calls`` draws calls and judges each:

* no answer names a record the caller may not see (``Oracle.foreign``), anywhere
  in it (records, prompt, trace);
* ``list`` and ``export`` return exactly the visible records (export: the caller's
  own, not the tenant-wide ones): nothing more, nothing less;
* ``get`` and ``history`` find an id exactly when it is visible;
* a trace reads back only under the identity that recalled it;
* an identity the validators refuse is refused, never answered.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fuzz_support import QUERIES, Caller, World, accepted, candidate_ids, random_caller

from engram import Engram
from engram.errors import IncompleteIdentity, InvalidArgument, NotFound

__all__ = [
    "OPS", "Answer", "AsgiClient", "Report", "RestSurface", "SdkSurface", "Surface", "run_calls",
]  # fmt: skip

OPS = ("get", "list", "history", "recall", "export", "trace")


@dataclass(frozen=True, slots=True)
class Answer:
    """What a surface answered: ``ok`` / ``missing`` / ``refused`` and the JSON body."""

    kind: str
    body: Any = None


class Surface(Protocol):
    """One way in (SDK or REST)."""

    def call(self, op: str, caller: Caller, arg: str | None) -> Answer:
        """Run ``op`` for ``caller``; ``arg`` is the id, query or trace id it takes."""
        ...


def _sdk_answer(run: Callable[[], Any]) -> Answer:
    try:
        return Answer("ok", run())
    except NotFound:
        return Answer("missing")
    except (InvalidArgument, IncompleteIdentity) as exc:
        return Answer("refused", str(exc))


@dataclass
class SdkSurface:
    """The Python SDK."""

    mem: Engram

    def call(self, op: str, caller: Caller, arg: str | None) -> Answer:
        ctx, mem = caller.context(), self.mem
        runs: dict[str, Callable[[], Any]] = {
            "get": lambda: mem.get(ctx, str(arg)).to_dict(),
            "list": lambda: [r.to_dict() for r in mem.list(ctx, limit=1000)],
            "history": lambda: [r.to_dict() for r in mem.history(ctx, str(arg))],
            "recall": lambda: _recall_json(mem, ctx, str(arg)),
            "export": lambda: mem.export(ctx),
            "trace": lambda: mem.trace(ctx, str(arg)),
        }
        return _sdk_answer(runs[op])


def _recall_json(mem: Engram, ctx: Any, query: str) -> dict[str, Any]:
    result = mem.recall(ctx, query)
    return {"ids": result.ids, "prompt": result.prompt, "trace_id": result.trace.trace_id,
            "trace": result.trace.to_dict(),
            "conflicts": [list(c.record_ids) for c in result.conflicts]}  # fmt: skip


class AsgiClient:
    """A synchronous face on ``httpx.AsyncClient`` over the app's ASGI interface, in
    process (no socket, no lifespan: the REST routes need none). About 5 ms less
    per request than Starlette's ``TestClient`` here, which matters at 100K calls."""

    def __init__(self, app: Any) -> None:
        import httpx

        self.loop = asyncio.new_event_loop()
        transport = httpx.ASGITransport(app=app)
        self.client = httpx.AsyncClient(transport=transport, base_url="http://engram.test")

    def get(self, path: str, **kwargs: Any) -> Any:
        """``GET path``."""
        return self.loop.run_until_complete(self.client.get(path, **kwargs))

    def post(self, path: str, **kwargs: Any) -> Any:
        """``POST path``."""
        return self.loop.run_until_complete(self.client.post(path, **kwargs))

    def put(self, path: str, **kwargs: Any) -> Any:
        """``PUT path``."""
        return self.loop.run_until_complete(self.client.put(path, **kwargs))

    def close(self) -> None:
        """Close the client and its loop."""
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()


@dataclass
class RestSurface:
    """The REST API through ``client`` (httpx or a ``TestClient``); ``keys``: a key of
    each tenant, which decides the tenant of every request."""

    client: Any
    keys: dict[str, str]

    def call(self, op: str, caller: Caller, arg: str | None) -> Answer:
        ident = {"user_id": caller.user, "agent_id": caller.agent, "project_id": caller.project}
        ident = {k: v for k, v in ident.items() if v is not None}
        headers = {"Authorization": f"Bearer {self.keys[caller.tenant]}"}
        if op == "recall":
            response = self.client.post("/v1/recall", json={**ident, "query": arg},
                                        headers=headers)  # fmt: skip
        else:
            path = {"get": f"/v1/memories/{arg}", "list": "/v1/memories",
                    "history": f"/v1/memories/{arg}/history", "export": "/v1/export",
                    "trace": f"/v1/traces/{arg}"}[op]  # fmt: skip
            params = {**ident, "limit": 1000} if op == "list" else ident
            response = self.client.get(path, params=params, headers=headers)
        return _rest_answer(op, response)


def _rest_answer(op: str, response: Any) -> Answer:
    status = response.status_code
    if status == 404:
        return Answer("missing", response.json())
    if status == 422:
        return Answer("refused", response.json())
    if status != 200:
        return Answer(f"http-{status}", response.text)
    body = response.json()
    if op == "list":
        return Answer("ok", body["items"])
    if op == "history":
        return Answer("ok", body["versions"])
    if op == "export":
        return Answer("ok", body["rows"])
    if op == "recall":
        ids = [item["record"]["id"] for item in body["items"]]
        return Answer("ok", {**body, "ids": ids})
    return Answer("ok", body)


@dataclass
class Report:
    """What a run did: calls by op and answer, the failures, the time it took."""

    calls: dict[str, int] = field(default_factory=dict)
    foreign: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, op: str, kind: str) -> None:
        """Count one call."""
        name = f"{op}:{kind}"
        self.calls[name] = self.calls.get(name, 0) + 1

    @property
    def total(self) -> int:
        """Calls made."""
        return sum(self.calls.values())


def _ids(rows: Any) -> set[str]:
    return {row["id"] for row in rows}


def _judge(world: World, op: str, caller: Caller, arg: str | None, answer: Answer,
           traces: dict[str, Caller]) -> str | None:  # fmt: skip
    """Why ``answer`` is wrong (None: it is right)."""
    oracle = world.oracle
    leaked = oracle.foreign(caller, answer.body, arg if op != "recall" else None)
    if leaked:
        return f"FOREIGN {[r.id for r in leaked]} in {op}"
    if accepted(caller) is not None:
        return None if answer.kind == "refused" else f"not refused: {answer.kind}"
    if answer.kind not in ("ok", "missing"):
        return f"unexpected {answer.kind}: {answer.body!r:.300}"
    visible = oracle.visible(caller)
    if op in ("get", "history"):
        expect = "ok" if arg in visible else "missing"
        if answer.kind != expect:
            return f"{op} of {arg}: {answer.kind}, expected {expect}"
        if expect == "ok" and arg not in _ids([answer.body] if op == "get" else answer.body):
            return f"{op} of {arg} answered other ids"
    elif op == "list" and _ids(answer.body) != visible:
        return f"list: {sorted(_ids(answer.body) ^ visible)} differ from the oracle"
    elif op == "export":
        own = {i for i in visible if oracle.records[i].scope != "global"}
        if _ids(answer.body) != own:
            return f"export: {sorted(_ids(answer.body) ^ own)} differ from the oracle"
    elif op == "recall":
        traces[answer.body["trace_id"]] = caller
    elif op == "trace" and arg is not None:
        recaller = traces.get(arg)
        expect = "ok" if recaller is not None and recaller.same_view(caller) else "missing"
        if answer.kind != expect:
            return f"trace by {traces.get(arg)} read by another: {answer.kind}"
    return None


def _arg(rng: random.Random, world: World, op: str, caller: Caller,
         traces: dict[str, Caller]) -> str | None:  # fmt: skip
    if op in ("get", "history"):
        return candidate_ids(rng, world, caller, sorted(world.oracle.visible(caller)))
    if op == "recall":
        return rng.choice(QUERIES)
    if op == "trace":
        if traces and rng.random() < 0.9:
            return rng.choice(list(traces))
        return "01J0000000000000000000FAKE"
    return None


def run_calls(surface: Surface, world: World, calls: int, seed: int) -> Report:
    """``calls`` random calls from random identities, each judged; at most the first
    50 failures are kept (every foreign record is counted)."""
    rng = random.Random(seed)
    report, traces = Report(), {}
    started = time.perf_counter()
    for _ in range(calls):
        op = rng.choice(OPS) if traces else "recall"
        caller = random_caller(rng, world)
        arg = _arg(rng, world, op, caller, traces)
        if op == "trace" and arg in traces and rng.random() < 0.5:
            caller = traces[arg]  # the recaller itself reads its trace back
        try:
            answer = surface.call(op, caller, arg)
        except Exception as exc:  # a crash is a failure to report, not to stop on
            answer = Answer(f"raised-{type(exc).__name__}", str(exc))
        report.count(op, answer.kind)
        why = _judge(world, op, caller, arg, answer, traces)
        if why is not None:
            report.foreign += why.startswith("FOREIGN")
            if len(report.failures) < 50:
                report.failures.append(f"{op} by {caller!r} ({arg!r}): {why}")
    report.seconds = time.perf_counter() - started
    return report
