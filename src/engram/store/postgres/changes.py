"""Facts about a change the PostgreSQL store applies: the tenant it writes to
(``PostgresStore.apply`` asks for that tenant's writer lock before the change's
first statement), the check that an update met exactly one row of its tenant, and
how a run of usage touches is sent."""

from __future__ import annotations

from collections.abc import Sequence

from engram.errors import StoreError
from engram.store import contract
from engram.store.accesses import coalesce
from engram.store.postgres import sql
from engram.store.postgres.session import Conn
from engram.types import Record

__all__ = ["one_row", "tenant_of", "touch"]


def one_row(changed: int, record: Record) -> None:
    """An update names one record of its own tenant (``update_query``'s ``Tenant``
    condition): a change carrying a foreign or missing id is refused, not ignored."""
    if changed != 1:
        raise StoreError(f"no record {record.id!r} in tenant {record.tenant_id!r} to update")


def tenant_of(change: contract.Change) -> str:
    """The tenant a change writes to (its writer lock is taken first)."""
    if isinstance(change, (contract.Insert, contract.Update, contract.Place)):
        return change.record.tenant_id
    if isinstance(
        change,
        (
            contract.Delete,
            contract.UnlinkContests,
            contract.Reconsolidate,
            contract.AddTombstones,
            contract.DropTombstones,
        ),
    ):
        return change.tenant.tenant_id
    if isinstance(change, contract.AnonymiseTombstones):
        return change.subject.tenant_id
    if isinstance(change, contract.Touch):
        return change.vis.tenant_id
    if isinstance(change, contract.PutGrants):
        return change.grants[0].tenant_id if change.grants else ""
    if isinstance(change, contract.DropGrants):
        return change.tenant.tenant_id
    if isinstance(change, (contract.Outcome, contract.Consolidated)):
        return change.subject.tenant_id
    return change.entry.tenant_id


def touch(conn: Conn, touches: Sequence[contract.Touch]) -> None:
    """The accesses of a run of touches (a usage flush): one statement per
    visibility (``store.accesses``), not one per recall."""
    for accesses in coalesce(touches):
        conn.execute(*sql.touch(accesses))
