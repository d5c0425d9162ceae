"""The audit log on PostgreSQL: one hash chain per tenant, appended in turn.

The first append of a transaction upserts the tenant's ``audit_heads`` row,
which locks it until the transaction ends and reads the head: concurrent
writers of one tenant, in this process or another, chain one after another
(the hash of each entry covers the previous one) and a rolled-back change
leaves no entry. While the row is locked the head cannot move but by this
transaction, so the entries it appends are chained here (``Unit.heads``) and
inserted by one statement before ``COMMIT``, which also moves the head
(``_before_commit``; a read of the log inside the transaction inserts them
first). Entries name users by pseudonym (``store.pseudonyms``), exactly as the
SQLite store writes them; a subject's key is read or made once per transaction
(``Unit.keys``; ``forget_audit_subject`` drops it). ``verify_audit`` recomputes
every tenant's chain and checks that its head names the last entry (nothing
cut off).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from psycopg.rows import dict_row

from engram.errors import StoreError
from engram.store.audit import GENESIS, AuditEntry, AuditReport, entry_hash, verify_chain
from engram.store.dialect import POSTGRES
from engram.store.postgres.session import Conn, Session, on
from engram.store.postgres.unit import Unit
from engram.store.predicate import Subject, Tenant
from engram.store.pseudonyms import is_pseudonym, pseudonym, pseudonymised
from engram.store.rows import to_micros

__all__ = ["AuditLog"]

_HEAD = (
    "INSERT INTO audit_heads (tenant_id, seq, hash) VALUES (%(t)s, 0, %(genesis)s)"
    " ON CONFLICT (tenant_id) DO UPDATE SET seq = audit_heads.seq RETURNING seq, hash"
)
_COLUMNS = ("seq", "at", "user_id", "actor", "operation", "record_ids", "reason",
            "prev_hash", "hash")  # fmt: skip
_TYPES = ("bigint", "bigint", "text", "text", "text", "text", "text", "text", "text")


def _append(tenant: Tenant) -> str:
    """Move the tenant's chain head (the row the transaction's first append locked)
    and insert its chained entries, in one statement (the entries as arrays, so the
    text is the same for any number of them)."""
    cond, _ = tenant.sql("h", POSTGRES)
    arrays = ", ".join(f"%({c})s::{t}[]" for c, t in zip(_COLUMNS, _TYPES, strict=True))
    return (
        f"WITH head AS (UPDATE audit_heads AS h SET seq = %(head_seq)s, hash = %(head_hash)s"
        f" WHERE {cond}) INSERT INTO audit (tenant_id, {', '.join(_COLUMNS)})"
        f" SELECT %(t)s, e.* FROM unnest({arrays}) AS e"
    )


def _key_query(subject: Subject) -> tuple[str, dict[str, Any]]:
    """The subject's pseudonym key, made when it has none, in one statement: the new
    key, or the stored one (the outer read does not see the insert's row)."""
    cond, params = subject.sql("k", POSTGRES)
    sql = (
        "WITH made AS (INSERT INTO audit_subjects (tenant_id, user_id, key)"
        " VALUES (%(subj_tenant)s, %(subj_user)s, %(key)s) ON CONFLICT DO NOTHING RETURNING key)"
        f" SELECT key FROM made UNION ALL SELECT k.key FROM audit_subjects k WHERE {cond}"
    )
    return sql, {**params, "key": secrets.token_bytes(32)}


def _row(entry: AuditEntry, seq: int, prev: str, digest: str) -> dict[str, Any]:
    return {"seq": seq, "at": to_micros(entry.at), "user_id": entry.user_id or "",
            "actor": entry.actor, "operation": entry.operation,
            "record_ids": json.dumps(list(entry.record_ids)), "reason": entry.reason,
            "prev_hash": prev, "hash": digest}  # fmt: skip


class AuditLog(Session):
    """The audit chain and its pseudonym keys."""

    def _audit_key(self, conn: Conn, subject: Subject, create: bool) -> bytes | None:
        """The subject's pseudonym key, made on first use (inside the transaction);
        read once per transaction."""
        unit = self.unit() if conn is self._held() else None
        known = None if unit is None else unit.keys.get((subject.tenant_id, subject.user_id))
        if known is not None:
            return known
        found = on(conn, _key_query(subject)) if create else []
        if not found:  # a new snapshot: sees a concurrent writer's key
            cond, params = subject.sql("k", POSTGRES)
            found = on(conn, (f"SELECT k.key FROM audit_subjects k WHERE {cond}", params))
        key = bytes(found[0][0]) if found else None
        if unit is not None and key is not None:
            unit.keys[(subject.tenant_id, subject.user_id)] = key
        return key

    def audit_name(self, subject: Subject) -> str | None:
        """How the audit log names ``subject`` now (None: never audited, or erased)."""
        self.writing(subject.tenant_id)
        with self.connection("reading an audit pseudonym") as conn:
            key = self._audit_key(conn, subject, create=False)
        return None if key is None else pseudonym(key, subject.tenant_id, subject.user_id)

    def forget_audit_subject(self, subject: Subject) -> int:
        """Delete the subject's pseudonym key: its audit entries become unlinkable
        (and this transaction forgets the key too)."""
        self.writing(subject.tenant_id)
        cond, params = subject.sql("k", POSTGRES)
        deleted = self.run((f"DELETE FROM audit_subjects AS k WHERE {cond}", params))
        unit = self.unit()
        if unit is not None:
            unit.keys.pop((subject.tenant_id, subject.user_id), None)
        return deleted

    def append_audit(self, conn: Conn, entry: AuditEntry) -> str:
        """Chain one entry, its user named by pseudonym, in the open transaction on
        ``conn`` (inserted before it commits); returns its hash."""
        unit = self.unit()
        if unit is None or conn is not self._held():
            raise StoreError("an audit append needs this thread's open transaction")
        if entry.user_id:
            key = self._audit_key(conn, Subject(entry.tenant_id, entry.user_id), create=True)
            assert key is not None
            entry = pseudonymised(entry, pseudonym(key, entry.tenant_id, entry.user_id))
        head = unit.heads.get(entry.tenant_id)
        if head is None:
            seq, prev = on(conn, (_HEAD, {"t": entry.tenant_id, "genesis": GENESIS}))[0]
            head = (int(seq), str(prev))
        digest = entry_hash(head[1], entry)
        unit.entries.setdefault(entry.tenant_id, []).append(_row(entry, head[0] + 1, head[1],
                                                                 digest))  # fmt: skip
        unit.heads[entry.tenant_id] = (head[0] + 1, digest)
        return digest

    def _before_commit(self, conn: Conn) -> None:
        """Insert the audit rows the transaction still owes."""
        unit = self.unit()
        if unit is not None:
            self._flush_audit(conn, unit)

    def _flush_audit(self, conn: Conn, unit: Unit) -> None:
        """Insert each tenant's chained entries and move its head, one statement each."""
        for tenant_id in sorted(unit.entries):
            rows = unit.entries[tenant_id]
            if not rows:
                continue
            _, params = Tenant(tenant_id).sql("h", POSTGRES)
            seq, digest = unit.heads[tenant_id]
            arrays = {column: [row[column] for row in rows] for column in _COLUMNS}
            conn.execute(_append(Tenant(tenant_id)),
                         {**params, **arrays, "t": tenant_id, "head_seq": seq,
                          "head_hash": digest})  # fmt: skip
        unit.entries = {}

    def _audit_read(self, conn: Conn) -> None:
        """Before this thread's transaction reads the log: insert what it owes."""
        unit = self.unit()
        if unit is not None and conn is self._held():
            self._flush_audit(conn, unit)

    def verify_audit(self) -> AuditReport:
        """Recompute every tenant's chain, and check each head names its last entry."""
        with self.connection("verifying the audit log") as conn:
            self._audit_read(conn)
            heads = dict(on(conn, ("SELECT tenant_id, hash FROM audit_heads", {})))
            with conn.cursor(row_factory=dict_row) as cursor:
                cursor.execute("SELECT * FROM audit ORDER BY tenant_id, seq")
                rows = cursor.fetchall()
        by_tenant: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_tenant.setdefault(row["tenant_id"], []).append(row)
        total = 0
        for tenant_id in sorted(set(by_tenant) | set(heads)):
            chain = by_tenant.get(tenant_id, [])
            report = verify_chain(chain)
            if not report.ok:
                problem = f"tenant {tenant_id!r}: {report.problem}"
                return AuditReport(False, total + report.entries, report.first_bad_seq, problem)
            last = chain[-1]["hash"] if chain else GENESIS
            if heads.get(tenant_id, GENESIS) != last:
                seq = chain[-1]["seq"] if chain else None
                problem = f"tenant {tenant_id!r}: the chain head does not name its last entry"
                return AuditReport(False, total + report.entries, seq, problem)
            total += report.entries
        return AuditReport(True, total)

    def audit_entries(self, subject: Subject) -> list[dict[str, Any]]:
        """A subject's audit entries, oldest first (under its pseudonym; a plain id
        that is not shaped like a pseudonym is looked up too, as on SQLite)."""
        names = [] if is_pseudonym(subject.user_id) else [subject.user_id]
        if subject.user_id:
            name = self.audit_name(subject)
            names += [name] if name else []
        found: list[dict[str, Any]] = []
        with self.connection("reading audit entries") as conn:
            self._audit_read(conn)
            for user in names:
                cond, params = Subject(subject.tenant_id, user).sql("a", POSTGRES)
                with conn.cursor(row_factory=dict_row) as cursor:
                    cursor.execute(f"SELECT * FROM audit a WHERE {cond} ORDER BY a.seq", params)
                    found += cursor.fetchall()
        return sorted(found, key=lambda row: int(row["seq"]))
