"""The read side of ``EngramStore``: get, search (recall or listing), list namespaces.

Every read runs under the Engram ``Context`` of one user the store acts for, so
the scope predicate inside each storage query decides what is visible; the
namespace only narrows what is returned. A record that is not an item this
store wrote (an SDK memory, a tenant-wide one, a working item) is never shown.
An item past its TTL reads as expired everywhere and is never returned.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from langgraph.store.base import Item, ListNamespacesOp, MatchCondition, SearchOp

from engram.config import Budget
from engram.engram import Engram
from engram.errors import EngramError
from engram.recall.budget import MAX_BUDGET_ITEMS, MAX_BUDGET_TOKENS
from engram.scope import resolve
from engram.store.contract import KeyProbe
from engram.store.predicate import Visibility
from engram.surfaces.langgraph.items import Stored, item_of, matches_filter, stored
from engram.surfaces.langgraph.namespaces import Identity, engram_key, matches
from engram.types import Record, Status, as_seen

__all__ = ["Found", "Pair", "Reader"]

Pair = tuple[tuple[str, ...], str]  # (namespace, key): one item
_PAGE = 500  # records per listing page while a filtered search or a namespace list scans
_LIVE = (Status.ACTIVE.value,)
_EVERY = (Status.ACTIVE.value, Status.DISPUTED.value, Status.EXPIRED.value)


@dataclass(frozen=True, slots=True)
class Found:
    """One item read, with the record it came from (for a TTL refresh)."""

    item: Item
    record: Record
    held: Stored


class Reader:
    """Reads for one store: its Engram instance, identity and item type."""

    def __init__(self, memory: Engram, identity: Identity, type_name: str) -> None:
        self._memory = memory
        self._identity = identity
        self._type = type_name

    # -- by key ----------------------------------------------------------------

    def live(self, user_id: str, wanted: Sequence[Pair], now: datetime) -> dict[Pair, Record]:
        """The live record (active, not past its TTL) of each ``(namespace, key)``."""
        out: dict[Pair, Record] = {}
        for pair, versions in self.records(user_id, wanted, _LIVE).items():
            alive = [r for r in versions if as_seen(r, now).status == Status.ACTIVE]
            if alive:
                out[pair] = alive[0]
        return out

    def stored_versions(self, user_id: str, namespace: tuple[str, ...],
                        key: str) -> list[Record]:  # fmt: skip
        """Every stored head of the item's version chains (active, disputed or past
        its TTL): what a delete removes."""
        return self.records(user_id, [(namespace, key)], _EVERY).get((namespace, key), [])

    def records(self, user_id: str, wanted: Sequence[Pair],
                statuses: tuple[str, ...]) -> dict[Pair, list[Record]]:  # fmt: skip
        """The records of ``(namespace, key)`` pairs of one user in ``statuses``, in
        one key probe under the user's visibility."""
        if not wanted:
            return {}
        keys = {engram_key(ns, key): (ns, key) for ns, key in wanted}
        vis = Visibility.of(resolve(self._identity.context(user_id)))
        probe = KeyProbe(statuses, 4 * len(keys), tuple(sorted(keys)))
        answer = self._memory.store.candidates(vis, [probe])[0]
        if isinstance(answer, EngramError):
            raise answer
        out: dict[Pair, list[Record]] = {}
        for record, _ in answer:
            pair, held = keys.get(record.key or ""), stored(record)
            if pair is None or held is None or held.key != pair[1]:
                continue
            if self._identity.namespace(user_id, held.path) == pair[0]:
                out.setdefault(pair, []).append(record)
        return out

    def get(self, namespace: tuple[str, ...], record: Record | None) -> Found | None:
        """The item of a record found by key."""
        held = stored(record) if record is not None else None
        if record is None or held is None:
            return None
        return Found(item_of(namespace, held, record), record, held)

    # -- search ----------------------------------------------------------------

    def search(self, op: SearchOp, now: datetime) -> list[Found]:
        """A search: Engram recall when it has a query, else a filtered listing."""
        users = self._identity.users_for([MatchCondition("prefix", op.namespace_prefix)])
        if op.query:
            return self._recalled(op, users, now)
        return self._listed(op, users)

    def _recalled(self, op: SearchOp, users: Sequence[str], now: datetime) -> list[Found]:
        """Recall for each user, kept to the prefix and filter, best score first.

        Recall ranks every memory the user may see, so it is asked for twice the
        page (other memories, items of other namespaces and unindexed items take
        places that are then dropped)."""
        wanted = op.offset + op.limit
        budget = Budget(max_items=min(MAX_BUDGET_ITEMS, 2 * wanted + 10),
                        max_tokens=MAX_BUDGET_TOKENS, layout="compact")  # fmt: skip
        found: list[tuple[float, Found]] = []
        for user in users:
            result = self._memory.recall(self._identity.context(user), op.query or "",
                                         budget=budget, now=now)  # fmt: skip
            for chosen in result.items:
                hit = self._hit(user, chosen.record, op, chosen.score)
                if hit is not None and hit.held.indexed:
                    found.append((chosen.score, hit))
        found.sort(key=lambda pair: -pair[0])
        return [hit for _, hit in found[op.offset : wanted]]

    def _listed(self, op: SearchOp, users: Sequence[str]) -> list[Found]:
        """Newest first, every user's matching items merged by update time."""
        wanted = op.offset + op.limit
        found: list[Found] = []
        for user in users:
            mine = 0
            for record in self._walk(user):
                hit = self._hit(user, record, op, None)
                if hit is None:
                    continue
                found.append(hit)
                mine += 1
                if mine >= wanted:
                    break
        if len(users) > 1:
            found.sort(key=lambda hit: hit.record.updated_at, reverse=True)
        return found[op.offset : wanted]

    def _hit(self, user: str, record: Record, op: SearchOp, score: float | None) -> Found | None:
        held = stored(record)
        if held is None or record.user_id != user:
            return None
        namespace = self._identity.namespace(user, held.path)
        prefix = tuple(op.namespace_prefix)
        if namespace[: len(prefix)] != prefix or not matches_filter(held.value, op.filter):
            return None
        return Found(item_of(namespace, held, record, score, ranked=True), record, held)

    def _walk(self, user: str) -> Iterator[Record]:
        """Every live record of the store's type visible to ``user``, newest first."""
        ctx = self._identity.context(user)
        offset = 0
        while True:
            page = self._memory.list(ctx, type=self._type, status="active", limit=_PAGE,
                                     offset=offset)  # fmt: skip
            yield from page
            if len(page) < _PAGE:
                return
            offset += _PAGE

    # -- namespaces ------------------------------------------------------------

    def namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        """Distinct namespaces of live items, matched, cut to ``max_depth``, sorted."""
        conditions = tuple(op.match_conditions or ())
        seen: set[tuple[str, ...]] = set()
        for user in self._identity.users_for(conditions):
            for record in self._walk(user):
                held = stored(record)
                if held is not None and record.user_id == user:
                    seen.add(self._identity.namespace(user, held.path))
        kept = {ns for ns in seen if all(matches(c, ns) for c in conditions)}
        if op.max_depth is not None:
            kept = {ns[: op.max_depth] for ns in kept}
        return sorted(kept)[op.offset : op.offset + op.limit]
