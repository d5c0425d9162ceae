"""A workload that calls every method of ``contract.Store`` and ``contract.Maintenance``
on a ``PostgresStore``, for two tenants, so that every statement the store can send
is sent at least once (the statement check reads them).

``Recorder`` wraps the store and notes each attribute used, so a test can assert
that the workload still covers both protocols when they grow.
"""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engram.ids import new_id
from engram.scope import GLOBAL, USER
from engram.store import contract
from engram.store.audit import AuditEntry
from engram.store.predicate import OwnerSlot, Subject, Tenant, Visibility
from engram.store.traces import TraceRow
from engram.types import (
    Authority,
    Record,
    Retention,
    Sensitivity,
    ShareGrant,
    Source,
    SourceKind,
    Status,
    Tier,
)

__all__ = ["DIM", "MODEL", "Recorder", "make_record", "protocol_members", "run", "vector_for"]

MODEL = "hashing-384"
DIM = 384
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
ACTIVE = (Status.ACTIVE.value,)
T0_US = int(T0.timestamp() * 1_000_000)


def protocol_members(protocol: type) -> set[str]:
    """The public methods and properties a protocol declares."""
    return {name for name in vars(protocol) if not name.startswith("_")}


class Recorder:
    """The store, with every attribute looked up on it noted in ``used``."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.used: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.used.add(name)
        return getattr(self._store, name)


def vector_for(text: str) -> NDArray[np.float32]:
    """A deterministic unit vector for ``text`` (the embedder is faked in tests)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


def make_record(content: str, tenant: str, user: str | None = "u1", **fields: Any) -> Record:
    """A record of ``tenant`` with plausible values; ``fields`` override any of them."""
    at = fields.pop("at", T0)
    scope = fields.pop("scope", USER)
    base = Record(
        id=new_id(), tenant_id=tenant, user_id=None if scope == GLOBAL else user, agent_id=None,
        scope=scope, tier=Tier.SEMANTIC, type="fact", key=None, value=None, content=content,
        authority=Authority.EXPLICIT_USER, confidence=0.9, source=Source(), observed_at=at,
        valid_from=None, valid_to=None, created_at=at, updated_at=at, status=Status.ACTIVE,
        version=1, supersedes=None, superseded_by=None, sensitivity=Sensitivity.LOW,
        purpose=None, consent_basis=None, retention=Retention.LONG_TERM,
        expires_at=at + timedelta(days=30), importance=0.5, access_count=0,
        last_accessed_at=None, private=False, embedding_model=MODEL,
        content_hash=hashlib.sha256(content.lower().encode()).hexdigest(),
    )  # fmt: skip
    return dataclasses.replace(base, **fields)


def visibility(tenant: str, user: str = "u1") -> Visibility:
    """What user ``user`` of ``tenant`` may read, with no agent and no named scope."""
    return Visibility(tenant, user, "", (None, None, None, None))


def _writes(store: Any, tenant: str) -> dict[str, Record]:
    """One tenant's records: a keyed fact, a newer version of it, a derived copy, a
    tenant-wide record and a contested pair; with audit entries."""
    first = make_record(f"{tenant} user drinks green tea", tenant, key="drink")
    second = make_record(f"{tenant} user drinks black coffee", tenant, key="drink", version=2,
                         supersedes=first.id, at=T0 + timedelta(minutes=5))  # fmt: skip
    derived = make_record(f"{tenant} summary: a coffee drinker", tenant,
                          source=Source(derived_from=(second.id,)))  # fmt: skip
    shared = make_record(f"{tenant} office opens at nine", tenant, scope=GLOBAL)
    rival = make_record(f"{tenant} user drinks only water", tenant, key="drink",
                        status=Status.DISPUTED, contested_with=second.id)  # fmt: skip
    slot = OwnerSlot(tenant, "u1", "", USER)
    with store.transaction():
        assert store.in_transaction
        store.lock_slot(slot, "drink")
        store.candidates(
            visibility(tenant),
            [contract.SlotProbe(slot, ACTIVE, key="drink"),
             contract.SlotProbe(slot, ACTIVE, content_hash=first.content_hash)],
        )  # fmt: skip
        store.apply([contract.Insert(first, vector_for(first.content))])
        store.apply(
            [
                contract.Update(dataclasses.replace(first, status=Status.SUPERSEDED,
                                                    superseded_by=second.id)),
                contract.Insert(second, vector_for(second.content)),
                contract.Insert(derived, vector_for(derived.content)),
                contract.Insert(shared, None),
                contract.Insert(rival, vector_for(rival.content)),
                contract.Audit(AuditEntry(T0, tenant, "u1", "user", "remember",
                                          (first.id, second.id), "stated")),
                contract.Audit(AuditEntry(T0, tenant, None, "admin", "import", (), "bulk")),
            ]
        )  # fmt: skip
    placed = dataclasses.replace(shared, version=3, source=Source(kind=SourceKind.IMPORT))
    store.apply([contract.Place(placed)])
    return {"first": first, "second": second, "derived": derived, "shared": shared,
            "rival": rival}  # fmt: skip


def _reads(store: Any, tenant: str, made: dict[str, Record]) -> None:
    vis = visibility(tenant)
    ids = [r.id for r in made.values()]
    assert {r.tenant_id for r in store.read(vis, ids)} == {tenant}
    probes: list[contract.Probe] = [
        contract.KeyProbe(ACTIVE, 5, keys=("drink",)),
        contract.KeyProbe(ACTIVE, 5, types=("fact",)),
        contract.RecentProbe(ACTIVE, 5, types=("fact",)),
        contract.LexicalProbe("coffee tea", ACTIVE, 5),
        contract.VectorProbe(vector_for("coffee"), MODEL, ACTIVE, 3),
        contract.NeighbourProbe((made["second"],), ("fact",), ACTIVE, timedelta(hours=1), 2),
    ]
    for hits in store.candidates(vis, probes):
        assert not isinstance(hits, Exception), hits
        assert all(record.tenant_id == tenant for record, _ in hits)
    assert set(store.vectors(vis, ids, MODEL)) <= set(ids)
    assert [r.id for r in store.history(vis, made["second"].id)][:2] == [
        made["first"].id, made["second"].id,
    ]  # fmt: skip
    store.listing(vis, contract.Listing(statuses=ACTIVE, limit=10))
    store.listing(vis, contract.Listing(type_name="fact", at=T0 + timedelta(days=60)))
    store.apply([contract.Touch(vis, tuple(ids), T0 + timedelta(days=1))])


def _sharing(store: Any, tenant: str) -> None:
    """A grant, a share copy, the reads that find it, and the grant's removal."""
    owner = Tenant(tenant)
    store.apply([contract.PutGrants((ShareGrant(tenant, "coder", "reviewer", "fact", T0),))])
    assert [g.type for g in store.grants(owner)] == ["fact"]
    original = make_record(f"{tenant} deploys with make ship", tenant, agent_id="coder")
    copy = make_record(f"{tenant} deploys with make ship", tenant, agent_id="reviewer",
                       authority=Authority.SHARED,
                       source=Source(SourceKind.SHARE, f"share:{original.id}:coder",
                                     (original.id,)))  # fmt: skip
    store.apply([contract.Insert(original, None), contract.Insert(copy, None)])
    assert [r.id for r in store.copies(owner, contract.CopiesOf((original.id,)))] == [copy.id]
    assert [r.id for r in store.copies(owner, contract.CopiesTo("reviewer", ("fact",)))] == [
        copy.id
    ]
    store.apply([contract.DropGrants(owner, "coder", "reviewer", ("fact",))])
    assert store.grants(owner) == []


def _lifecycle(store: Any, tenant: str) -> None:
    """Procedure outcomes, consolidation marks, subject scans and the lease."""
    subject, vis = Subject(tenant, "u1"), visibility(tenant)
    procedure = make_record(f"{tenant} deploy with blue-green", tenant, tier=Tier.PROCEDURAL,
                            type="procedure")  # fmt: skip
    episode = make_record(f"{tenant} deployed and it worked", tenant, tier=Tier.EPISODIC,
                          type="episode")  # fmt: skip
    store.apply([contract.Insert(procedure, None), contract.Insert(episode, None)])
    store.apply([contract.Outcome(subject, procedure.id, True, 0.5, T0),
                 contract.Consolidated(subject, (episode.id,), T0)])  # fmt: skip
    assert store.outcomes(vis, [procedure.id])[procedure.id].successes == 1
    assert store.subject_users(Tenant(tenant)) == ["u1"]
    scan = contract.SubjectScan(("episode",), ACTIVE, T0 + timedelta(days=1), T0, 10,
                                (T0 - timedelta(days=1), ""), unconsolidated=True)  # fmt: skip
    assert store.subject_records(subject, scan) == []
    later = T0 + timedelta(minutes=5)
    assert store.take_lease(subject, "holder", T0, later).held
    store.end_lease(subject, "holder", T0)


def _maintenance(store: Any, tenant: str, made: dict[str, Record]) -> None:
    subject, owner = Subject(tenant, "u1"), Tenant(tenant)
    vis = visibility(tenant)
    store.put_traces([TraceRow(f"trace-{tenant}", tenant, "u1", vis.trace_key(),
                               frozenset({made["first"].id}), T0_US, "{}")], keep=10)  # fmt: skip
    assert store.get_trace(vis, f"trace-{tenant}") == "{}"
    assert store.audit_name(subject) is not None
    assert store.audit_entries(subject)
    ids = store.subject_ids(subject)
    assert made["derived"].id in store.derived_ids(owner, ids)
    assert made["second"].id in store.successors(owner, [made["first"].id])
    _erasure_reads(store, tenant, ids)
    strings = store.erasure_strings(owner, ids)
    store.delete_traces_naming(owner, ids)
    store.delete_traces(subject)
    store.apply([contract.UnlinkContests(owner, tuple(ids), T0 + timedelta(days=2)),
                 contract.Delete(owner, tuple(ids))])  # fmt: skip
    assert not any(store.residue(owner, ids).values())
    store.forget_counters(subject)  # as erase_subject: the run row goes with the counters
    assert store.subject_residue(subject) == 0
    store.forget_audit_subject(subject)
    assert store.counter_rows(subject) == 0
    store.forget_partition(subject)
    assert not store.holds_cached(tenant)
    store.scrub(strings)


def _erasure_reads(store: Any, tenant: str, ids: list[str]) -> None:
    """Tombstones, generations and the sweep's reads, for one tenant."""
    subject, owner = Subject(tenant, "u1"), Tenant(tenant)
    records = store.records_of(owner, ids)
    assert {r.id for r in records} == set(ids)
    hashes = (records[0].content_hash,)
    before = store.generation(owner)
    store.apply([contract.AddTombstones(owner, "u1", hashes, T0)])
    assert store.tombstoned(owner, "u1", hashes) == set(hashes)
    store.apply([contract.DropTombstones(owner, "u1", hashes)])
    store.apply([contract.AddTombstones(owner, "u1", hashes, T0),
                 contract.AnonymiseTombstones(subject)])  # fmt: skip
    assert store.tombstone_rows(owner, ["u1"]) == 0
    assert store.due(owner, T0 + timedelta(days=400), None, 10)  # past the touch renewal
    rule = contract.PruneRule(T0 + timedelta(days=1), 0.9, ("explicit_admin",), ACTIVE)
    assert store.prunable(owner, rule, "", 10)
    assert store.mark_swept(owner, T0) is None
    assert store.mark_swept(owner, T0 - timedelta(days=1)) == T0
    store.apply([contract.Delete(owner, ())])
    assert store.generation(owner) == before + 1


def _global(store: Any) -> None:
    """The administrative calls over the whole database (not per tenant)."""
    assert store.vector_model() == MODEL
    store.check_vector_model(MODEL)
    store.meta_set("workload", "ran")
    assert store.meta_get("workload") == "ran"
    assert store.verify_audit().ok
    assert set(store.tenants()) >= {"acme", "globex"}
    store.rebuild_lexical()
    kept = [record for batch in store.iter_all(2) for record in batch]
    store.reset_vectors()
    store.put_vectors(kept, np.stack([vector_for(r.content) for r in kept]))


def run(store: Any, tenants: tuple[str, str]) -> None:
    """Every contract call, for both tenants; the second tenant's rows are erased."""
    made = {tenant: _writes(store, tenant) for tenant in tenants}
    for tenant in tenants:
        _reads(store, tenant, made[tenant])
        _sharing(store, tenant)
        _lifecycle(store, tenant)
    _global(store)
    _maintenance(store, tenants[1], made[tenants[1]])
    store.close()
