"""Named, append-only SQLite migrations. Never edit a shipped one; add a new one.

The ``records`` table is the truth. ``vectors`` is derived and kept in step by
triggers, and ``engram index rebuild`` regenerates it. ``partition_state``
counts vector changes per (tenant, user) so in-memory vector partitions know
when to refresh, and ``index_totals`` counts all vectors. ``lexical_state`` counts record
inserts and removals per (tenant, user) for the in-memory lexical partitions (a
change to content or owner, which the write path never makes, counts as a
removal, so the partition reloads). ``audit`` is append-only:
triggers refuse updates and deletes.

Migrations 0003 and 0009 created an FTS5 index (``records_fts``) and counters of
its changes for a second lexical engine; 0011 drops them. The in-memory engine
builds its postings from ``records``, so the FTS5 table was overhead, and its
segments kept erased words until a merge (an erasure residue). The
``records.fts_owner`` column stays (dropping a column rewrites the table); rows
written since 0011 hold ''.

0012 stores each trace with the visibility it was recorded under and the ids it
names (``store.traces``). Traces stored before it carry neither, so it deletes
them: they are diagnostics, and unreadable under the new rule anyway.

0013 keeps the ids of deleted records (``forgotten``: ids only, like the audit
log) and refuses a new version of one: a ``correct`` that read its target
before a ``forget`` committed cannot resurrect the chain afterwards.

0016 adds ``share_grants`` (which agent may share which types with which other
agent, per tenant; ``lifecycle.share``) and two indexes of the share copies: by
the agent they were shared to (a revoked grant deletes those) and by their
original (``derived_from[0]``: a change to the original follows its copies).

0017 holds what the lifecycle keeps beside the records: ``procedure_stats``
(counted outcomes of each procedure), ``consolidated`` (the episodes
consolidation has read, each once) and ``consolidation_runs`` (one row per
subject: who holds the consolidation lease, until when, and the ``now`` of the
last finished run). A deleted record takes its statistics and its mark with it
(a trigger); an erasure deletes the subject's run row.

0019-0021 serve forgetting and erasure (``docs/erasure.md``): ``tombstones``
holds keyed digests of erased contents per owner (never the text; the key of
each tenant is in ``tombstone_keys``), ``cache_generations`` counts each
tenant's deletions so every process serving the file knows when its in-memory
copies are stale, and ``sweeps`` remembers how far each tenant was swept (a
sweep with an earlier clock is reported). Two indexes serve the sweep's scans, and
one the unlinking of contest partners every deletion does (it scanned the
tenant's every record per batch without it).
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

_RECORDS = """
CREATE TABLE records (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    tier TEXT NOT NULL,
    type TEXT NOT NULL,
    key TEXT,
    value TEXT,
    content TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    authority TEXT NOT NULL,
    confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    source_kind TEXT NOT NULL,
    source_ref TEXT,
    derived_from TEXT NOT NULL DEFAULT '[]',
    observed_at INTEGER NOT NULL,
    valid_from INTEGER,
    valid_to INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    supersedes TEXT,
    superseded_by TEXT,
    contested_with TEXT,
    sensitivity TEXT NOT NULL,
    purpose TEXT,
    consent_basis TEXT,
    retention TEXT NOT NULL,
    expires_at INTEGER,
    importance REAL NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_accessed_at INTEGER,
    private INTEGER NOT NULL,
    embedding_model TEXT,
    fts_owner TEXT NOT NULL,
    CHECK ((user_id = '') = (scope = 'global')),
    CHECK (valid_to IS NULL OR valid_from IS NULL OR valid_from <= valid_to)
);
CREATE INDEX records_key ON records (tenant_id, user_id, key, scope) WHERE key IS NOT NULL;
CREATE INDEX records_recent ON records (tenant_id, user_id, observed_at);
CREATE INDEX records_hash ON records (tenant_id, user_id, content_hash);
CREATE INDEX records_type ON records (tenant_id, user_id, type, observed_at);
CREATE INDEX records_expiry ON records (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX records_derived ON records (tenant_id) WHERE derived_from <> '[]';
"""

_FTS = """
CREATE VIRTUAL TABLE records_fts USING fts5(
    content, fts_owner,
    content='records', content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER records_fts_insert AFTER INSERT ON records BEGIN
    INSERT INTO records_fts (rowid, content, fts_owner)
    VALUES (new.rowid, new.content, new.fts_owner);
END;
CREATE TRIGGER records_fts_delete AFTER DELETE ON records BEGIN
    INSERT INTO records_fts (records_fts, rowid, content, fts_owner)
    VALUES ('delete', old.rowid, old.content, old.fts_owner);
END;
CREATE TRIGGER records_fts_update AFTER UPDATE OF content, fts_owner ON records BEGIN
    INSERT INTO records_fts (records_fts, rowid, content, fts_owner)
    VALUES ('delete', old.rowid, old.content, old.fts_owner);
    INSERT INTO records_fts (rowid, content, fts_owner)
    VALUES (new.rowid, new.content, new.fts_owner);
END;
"""

_VECTORS = """
CREATE TABLE vectors (
    seq INTEGER PRIMARY KEY,
    record_id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    model TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX vectors_partition ON vectors (tenant_id, user_id, seq);
CREATE TABLE partition_state (
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    inserts INTEGER NOT NULL DEFAULT 0,
    deletes INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, user_id)
) WITHOUT ROWID;
CREATE TRIGGER vectors_count_insert AFTER INSERT ON vectors BEGIN
    INSERT INTO partition_state (tenant_id, user_id, inserts)
    VALUES (new.tenant_id, new.user_id, 1)
    ON CONFLICT (tenant_id, user_id) DO UPDATE SET inserts = inserts + 1;
END;
CREATE TRIGGER vectors_count_delete AFTER DELETE ON vectors BEGIN
    INSERT INTO partition_state (tenant_id, user_id, deletes)
    VALUES (old.tenant_id, old.user_id, 1)
    ON CONFLICT (tenant_id, user_id) DO UPDATE SET deletes = deletes + 1;
END;
CREATE TRIGGER records_drop_vector AFTER DELETE ON records BEGIN
    DELETE FROM vectors WHERE record_id = old.id;
END;
"""

_AUDIT = """
CREATE TABLE audit (
    seq INTEGER PRIMARY KEY,
    at INTEGER NOT NULL,
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    actor TEXT NOT NULL,
    operation TEXT NOT NULL,
    record_ids TEXT NOT NULL,
    reason TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX audit_subject ON audit (tenant_id, user_id, seq);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
"""

_META = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
"""

_TRACES = """
CREATE TABLE traces (
    seq INTEGER PRIMARY KEY,
    trace_id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    at INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX traces_owner ON traces (tenant_id, user_id, seq);
"""

_KEYED = """
CREATE INDEX records_keyed ON records (tenant_id, user_id, type, observed_at)
    WHERE key IS NOT NULL;
"""

_TOTALS = """
CREATE TABLE index_totals (name TEXT PRIMARY KEY, rows INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO index_totals VALUES ('vectors', (SELECT count(*) FROM vectors));
CREATE TRIGGER vectors_total_insert AFTER INSERT ON vectors BEGIN
    UPDATE index_totals SET rows = rows + 1 WHERE name = 'vectors';
END;
CREATE TRIGGER vectors_total_delete AFTER DELETE ON vectors BEGIN
    UPDATE index_totals SET rows = rows - 1 WHERE name = 'vectors';
END;
"""

_FTS_CHANGES = """
INSERT INTO index_totals VALUES ('fts_changes', 0), ('fts_deletes', 0);
CREATE TRIGGER fts_changes_insert AFTER INSERT ON records BEGIN
    UPDATE index_totals SET rows = rows + 1 WHERE name = 'fts_changes';
END;
CREATE TRIGGER fts_changes_delete AFTER DELETE ON records BEGIN
    UPDATE index_totals SET rows = rows + 1 WHERE name IN ('fts_changes', 'fts_deletes');
END;
CREATE TRIGGER fts_changes_update AFTER UPDATE OF content, fts_owner ON records BEGIN
    UPDATE index_totals SET rows = rows + 1 WHERE name IN ('fts_changes', 'fts_deletes');
END;
"""

_LEXICAL_STATE = """
CREATE INDEX records_partition ON records (tenant_id, user_id);
CREATE TABLE lexical_state (
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    inserts INTEGER NOT NULL DEFAULT 0,
    deletes INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, user_id)
) WITHOUT ROWID;
INSERT INTO lexical_state (tenant_id, user_id, inserts)
    SELECT tenant_id, user_id, count(*) FROM records GROUP BY tenant_id, user_id;
CREATE TRIGGER lexical_count_insert AFTER INSERT ON records BEGIN
    INSERT INTO lexical_state (tenant_id, user_id, inserts)
    VALUES (new.tenant_id, new.user_id, 1)
    ON CONFLICT (tenant_id, user_id) DO UPDATE SET inserts = inserts + 1;
END;
CREATE TRIGGER lexical_count_delete AFTER DELETE ON records BEGIN
    INSERT INTO lexical_state (tenant_id, user_id, deletes)
    VALUES (old.tenant_id, old.user_id, 1)
    ON CONFLICT (tenant_id, user_id) DO UPDATE SET deletes = deletes + 1;
END;
CREATE TRIGGER lexical_count_update AFTER UPDATE OF content, tenant_id, user_id, scope,
    agent_id ON records BEGIN
    INSERT INTO lexical_state (tenant_id, user_id, deletes)
    VALUES (old.tenant_id, old.user_id, 1)
    ON CONFLICT (tenant_id, user_id) DO UPDATE SET deletes = deletes + 1;
END;
"""

_DROP_FTS = """
DROP TRIGGER IF EXISTS records_fts_insert;
DROP TRIGGER IF EXISTS records_fts_delete;
DROP TRIGGER IF EXISTS records_fts_update;
DROP TABLE IF EXISTS records_fts;
DROP TRIGGER IF EXISTS fts_changes_insert;
DROP TRIGGER IF EXISTS fts_changes_delete;
DROP TRIGGER IF EXISTS fts_changes_update;
DELETE FROM index_totals WHERE name IN ('fts_changes', 'fts_deletes');
"""

_TRACE_VISIBILITY = """
DELETE FROM traces;
ALTER TABLE traces ADD COLUMN visibility TEXT NOT NULL DEFAULT '';
ALTER TABLE traces ADD COLUMN ids TEXT NOT NULL DEFAULT '[]';
CREATE INDEX traces_tenant ON traces (tenant_id, seq);
"""

_FORGOTTEN = """
CREATE TABLE forgotten (id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TRIGGER records_remember_deleted AFTER DELETE ON records BEGIN
    INSERT OR IGNORE INTO forgotten (id) VALUES (old.id);
END;
CREATE TRIGGER records_no_version_of_deleted BEFORE INSERT ON records
    WHEN new.supersedes IS NOT NULL BEGIN
    SELECT RAISE(ABORT, 'the record this version supersedes was deleted')
    WHERE EXISTS (SELECT 1 FROM forgotten WHERE id = new.supersedes);
END;
"""

# At most one active, uncontested version per key in a write slot, held by the
# database itself, so no interleaving of writers can leave two current values (a
# contested pair links both versions through contested_with). Slots that broke it
# before (a race fixed with this migration) keep their newest version; the others
# become superseded by it.
_ONE_ACTIVE = """
UPDATE records SET status = 'superseded', superseded_by = w.newest
FROM (
    SELECT rowid AS rid,
        first_value(id) OVER slot AS newest,
        row_number() OVER slot AS place
    FROM records
    WHERE key IS NOT NULL AND status = 'active' AND contested_with IS NULL
    WINDOW slot AS (PARTITION BY tenant_id, user_id, agent_id, scope, key ORDER BY rowid DESC)
) AS w
WHERE records.rowid = w.rid AND w.place > 1;
CREATE UNIQUE INDEX records_one_active ON records (tenant_id, user_id, agent_id, scope, key)
    WHERE key IS NOT NULL AND status = 'active' AND contested_with IS NULL;
"""

# One random key per audited user (``store.pseudonyms``); deleting the row makes
# the user's audit entries unlinkable.
_AUDIT_SUBJECTS = """
CREATE TABLE audit_subjects (
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    key BLOB NOT NULL,
    PRIMARY KEY (tenant_id, user_id)
) WITHOUT ROWID;
"""

_SHARE_GRANTS = """
CREATE TABLE share_grants (
    tenant_id TEXT NOT NULL,
    from_agent TEXT NOT NULL,
    to_agent TEXT NOT NULL,
    type TEXT NOT NULL,
    granted_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, from_agent, to_agent, type)
) WITHOUT ROWID;
CREATE INDEX records_shared ON records (tenant_id, agent_id, type) WHERE source_kind = 'share';
CREATE INDEX records_share_original ON records (tenant_id, json_extract(derived_from, '$[0]'))
    WHERE source_kind = 'share';
"""

_CONSOLIDATION = """
CREATE TABLE procedure_stats (
    tenant_id TEXT NOT NULL,
    procedure_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    successes INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    reward_total REAL NOT NULL DEFAULT 0,
    rewards INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, procedure_id)
) WITHOUT ROWID;
CREATE INDEX procedure_stats_subject ON procedure_stats (tenant_id, user_id);
CREATE TABLE consolidated (
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, user_id, episode_id)
) WITHOUT ROWID;
CREATE TABLE consolidation_runs (
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    holder TEXT NOT NULL,
    lease_until INTEGER NOT NULL,
    last_run INTEGER,
    PRIMARY KEY (tenant_id, user_id)
) WITHOUT ROWID;
CREATE TRIGGER records_drop_lifecycle AFTER DELETE ON records BEGIN
    DELETE FROM procedure_stats WHERE tenant_id = old.tenant_id AND procedure_id = old.id;
    DELETE FROM consolidated
        WHERE tenant_id = old.tenant_id AND user_id = old.user_id AND episode_id = old.id;
END;
"""

# The version walk (``history``) follows ``superseded_by`` backwards too: a fact
# merged into another is superseded by it without the survivor naming it.
_MERGE_LINKS = """
CREATE INDEX records_superseded_by ON records (tenant_id, superseded_by)
    WHERE superseded_by IS NOT NULL;
"""

# Keyed digests of erased contents (``store.tombstones``): a non-explicit write of
# the same normalised content for the same owner (or any owner, for an erased
# subject's contents) is refused. ``user_id`` is the owner, '' for tenant-wide
# records, ``:erased`` for a subject erased since (no user is named any more).
_TOMBSTONES = """
CREATE TABLE tombstone_keys (
    tenant_id TEXT NOT NULL PRIMARY KEY,
    key BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE tombstones (
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, user_id, digest)
) WITHOUT ROWID;
"""

# One row per tenant, bumped by every deletion in the same transaction: a process
# that sees a new value drops what it holds in memory of that tenant.
_CACHE_GENERATIONS = """
CREATE TABLE cache_generations (
    tenant_id TEXT NOT NULL PRIMARY KEY,
    generation INTEGER NOT NULL
) WITHOUT ROWID;
"""

_SWEEPS = """
CREATE TABLE sweeps (
    tenant_id TEXT NOT NULL PRIMARY KEY,
    swept_to INTEGER NOT NULL,
    runs INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX records_due ON records (tenant_id, expires_at, id) WHERE expires_at IS NOT NULL;
CREATE INDEX records_tenant_order ON records (tenant_id, id);
CREATE INDEX records_contested ON records (tenant_id, contested_with)
    WHERE contested_with IS NOT NULL;
"""

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("0001_meta", _META),
    ("0002_records", _RECORDS),
    ("0003_records_fts", _FTS),
    ("0004_vectors", _VECTORS),
    ("0005_audit", _AUDIT),
    ("0006_traces", _TRACES),
    ("0007_keyed_index", _KEYED),
    ("0008_index_totals", _TOTALS),
    ("0009_fts_changes", _FTS_CHANGES),
    ("0010_lexical_state", _LEXICAL_STATE),
    ("0011_drop_fts", _DROP_FTS),
    ("0012_trace_visibility", _TRACE_VISIBILITY),
    ("0013_forgotten", _FORGOTTEN),
    ("0014_one_active_version", _ONE_ACTIVE),
    ("0015_audit_subjects", _AUDIT_SUBJECTS),
    ("0016_share_grants", _SHARE_GRANTS),
    ("0017_consolidation", _CONSOLIDATION),
    ("0018_merge_links", _MERGE_LINKS),
    ("0019_tombstones", _TOMBSTONES),
    ("0020_cache_generations", _CACHE_GENERATIONS),
    ("0021_sweeps", _SWEEPS),
)
