"""The rest of the stateful API fuzzer's rules (``fuzz_stateful_support`` has the
model and the rules of memories and traces): working memory set, read back, deleted
and cleared by the keys and scopes PUT answered; exports imported again, as JSON
rows and as the export file; and every other operation, generated, its ids steered
to ones earlier calls returned."""

from __future__ import annotations

import json
from typing import Any

from fuzz_api_support import CHECKS, one_of, sent_as_generated
from fuzz_stateful_support import DELETED, NDJSON, WHO, MemoryRules, Ref, Who
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, multiple, rule

__all__ = ["RestMachine"]

WORK_KEYS = ("step", "notes", "plan/next", "ключ", "a b")
# Operations the ``other`` rule draws from: every one no dedicated rule drives.
DEDICATED = frozenset({
    "POST /v1/memories", "GET /v1/memories/{memory_id}", "GET /v1/memories/{memory_id}/history",
    "POST /v1/memories/{memory_id}/correct", "POST /v1/memories/{memory_id}/retract",
    "POST /v1/memories/{memory_id}/expire", "POST /v1/memories/{memory_id}/outcome",
    "DELETE /v1/memories/{memory_id}", "POST /v1/recall", "GET /v1/traces/{trace_id}",
    "PUT /v1/working/{key}", "GET /v1/working/{key}", "DELETE /v1/working/{key}",
    "DELETE /v1/working", "GET /v1/export", "POST /v1/import",
})  # fmt: skip
# Operations that may remove what the model knows: it asserts nothing older after one.
WIDE = frozenset({"POST /v1/sweep", "DELETE /v1/users/{user_id}", "POST /v1/consolidate"})


class RestMachine(MemoryRules):
    """Every rule; ``env`` is set on a subclass per test."""

    items = Bundle("items")
    exports = Bundle("exports")

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
        elif value is not None and value is not DELETED and not delete and who.allowed:
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
        memory_id, trace_id = (data.draw(one_of(real), label="id") for _ in "mt")
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
