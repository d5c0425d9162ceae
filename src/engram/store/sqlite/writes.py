"""The SQLite store's changes: ``Store.apply`` and ``Store.lock_slot``.

Changes run in order on the writer connection, inside the caller's open
transaction (atomic with it) or in one of their own. Triggers keep the derived
state in step: the vectors of deleted records, the partition counters the
in-memory engines refresh from, and the ids of forgotten records. A ``Delete``
also bumps its tenant's cache generation (``statements_lifecycle.bump``), and
tombstone changes turn content hashes into keyed digests here, with the tenant's
key (``store.tombstones``), so the key never leaves the store.

Write invariants. "At most one active version per (owner, scope, key)" and the
audit hash chain need writers serialised per slot and per chain. SQLite admits
one writer at a time (``BEGIN IMMEDIATE`` takes the database's write lock), so
``lock_slot`` has nothing to add, and an audit append reads the chain's last
hash inside that same lock.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from engram.errors import IndexMismatch, InvalidArgument, StoreError
from engram.store import tombstones
from engram.store.accesses import coalesce
from engram.store.audit import GENESIS, AuditEntry, entry_hash
from engram.store.contract import (
    AddTombstones,
    AnonymiseTombstones,
    Applied,
    Audit,
    Change,
    Consolidated,
    Delete,
    DropGrants,
    DropTombstones,
    Insert,
    Outcome,
    Place,
    PutGrants,
    Reconsolidate,
    Touch,
    UnlinkContests,
    Update,
)
from engram.store.predicate import Owners, OwnerSlot, Subject, Tenant
from engram.store.pseudonyms import pseudonym, pseudonymised
from engram.store.rows import record_to_row, to_micros
from engram.store.sqlite import statements_admin as admin
from engram.store.sqlite import statements_lifecycle as lifecycle
from engram.store.sqlite import statements_write as sql
from engram.store.sqlite.shares import Shares
from engram.types import Record

__all__ = ["Writes"]

_VECTOR_MODEL_KEY = "vector_model"


class Writes(Shares):
    """``apply`` and ``lock_slot`` on SQLite."""

    def lock_slot(self, slot: OwnerSlot, key: str) -> None:
        """A no-op: ``BEGIN IMMEDIATE`` already serialises every writer (module notes)."""
        if not self._in_own_transaction():
            raise InvalidArgument("lock_slot is called inside the write's transaction")

    def apply(self, changes: Sequence[Change]) -> Applied:
        """Apply ``changes`` in order, atomically: in a transaction of their own, or in
        a savepoint of the open one, so a failing change leaves none of them."""
        with self.transaction():
            return self._apply_all(changes)

    def _apply_all(self, changes: Sequence[Change]) -> Applied:
        done = Applied()
        touches: list[Touch] = []
        for change in changes:
            if isinstance(change, Touch):
                touches.append(change)  # consecutive touches run as one prepared batch
                continue
            self._touch(touches)
            touches = []
            self._apply_one(change, done)
        self._touch(touches)
        return done

    def _apply_one(self, change: Change, done: Applied) -> None:
        if isinstance(change, Insert):
            self._insert(change.record, change.vector)
        elif isinstance(change, Update):
            self._write_fields(sql.UPDATE, sql.MUTABLE, change.record)
        elif isinstance(change, Place):
            self._write_fields(sql.PLACE, sql.PLACEMENT, change.record)
        elif isinstance(change, Delete):
            done.deleted += self._run(*sql.delete(change.tenant, change.ids)).rowcount \
                if change.ids else 0  # fmt: skip
            self._run(*lifecycle.bump(change.tenant))
        elif isinstance(change, (AddTombstones, DropTombstones, AnonymiseTombstones)):
            self._tombstones(change, done)
        elif isinstance(change, UnlinkContests):
            query = sql.unlink_contests(change.tenant, change.ids, to_micros(change.at) or 0)
            done.unlinked += self._run(*query).rowcount if change.ids else 0
        elif isinstance(change, Audit):
            done.audit_ids.append(self._append_audit(change.entry))
        elif isinstance(change, PutGrants):
            done.granted += self._put_grants(change)
        elif isinstance(change, DropGrants):
            done.revoked += self._drop_grants(change)
        elif isinstance(change, Outcome):
            self._run(*lifecycle.outcome(change.subject, change.procedure_id, change.success,
                                         change.reward, to_micros(change.at) or 0))  # fmt: skip
        elif isinstance(change, Consolidated):
            if change.episode_ids:
                self._run(*lifecycle.mark_consolidated(change.subject, change.episode_ids,
                                                       to_micros(change.at) or 0))  # fmt: skip
        elif isinstance(change, Reconsolidate):
            if change.summary_ids:
                self._run(*lifecycle.reconsolidate(change.tenant, change.summary_ids,
                                                   change.summary_type))  # fmt: skip
        else:
            raise InvalidArgument(f"unknown change {type(change).__name__}")

    def _tombstones(
        self, change: AddTombstones | DropTombstones | AnonymiseTombstones, done: Applied
    ) -> None:
        if isinstance(change, AnonymiseTombstones):
            for query in lifecycle.anonymise_tombstones(change.subject):
                self._run(*query)
            return
        digests = self._digests(change.tenant, change.owner, change.hashes,
                                create=isinstance(change, AddTombstones))  # fmt: skip
        if not digests:
            return
        if isinstance(change, AddTombstones):
            row_owner = tombstones.ERASED if change.erased else change.owner
            at = to_micros(change.at)
            query = lifecycle.add_tombstones(change.tenant, row_owner, digests, at)
            done.buried += self._run(*query).rowcount
        else:
            owners = Owners(change.tenant.tenant_id, (change.owner, tombstones.ERASED))
            done.lifted += self._run(*lifecycle.drop_tombstones(owners, digests)).rowcount

    def _digests(
        self, tenant: Tenant, owner: str, hashes: Sequence[str], create: bool
    ) -> list[str]:
        """The owner's tombstone digests of content ``hashes`` under the tenant's key
        (made first when ``create``); none when the tenant has no key (nothing is
        buried)."""
        if not hashes:
            return []
        if create:
            key = secrets.token_bytes(tombstones.KEY_BYTES)
            self._run(*lifecycle.new_tombstone_key(tenant, key))
        rows = self._rows(lifecycle.tombstone_key(tenant))
        if not rows:
            return []
        key = bytes(rows[0][0])
        return [tombstones.digest(key, owner, value) for value in dict.fromkeys(hashes)]

    def _insert(self, record: Record, vector: NDArray[np.float32] | None) -> None:
        """Insert a new record and, when given, its vector under the store's model."""
        self._run(sql.INSERT, record_to_row(record))
        if vector is not None and record.embedding_model is not None:
            self._put_vector(record, vector)

    def _put_vector(self, record: Record, vector: NDArray[np.float32]) -> None:
        assert record.embedding_model is not None
        self.claim_vector_model(record.embedding_model)
        row = record_to_row(record)
        self._run(sql.PUT_VECTOR, {
            "id": record.id, "tenant": row["tenant_id"], "user": row["user_id"],
            "model": record.embedding_model,
            "vector": np.ascontiguousarray(vector, dtype=np.float32).tobytes(),
        })  # fmt: skip

    def _write_fields(self, statement: str, columns: Sequence[str], record: Record) -> None:
        """Write some fields of an existing record (its mutable ones, or its placement
        in history, which only an import changes)."""
        row = record_to_row(record)
        params = {column: row[column] for column in (*columns, "id")}
        params["ten_tenant"] = row["tenant_id"]
        if self._run(statement, params).rowcount != 1:
            raise StoreError(f"no record {record.id!r} in tenant {record.tenant_id!r} to update")

    def _touch(self, touches: Sequence[Touch]) -> None:
        """The accesses of a run of touches: one statement per visibility
        (``store.accesses``; on SQLite before 3.35 one prepared statement run for
        each record), so a flush of a second's recalls holds the GIL briefly."""
        for accesses in coalesce(touches):
            rows = list(zip(accesses.ids, accesses.counts, accesses.ats, strict=True))
            if sql.ACCESSES_IN_ONE:
                text, params = sql.touch(accesses.vis)
                self._run(text, {**params, "accesses": json.dumps(rows)})
                continue
            text, params = sql.touch_one(accesses.vis)
            self._run_many(text, [{**params, "id": record_id, "n": n, "at": at}
                                  for record_id, n, at in rows])  # fmt: skip

    # -- vector model, meta, audit (write side) ------------------------------------

    def claim_vector_model(self, model: str) -> None:
        """Record ``model`` as the vectors' model; refuse to mix with another."""
        current = self.vector_model()
        if current is None:
            self.meta_set(_VECTOR_MODEL_KEY, model)
        elif current != model:
            raise IndexMismatch.between(current, model)

    def meta_set(self, key: str, value: str) -> None:
        """Set a value in the meta table."""
        self._run(admin.META_SET, {"key": key, "value": value})

    def _audit_key(self, subject: Subject, create: bool) -> bytes | None:
        """The subject's pseudonym key (``store.pseudonyms``), made on first use."""
        if create:
            self._run(*admin.new_audit_key(subject, secrets.token_bytes(32)))
        rows = self._rows(admin.audit_key(subject))
        return bytes(rows[0][0]) if rows else None

    def _append_audit(self, entry: AuditEntry) -> str:
        """Chain and append one audit entry, its user named by pseudonym; its hash.
        The chain's last hash is read under the write lock the transaction holds."""
        if entry.user_id:  # every user id, even one shaped like a pseudonym
            key = self._audit_key(Subject(entry.tenant_id, entry.user_id), create=True)
            assert key is not None
            entry = pseudonymised(entry, pseudonym(key, entry.tenant_id, entry.user_id))
        rows = self._rows((admin.AUDIT_LAST, {}))
        prev = rows[0][0] if rows else GENESIS
        digest = entry_hash(prev, entry)
        self._run(admin.AUDIT_INSERT, {
            "at": to_micros(entry.at), "tenant": entry.tenant_id, "user": entry.user_id or "",
            "actor": entry.actor, "op": entry.operation,
            "ids": json.dumps(list(entry.record_ids)), "reason": entry.reason,
            "prev": prev, "hash": digest,
        })  # fmt: skip
        return digest
