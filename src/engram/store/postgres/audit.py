"""The audit log on PostgreSQL: one hash chain per tenant, appended in turn.

An append upserts the tenant's ``audit_heads`` row, which locks it until the
writer's transaction ends, so concurrent writers of one tenant chain one after
another (the hash of each entry covers the previous one) and a rolled-back
change leaves no entry. Entries name users by pseudonym (``store.pseudonyms``),
exactly as the SQLite store writes them. ``verify_audit`` recomputes every
tenant's chain and checks that its head names the last entry (nothing cut off).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from psycopg.rows import dict_row

from engram.store.audit import GENESIS, AuditEntry, AuditReport, entry_hash, verify_chain
from engram.store.dialect import POSTGRES
from engram.store.postgres.session import Conn, Session, on
from engram.store.predicate import Subject
from engram.store.pseudonyms import is_pseudonym, pseudonym, pseudonymised
from engram.store.rows import to_micros

__all__ = ["AuditLog"]

_HEAD = (
    "INSERT INTO audit_heads (tenant_id, seq, hash) VALUES (%(t)s, 0, %(genesis)s)"
    " ON CONFLICT (tenant_id) DO UPDATE SET seq = audit_heads.seq RETURNING seq, hash"
)
_APPEND = (
    "WITH head AS (UPDATE audit_heads SET seq = %(seq)s, hash = %(hash)s WHERE tenant_id = %(t)s)"
    " INSERT INTO audit (tenant_id, seq, at, user_id, actor, operation, record_ids, reason,"
    " prev_hash, hash) VALUES (%(t)s, %(seq)s, %(at)s, %(user)s, %(actor)s, %(op)s, %(ids)s,"
    " %(reason)s, %(prev)s, %(hash)s)"
)


class AuditLog(Session):
    """The audit chain and its pseudonym keys."""

    def _audit_key(self, conn: Conn, subject: Subject, create: bool) -> bytes | None:
        """The subject's pseudonym key, made on first use (inside the transaction)."""
        cond, params = subject.sql("k", POSTGRES)
        select = (f"SELECT k.key FROM audit_subjects k WHERE {cond}", params)
        if create:
            made = on(
                conn,
                (
                    "INSERT INTO audit_subjects (tenant_id, user_id, key)"
                    " VALUES (%(subj_tenant)s, %(subj_user)s, %(key)s)"
                    " ON CONFLICT DO NOTHING RETURNING key",
                    {**params, "key": secrets.token_bytes(32)},
                ),
            )
            if made:
                return bytes(made[0][0])
        found = on(conn, select)  # a new snapshot: sees a concurrent writer's key
        return bytes(found[0][0]) if found else None

    def audit_name(self, subject: Subject) -> str | None:
        """How the audit log names ``subject`` now (None: never audited, or erased)."""
        with self.connection("reading an audit pseudonym") as conn:
            key = self._audit_key(conn, subject, create=False)
        return None if key is None else pseudonym(key, subject.tenant_id, subject.user_id)

    def forget_audit_subject(self, subject: Subject) -> int:
        """Delete the subject's pseudonym key: its audit entries become unlinkable."""
        cond, params = subject.sql("k", POSTGRES)
        return self.run((f"DELETE FROM audit_subjects AS k WHERE {cond}", params))

    def append_audit(self, conn: Conn, entry: AuditEntry) -> str:
        """Chain and append one entry, its user named by pseudonym, in the open
        transaction on ``conn``; returns its hash."""
        if entry.user_id:
            key = self._audit_key(conn, Subject(entry.tenant_id, entry.user_id), create=True)
            assert key is not None
            entry = pseudonymised(entry, pseudonym(key, entry.tenant_id, entry.user_id))
        seq, prev = on(conn, (_HEAD, {"t": entry.tenant_id, "genesis": GENESIS}))[0]
        digest = entry_hash(prev, entry)
        conn.execute(
            _APPEND,
            {
                "t": entry.tenant_id, "seq": int(seq) + 1, "at": to_micros(entry.at),
                "user": entry.user_id or "",
                "actor": entry.actor, "op": entry.operation,
                "ids": json.dumps(list(entry.record_ids)), "reason": entry.reason,
                "prev": prev, "hash": digest,
            },
        )  # fmt: skip
        return digest

    def verify_audit(self) -> AuditReport:
        """Recompute every tenant's chain, and check each head names its last entry."""
        with self.connection("verifying the audit log") as conn:
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
            for user in names:
                cond, params = Subject(subject.tenant_id, user).sql("a", POSTGRES)
                with conn.cursor(row_factory=dict_row) as cursor:
                    cursor.execute(f"SELECT * FROM audit a WHERE {cond} ORDER BY a.seq", params)
                    found += cursor.fetchall()
        return sorted(found, key=lambda row: int(row["seq"]))
