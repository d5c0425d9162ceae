"""Export and import of a caller's memories with their full history.

Export yields plain JSON-friendly rows (every status, version links intact).

Import passes the write path. Every row is validated as ``remember`` validates
its arguments (``import_rows.parse_row``: ownership from the importing context,
authority capped by provenance, ``explicit_admin`` refused) and meets the same
write policy; a row the policy REJECTs (a secret, personal data without a
consent basis) is a bad row, and a bad row rejects the whole import, naming
its number, with nothing written, and so does a set of ``supersedes`` links that
loops or forks (``import_rows.check_links``). The policy and the embedder then
run with no lock held (every row is embedded, the rows later skipped too), and,
in ONE transaction, which also reads which rows are already stored (so two
racing imports of one export store it once):

* an ``active`` row goes through ``WritePath.write`` for its owner slot, so the
  slot's current value decides ADD / CONFIRM / SUPERSEDE / DISPUTE / CONTEST
  (instruction-like text from a document is quarantined as disputed, a second
  active value for a key is never created outside a contested pair); when the
  write path ADDs it, the new version takes the row's place in its imported
  chain (version, supersedes, created_at; expires_at never later than the
  row's), written in place by ``Store.place``;
* a history row (superseded, retracted, expired) and a disputed row are kept
  as they were, never active, with their links remapped to the new ids;
* a global row is skipped (only an admin writes tenant-wide records).

Idempotent: a row identical to a version already in its slot (same content,
key and value, any status, for an active row; same content, key, status and
version for the others) is SKIPPED and maps to that version, so importing the
same export twice changes nothing, and re-importing never revives a memory the
user has since superseded or retracted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engram.config import Config
from engram.embed import Embedder
from engram.errors import InvalidArgument
from engram.ids import new_id
from engram.lifecycle.import_rows import (
    HISTORY,
    ImportRow,
    check_links,
    history_record,
    parse_row,
    remap_source,
)
from engram.scope import GLOBAL, Scope
from engram.store.audit import AuditEntry
from engram.store.contract import Audit, Insert, Place, SlotProbe
from engram.store.open import Backend
from engram.store.predicate import OwnerSlot, Tenant
from engram.types import Operation, Record, Status, WriteResult
from engram.write import policy, tombstones
from engram.write.commit import Owner
from engram.write.index import embed_contents, vectors_enabled
from engram.write.path import Prepared, WritePath
from engram.write.policy import VerdictKind
from engram.write.slots import slot_versions

__all__ = ["ImportReport", "RowOutcome", "export_rows", "import_rows"]

HISTORY_OP = "HISTORY"
SKIPPED = "SKIPPED"
_ANY_STATUS = tuple(s.value for s in Status if s != Status.DELETED)


@dataclass(frozen=True, slots=True)
class RowOutcome:
    """What happened to one row: a write-path operation (ADD, CONFIRM, SUPERSEDE,
    DISPUTE, CONTEST), HISTORY (kept as an inactive version) or SKIPPED, and why."""

    index: int
    operation: str
    record_id: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class ImportReport:
    """How many rows were written, which were skipped with why, the id each original id
    now has, and every row's outcome in row order."""

    imported: int
    skipped: tuple[tuple[int, str], ...]
    id_map: Mapping[str, str]
    rows: tuple[RowOutcome, ...] = ()


def export_rows(records: Iterable[Record]) -> list[dict[str, Any]]:
    """JSON-friendly rows of every given record."""
    return [record.to_dict() for record in records]


@dataclass
class _Run:
    """The state of one import: outcomes and ids so far."""

    scope: Scope
    now: datetime
    outcomes: dict[int, RowOutcome]
    ids: dict[str, str]

    def done(self, row: ImportRow, operation: str, record_id: str | None, reason: str) -> None:
        self.outcomes[row.index] = RowOutcome(row.index, operation, record_id, reason)
        if row.original_id is not None and record_id is not None:
            self.ids.setdefault(row.original_id, record_id)

    def owner(self, row: ImportRow) -> Owner:
        agent = self.scope.agent_id if row.bound_to_agent and self.scope.agent_id else None
        actor = (
            f"agent:{self.scope.agent_id}" if self.scope.agent_id else f"user:{self.scope.user_id}"
        )
        return Owner(self.scope.tenant_id, self.scope.user_id, agent, row.scope, actor)


def _parse_all(config: Config, scope: Scope, rows: Sequence[object], run: _Run) -> list[ImportRow]:
    """Every non-global row validated and passed by the policy; the first bad one raises."""
    parsed: list[ImportRow] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(rows):
        if isinstance(raw, Mapping) and raw.get("scope") == GLOBAL:
            reason = "global records belong to the tenant; an admin imports them"
            run.outcomes[index] = RowOutcome(index, SKIPPED, None, reason)
            continue
        row = parse_row(config, scope, index, raw)
        if row.original_id is not None and seen.setdefault(row.original_id, index) != index:
            raise InvalidArgument(f"import row {index}: id repeats row {seen[row.original_id]}")
        verdict = policy.evaluate(row.proposal, config.write)
        if verdict.kind == VerdictKind.REJECT:
            raise InvalidArgument(f"import row {index}: the write policy rejects it: "
                                  f"{verdict.reason}")  # fmt: skip
        parsed.append(row.with_sensitivity(verdict.sensitivity))
    check_links(parsed)
    return parsed


def _slot(owner: Owner) -> OwnerSlot:
    return OwnerSlot.of(owner.tenant_id, owner.user_id, owner.agent_id, owner.scope)


def _existing(store: Backend, run: _Run, row: ImportRow) -> Record | None:
    """The version already in the row's slot that makes the row a duplicate, if any."""
    slot = _slot(run.owner(row))
    p = row.proposal
    if row.status not in HISTORY:
        same = slot_versions(store, [SlotProbe(slot, _ANY_STATUS, content_hash=row.digest)])[0]
        return next((r for r in same if (r.key, r.value) == (p.key, p.value)), None)
    probe = SlotProbe(slot, (row.status.value,), content_hash=row.digest)
    same = slot_versions(store, [probe])[0]
    return next((r for r in same if (r.key, r.version) == (p.key, row.version)), None)


def import_rows(
    store: Backend, embedder: Embedder, config: Config, scope: Scope,
    rows: Sequence[Mapping[str, Any]], now: datetime,
) -> ImportReport:  # fmt: skip
    """Validate every row and embed them with no lock held, then, in one transaction,
    skip the rows already stored and write the others (see the module)."""
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence):
        raise InvalidArgument("rows must be a list of mappings (as returned by export)")
    run = _Run(scope, now, {}, {})
    parsed = _parse_all(config, scope, rows, run)
    writer = WritePath(store, embedder, config)
    current = _prepare_current(writer, run, [r for r in parsed if r.status not in HISTORY])
    history = [row for row in parsed if row.status in HISTORY]
    vectors = _history_vectors(store, embedder, history)
    with store.transaction():
        added = _write_current(store, writer, run, current)
        inserted = _insert_history(store, config, run, history, vectors)
        relinked = _relink(store, run, added)
        store.apply([Audit(AuditEntry(now, scope.tenant_id, scope.user_id,
                                      run.owner(parsed[0]).actor if parsed else "import",
                                      "IMPORT", [*inserted, *relinked], "import"))])  # fmt: skip
    return _report(run)


def _unknown(store: Backend, run: _Run, rows: Sequence[ImportRow]) -> list[int]:
    """Positions of the rows not yet stored (inside the transaction); the others are
    SKIPPED, mapped to the version that makes them duplicates, or because their
    content was forgotten or erased since (``write.tombstones``: no record id)."""
    owner = tombstones.owner_of(run.scope.user_id)
    buried = store.tombstoned(Tenant(run.scope.tenant_id), owner, [r.digest for r in rows])
    fresh = []
    for position, row in enumerate(rows):
        if row.digest in buried:
            run.done(row, SKIPPED, None, f"{tombstones.CODE}: {tombstones.REASON}")
            continue
        known = _existing(store, run, row)
        if known is None:
            fresh.append(position)
        else:
            run.done(row, SKIPPED, known.id, f"already stored as {known.id}")
    return fresh


def _prepare_current(
    writer: WritePath, run: _Run, rows: Sequence[ImportRow]
) -> list[tuple[Owner, list[ImportRow], Prepared]]:
    """Active rows by owner slot, with policy verdicts and vectors (no lock held)."""
    groups: dict[Owner, list[ImportRow]] = {}
    for row in rows:
        groups.setdefault(run.owner(row), []).append(row)
    return [(owner, members, writer.prepare([row.proposal for row in members]))
            for owner, members in groups.items()]  # fmt: skip


def _write_current(
    store: Backend, writer: WritePath, run: _Run,
    groups: Sequence[tuple[Owner, list[ImportRow], Prepared]],
) -> list[tuple[ImportRow, Record]]:  # fmt: skip
    """Each new active row through the write path, slot by slot; the records it ADDed."""
    added = []
    for owner, members, prepared in groups:
        fresh = _unknown(store, run, members)
        results = writer.commit_prepared(owner, prepared.subset(fresh), run.now)
        for position, result in zip(fresh, results, strict=True):
            row = members[position]
            _written(run, row, result)
            if result.operation == Operation.ADD and result.record is not None:
                added.append((row, result.record))
    return added


def _written(run: _Run, row: ImportRow, result: WriteResult) -> None:
    if result.operation == Operation.REJECT or result.record is None:
        raise InvalidArgument(f"import row {row.index}: the write path rejects it: "
                              f"{result.reason}")  # fmt: skip
    run.done(row, result.operation.value, result.record.id, result.reason)


def _history_vectors(
    store: Backend, embedder: Embedder, rows: Sequence[ImportRow]
) -> tuple[NDArray[np.float32] | None, str | None]:
    """Vectors of the history rows and their model, computed before the transaction."""
    if not rows or not vectors_enabled(store, embedder):
        return None, None
    return embed_contents(embedder, [r.proposal.content for r in rows]), embedder.model_id


def _insert_history(
    store: Backend, config: Config, run: _Run, rows: Sequence[ImportRow],
    vectors: tuple[NDArray[np.float32] | None, str | None],
) -> list[str]:  # fmt: skip
    """The new history and disputed rows as they were (never active), links remapped.
    Vectors made under another model than the store's now are dropped."""
    matrix, model = vectors
    if model is not None and store.vector_model() not in (None, model):
        matrix, model = None, None
    fresh = _unknown(store, run, rows)
    planned = {rows[i].index: new_id() for i in fresh}
    for i in fresh:
        original = rows[i].original_id
        if original is not None:
            run.ids[original] = planned[rows[i].index]
    written = []
    for i in fresh:
        row = _unforked(store, run, rows[i])
        record = history_record(row, planned[row.index], run.owner(row), run.ids, config, model)
        store.apply([Insert(record, None if matrix is None else matrix[i])])
        run.done(row, HISTORY_OP, record.id, f"kept as a {row.status.value} version")
        written.append(record.id)
    return written


def _relink(store: Backend, run: _Run, added: Sequence[tuple[ImportRow, Record]]) -> list[str]:
    """Give each version the write path ADDed its row's place in the imported chain.

    ``Store.place`` writes those fields in place, inside the import's transaction.
    (Deleting and re-inserting the version would mark its id as forgotten, and no
    later version could supersede it.)
    """
    changed = []
    for row, record in added:
        fixed = _placed(_unforked(store, run, row), record, run.ids)
        if fixed == record:
            continue
        store.apply([Place(fixed)])
        changed.append(record.id)
    return changed


def _unforked(store: Backend, run: _Run, row: ImportRow) -> ImportRow:
    """``row`` without its ``supersedes`` link when the version it names (already
    stored, as a skipped row's match) has a successor in the store: linking a second
    one would fork the chain."""
    taken = run.ids.get(row.supersedes) if row.supersedes else None
    if taken is None or not store.successors(Tenant(run.scope.tenant_id), [taken]):
        return row
    return dataclasses.replace(row, supersedes=None)


def _placed(row: ImportRow, record: Record, ids: Mapping[str, str]) -> Record:
    """``record`` with the row's version and predecessor (when that was imported), the
    earlier creation time, an expiry never later than the row's, derived_from remapped."""
    predecessor = ids.get(row.supersedes) if row.supersedes else None
    expiry = min((t for t in (record.expires_at, row.expires_at) if t), default=None)
    return record.replace(
        version=row.version if predecessor else record.version,
        supersedes=predecessor or record.supersedes,
        created_at=min(row.created_at, record.created_at),
        expires_at=expiry,
        source=remap_source(record.source, ids),
    )


def _report(run: _Run) -> ImportReport:
    outcomes = tuple(run.outcomes[i] for i in sorted(run.outcomes))
    skipped = tuple((o.index, o.reason) for o in outcomes if o.operation == SKIPPED)
    return ImportReport(len(outcomes) - len(skipped), skipped, dict(run.ids), outcomes)
