"""Export and import of a caller's memories with their full history.

Export (``export_view.export_rows``) yields plain JSON-friendly rows (every
status, version links intact).

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

* the ``active`` rows, in file order (the order the exporting store wrote them),
  each go through ``WritePath`` for its owner slot, so what the store held before
  the import decides ADD / CONFIRM / SUPERSEDE / DISPUTE / CONTEST (instruction-
  like text from a document is quarantined as disputed, a second active value for
  a key is never created outside a contested pair). The file's rows do not meet
  each other there: the exporting store already decided how they relate, and
  their statuses and links say it (an agent's version and the user's own version
  of one key, both active, stay so). Only where one slot would hold two active
  values of a key do they meet: the contested pair the file records is joined
  again as such (``_rejoin``), and versions of slots the importer merges (an
  importer without the exporter's agent) are decided by the write path;
* a row bound to an agent stays bound to the importer's agent (proposed as
  ``agent_scope="agent"``: the write path never moves it to the user);
* each version the write path creates for a row without replacing one (ADD,
  CONTEST, DISPUTE) takes the row's place in its imported chain (version,
  supersedes, created_at; expires_at never later than the row's), written in
  place by ``Store.place``;
* a history row (superseded, retracted, expired) and a disputed row are kept
  as they were, never active, with their links remapped to the new ids;
* a global row is skipped (only an admin writes tenant-wide records).

Idempotent: a row identical to a version already in its slot before the import
(same content, key and value, any status, for an active row; same content, key,
status and version for the others) is SKIPPED and maps to that version (one of
the row's own slot first), so importing the same export twice changes nothing,
and re-importing never revives a memory the user has since superseded or
retracted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
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
from engram.types import Operation, Proposal, Record, Status, WriteResult
from engram.write import policy, tombstones
from engram.write.commit import Owner, commit, new_record
from engram.write.decide import Decision
from engram.write.index import embed_contents, vectors_enabled
from engram.write.path import Prepared, WritePath
from engram.write.policy import VerdictKind
from engram.write.slots import slot_versions

__all__ = ["ImportReport", "RowOutcome", "import_rows"]

HISTORY_OP = "HISTORY"
SKIPPED = "SKIPPED"
_PLACED = frozenset({Operation.ADD, Operation.CONTEST, Operation.DISPUTE})  # replace none
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


@dataclass
class _Run:
    """The state of one import: outcomes and ids so far."""

    scope: Scope
    now: datetime
    outcomes: dict[int, RowOutcome]
    ids: dict[str, str]
    made: set[str] = dataclasses.field(default_factory=set)  # versions written for rows

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
    """The version stored before this import in the row's slot that makes the row a
    duplicate, if any, one of the row's own agent first (another row of the file is
    never the same: each has its own id)."""
    owner = run.owner(row)
    p = row.proposal
    if row.status not in HISTORY:
        probe = SlotProbe(_slot(owner), _ANY_STATUS, content_hash=row.digest)
        same = [r for r in slot_versions(store, [probe])[0] if (r.key, r.value) == (p.key, p.value)]
    else:
        probe = SlotProbe(_slot(owner), (row.status.value,), content_hash=row.digest)
        same = [r for r in slot_versions(store, [probe])[0]
                if (r.key, r.version) == (p.key, row.version)]  # fmt: skip
    same = [r for r in same if r.id not in run.made]
    own = [r for r in same if r.agent_id == owner.agent_id]
    return next(iter(own or same), None)


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
    current = [row for row in parsed if row.status not in HISTORY]
    prepared = writer.prepare([_bound(run, row) for row in current])
    history = [row for row in parsed if row.status in HISTORY]
    vectors = _history_vectors(store, embedder, history)
    with store.transaction():
        added = _write_current(store, writer, config, run, current, prepared)
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


def _bound(run: _Run, row: ImportRow) -> Proposal:
    """The row's proposal; kept with the agent (``agent_scope="agent"``) when the row
    is bound to the importer's agent, so no decision moves it to the user."""
    if run.owner(row).agent_id is None:
        return row.proposal
    return dataclasses.replace(row.proposal, agent_scope="agent")


def _write_current(
    store: Backend, writer: WritePath, config: Config, run: _Run,
    rows: Sequence[ImportRow], prepared: Prepared,
) -> list[tuple[ImportRow, Record]]:  # fmt: skip
    """Each new active row in file order: its contested pair joined again, or the
    write path, meeting the file's other rows only where a slot holds one active
    value per key; the versions created that replace none (to be placed)."""
    created = []
    for position in _unknown(store, run, rows):
        row, one = rows[position], prepared.subset([position])
        owner = run.owner(row)
        partner = _partner(store, run, row, owner, one)
        if partner is not None:
            result = _rejoin(store, config, run, owner, one, partner)
        else:
            result = writer.commit_prepared(owner, one, run.now, _unseen(run, row, owner))[0]
        _written(run, row, result)
        if result.record is not None and result.operation != Operation.CONFIRM:
            run.made.add(result.record.id)
            if result.operation in _PLACED:
                created.append((row, result.record))
    return created


def _unseen(run: _Run, row: ImportRow, owner: Owner) -> Callable[[Record], bool]:
    """Which stored versions the row's decision does not meet: those this import wrote
    for other rows, except the active versions of the row's key in its own slot."""
    own = (row.proposal.key, owner.agent_id, owner.scope)

    def unseen(record: Record) -> bool:
        if record.id not in run.made:
            return False
        return own[0] is None or (record.key, record.agent_id, record.scope) != own

    return unseen


def _partner(
    store: Backend, run: _Run, row: ImportRow, owner: Owner, prepared: Prepared
) -> Record | None:
    """The version this import wrote for the row's contest partner, when the row joins
    it again: active and uncontested, of the row's key in the row's slot (read with the
    slot locked for the key), and the policy accepts the row (a quarantined row stays
    disputed)."""
    made = run.ids.get(row.contested_with) if row.contested_with else None
    key = row.proposal.key
    if made not in run.made or key is None or prepared.verdicts[0].kind != VerdictKind.ACCEPT:
        return None
    versions = slot_versions(store, [SlotProbe(owner.slot, (Status.ACTIVE.value,), key=key)])
    partner = next((r for r in versions[0] if r.id == made), None)
    if partner is None or partner.contested_with is not None:
        return None
    return partner if (partner.agent_id, partner.scope) == (owner.agent_id, owner.scope) else None


def _rejoin(
    store: Backend, config: Config, run: _Run, owner: Owner, prepared: Prepared,
    partner: Record,
) -> WriteResult:  # fmt: skip
    """The row's new version contesting ``partner`` again, as the exporting store
    decided (deciding it anew could differ: a confirmation may have raised one
    side's confidence since), committed as the write path commits a CONTEST."""
    proposal, vector, model = prepared.proposals[0], prepared.vectors[0], prepared.model
    if vector is None or store.vector_model() not in (None, model):
        vector, model = None, None
    reason = f"contested with {partner.id}, as in the imported file"
    decision = Decision(Operation.CONTEST, "contested", reason, Status.ACTIVE, linked=partner)
    new = new_record(proposal, owner, decision, run.now, config, prepared.hashes[0], model)
    return commit(store, decision, new, vector, proposal, owner, run.now)


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
    """Give each version the write path created for a row, replacing none, its row's
    place in the imported chain.

    ``Store.place`` writes those fields in place, inside the import's transaction.
    (Deleting and re-inserting the version would mark its id as forgotten, and no
    later version could supersede it.)
    """
    changed = []
    for row, record in added:
        fixed = _placed(_unforked(store, run, row), record, run.ids, row.supersedes is not None)
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


def _placed(row: ImportRow, record: Record, ids: Mapping[str, str], named: bool) -> Record:
    """``record`` with the row's version and predecessor (when that was imported), the
    earlier creation time, an expiry never later than the row's, derived_from remapped.
    A row that ``named`` no predecessor keeps its version too (a version whose
    predecessor its exporter did not show, such as an agent's private one); one whose
    link was dropped starts a chain of its own here."""
    predecessor = ids.get(row.supersedes) if row.supersedes else None
    expiry = min((t for t in (record.expires_at, row.expires_at) if t), default=None)
    return record.replace(
        version=row.version if predecessor or not named else record.version,
        supersedes=predecessor or record.supersedes,
        created_at=min(row.created_at, record.created_at),
        expires_at=expiry,
        source=remap_source(record.source, ids),
    )


def _report(run: _Run) -> ImportReport:
    outcomes = tuple(run.outcomes[i] for i in sorted(run.outcomes))
    skipped = tuple((o.index, o.reason) for o in outcomes if o.operation == SKIPPED)
    return ImportReport(len(outcomes) - len(skipped), skipped, dict(run.ids), outcomes)
