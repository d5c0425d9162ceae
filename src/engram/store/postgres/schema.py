"""Named, append-only PostgreSQL migrations. Never edit a shipped one; add a new one.

The same record model as the SQLite schema (``engram.store.schema``): times are
integer microseconds since the epoch (``bigint``), "no user" and "any agent" are
``''``, JSON-valued columns are text, so ``engram.store.rows`` converts rows for
both backends. What differs:

* Every table's primary key, unique constraint and B-tree index leads with
  ``tenant_id``, so the schema distributes on Citus by tenant unchanged (the
  record id is unique per tenant: ids are ULIDs). Two tables are global and
  small (``engram_meta``, ``engram_migrations``): Citus reference tables. The
  GIN (``lexemes``) and HNSW (``embedding``) indexes are single-column by
  nature; on Citus each shard holds its own.
* The lexical index is a generated ``tsvector`` column over ``content`` with a
  GIN index; its text search configuration is chosen when the schema is made
  and remembered in ``engram_meta`` (``text_search_config``).
* Vectors live in ``records.embedding`` (no second table to join under the scope
  predicate). Its dimension and the HNSW index are set by the first write that
  carries a vector (``PostgresStore`` claims the model), as SQLite remembers the
  model in ``meta``.
* The audit log is one hash chain per tenant: ``audit_heads`` holds each
  chain's last sequence number and hash, and an append locks that row, so
  writers of one tenant append in turn and other tenants never wait. A trigger
  refuses updates, deletes and truncation of ``audit``.
* ``forgotten`` keeps the ids of deleted records; the store refuses a new
  version of one (the SQLite trigger of migration 0013, done in the statement
  that inserts, so it holds on Citus too).
* At most one active, uncontested version per (tenant, user, agent, scope, key):
  a unique partial index, as SQLite's migration 0014.
* ``share_grants`` and the indexes of share copies (by target agent, by original):
  SQLite's 0016.
* ``0008_consolidation`` (SQLite's 0017): ``procedure_stats``, ``consolidated``
  and ``consolidation_runs``; the first two reference their record by
  (tenant_id, id) with ``ON DELETE CASCADE`` (what SQLite's trigger does), a key
  that leads with the distribution column, so Citus keeps them co-located.
* ``0009_merge_links`` (SQLite's 0018): an index on ``superseded_by``, which the
  version walk follows backwards (a merged fact is superseded by its survivor
  without the survivor naming it).
* ``0010_tombstones`` to ``0012_sweeps`` (SQLite's 0019-0021), forgetting and
  erasure: ``tombstones`` and ``tombstone_keys``, ``cache_generations`` (bumped
  by every deletion: every process serving the database drops its in-memory
  copies of the tenant) and ``sweeps`` (how far each tenant was swept).
* ``records_vector_owners`` (0013): the owner columns of the rows holding a
  vector, so the vector probe's bounded count is an index-only walk. SQLite has
  no counterpart: its vector partitions count in memory.
"""

from __future__ import annotations

__all__ = ["TEXT_CONFIG_KEY", "VECTOR_DIM_KEY", "VECTOR_MODEL_KEY", "migrations"]

VECTOR_MODEL_KEY = "vector_model"
VECTOR_DIM_KEY = "vector_dimension"
TEXT_CONFIG_KEY = "text_search_config"

_EXTENSION = "CREATE EXTENSION IF NOT EXISTS vector"

_META = "CREATE TABLE engram_meta (key text PRIMARY KEY, value text NOT NULL)"

_RECORDS = """
CREATE TABLE records (
    tenant_id text NOT NULL,
    id text NOT NULL,
    user_id text NOT NULL,
    agent_id text NOT NULL,
    scope text NOT NULL,
    tier text NOT NULL,
    type text NOT NULL,
    key text,
    value text,
    content text NOT NULL,
    content_hash text NOT NULL,
    authority text NOT NULL,
    confidence double precision NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    source_kind text NOT NULL,
    source_ref text,
    derived_from text NOT NULL DEFAULT '[]',
    observed_at bigint NOT NULL,
    valid_from bigint,
    valid_to bigint,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    status text NOT NULL,
    version integer NOT NULL,
    supersedes text,
    superseded_by text,
    contested_with text,
    sensitivity text NOT NULL,
    purpose text,
    consent_basis text,
    retention text NOT NULL,
    expires_at bigint,
    importance double precision NOT NULL,
    access_count integer NOT NULL DEFAULT 0,
    last_accessed_at bigint,
    private smallint NOT NULL,
    embedding_model text,
    embedding vector,
    PRIMARY KEY (tenant_id, id),
    CHECK ((user_id = '') = (scope = 'global')),
    CHECK (valid_to IS NULL OR valid_from IS NULL OR valid_from <= valid_to)
);
CREATE INDEX records_recent ON records (tenant_id, user_id, observed_at);
CREATE INDEX records_created ON records (tenant_id, user_id, created_at);
CREATE INDEX records_key ON records (tenant_id, user_id, key, scope) WHERE key IS NOT NULL;
CREATE INDEX records_hash ON records (tenant_id, user_id, content_hash);
CREATE INDEX records_type ON records (tenant_id, user_id, type, observed_at);
CREATE INDEX records_keyed ON records (tenant_id, user_id, type, observed_at)
    WHERE key IS NOT NULL;
CREATE INDEX records_expiry ON records (tenant_id, expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX records_derived ON records (tenant_id) WHERE derived_from <> '[]';
CREATE INDEX records_supersedes ON records (tenant_id, supersedes) WHERE supersedes IS NOT NULL;
CREATE INDEX records_contested ON records (tenant_id, contested_with)
    WHERE contested_with IS NOT NULL;
CREATE UNIQUE INDEX records_one_active ON records (tenant_id, user_id, agent_id, scope, key)
    WHERE key IS NOT NULL AND status = 'active' AND contested_with IS NULL;
CREATE TABLE forgotten (tenant_id text NOT NULL, id text NOT NULL, PRIMARY KEY (tenant_id, id));
"""

# The configuration name is checked by ``PostgresConfig`` (a plain identifier).
_LEXEMES = """
ALTER TABLE records ADD COLUMN lexemes tsvector
    GENERATED ALWAYS AS (to_tsvector('{config}'::regconfig, content)) STORED;
CREATE INDEX records_lexemes ON records USING gin (lexemes);
INSERT INTO engram_meta (key, value) VALUES ('text_search_config', '{config}');
"""

_AUDIT = """
CREATE TABLE audit (
    tenant_id text NOT NULL,
    seq bigint NOT NULL,
    at bigint NOT NULL,
    user_id text NOT NULL,
    actor text NOT NULL,
    operation text NOT NULL,
    record_ids text NOT NULL,
    reason text NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    PRIMARY KEY (tenant_id, seq)
);
CREATE INDEX audit_subject ON audit (tenant_id, user_id, seq);
CREATE TABLE audit_heads (
    tenant_id text PRIMARY KEY,
    seq bigint NOT NULL,
    hash text NOT NULL
);
CREATE TABLE audit_subjects (
    tenant_id text NOT NULL,
    user_id text NOT NULL,
    key bytea NOT NULL,
    PRIMARY KEY (tenant_id, user_id)
);
CREATE FUNCTION engram_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only';
END
$$;
CREATE TRIGGER audit_no_change BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION engram_audit_append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION engram_audit_append_only();
"""

_TRACES = """
CREATE TABLE traces (
    tenant_id text NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    trace_id text NOT NULL,
    user_id text NOT NULL,
    visibility text NOT NULL,
    ids text[] NOT NULL,
    at bigint NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (tenant_id, seq),
    UNIQUE (tenant_id, trace_id)
);
CREATE INDEX traces_owner ON traces (tenant_id, user_id, seq);
"""

_CONSOLIDATION = """
CREATE TABLE procedure_stats (
    tenant_id text NOT NULL,
    procedure_id text NOT NULL,
    user_id text NOT NULL,
    successes bigint NOT NULL DEFAULT 0,
    failures bigint NOT NULL DEFAULT 0,
    reward_total double precision NOT NULL DEFAULT 0,
    rewards bigint NOT NULL DEFAULT 0,
    updated_at bigint NOT NULL,
    PRIMARY KEY (tenant_id, procedure_id),
    FOREIGN KEY (tenant_id, procedure_id) REFERENCES records (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX procedure_stats_subject ON procedure_stats (tenant_id, user_id);
CREATE TABLE consolidated (
    tenant_id text NOT NULL,
    user_id text NOT NULL,
    episode_id text NOT NULL,
    at bigint NOT NULL,
    PRIMARY KEY (tenant_id, user_id, episode_id),
    FOREIGN KEY (tenant_id, episode_id) REFERENCES records (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX consolidated_episode ON consolidated (tenant_id, episode_id);
CREATE TABLE consolidation_runs (
    tenant_id text NOT NULL,
    user_id text NOT NULL,
    holder text NOT NULL,
    lease_until bigint NOT NULL,
    last_run bigint,
    PRIMARY KEY (tenant_id, user_id)
);
"""


_SHARE_GRANTS = """
CREATE TABLE share_grants (
    tenant_id text NOT NULL,
    from_agent text NOT NULL,
    to_agent text NOT NULL,
    type text NOT NULL,
    granted_at bigint NOT NULL,
    PRIMARY KEY (tenant_id, from_agent, to_agent, type)
);
CREATE INDEX records_shared ON records (tenant_id, agent_id, type) WHERE source_kind = 'share';
CREATE INDEX records_share_original ON records (tenant_id, ((derived_from::jsonb) ->> 0))
    WHERE source_kind = 'share';
"""


_MERGE_LINKS = """
CREATE INDEX records_superseded_by ON records (tenant_id, superseded_by)
    WHERE superseded_by IS NOT NULL;
"""


_TOMBSTONES = """
CREATE TABLE tombstone_keys (tenant_id text PRIMARY KEY, key bytea NOT NULL);
CREATE TABLE tombstones (
    tenant_id text NOT NULL,
    user_id text NOT NULL,
    digest text NOT NULL,
    at bigint NOT NULL,
    PRIMARY KEY (tenant_id, user_id, digest)
);
"""

_CACHE_GENERATIONS = """
CREATE TABLE cache_generations (tenant_id text PRIMARY KEY, generation bigint NOT NULL);
"""

_SWEEPS = """
CREATE TABLE sweeps (
    tenant_id text PRIMARY KEY,
    swept_to bigint NOT NULL,
    runs bigint NOT NULL DEFAULT 0
);
CREATE INDEX records_due ON records (tenant_id, expires_at, id) WHERE expires_at IS NOT NULL;
"""


# The vector probe counts the vectors a caller sees (up to ``exact_below_rows``)
# to choose an exact or an index search: an index-only walk here instead of a heap
# walk (PostgreSQL only: SQLite's vector engine counts in memory). ``IF NOT EXISTS``:
# the migration was named 0008_vector_owner_counts before its branch met main's
# 0008-0012, and a database made then holds the index already.
_VECTOR_OWNERS = """
CREATE INDEX IF NOT EXISTS records_vector_owners
    ON records (tenant_id, user_id, scope, agent_id, embedding_model, status)
    WHERE embedding IS NOT NULL;
"""


# Room on each page for a new version of its rows: an update that changes no indexed
# column (a usage flush's access counts) is then heap-only, with no new entry in
# the HNSW or GIN index. Pages written before this keep their packing until the
# table is rewritten (``VACUUM FULL``). Measured in docs/evaluation.md ("Usage
# flushes on PostgreSQL").
_FILLFACTOR = "ALTER TABLE records SET (fillfactor = 80);"


def migrations(text_search: str) -> tuple[tuple[str, str], ...]:
    """The migrations in order, as (name, SQL); ``text_search`` is the configuration
    a new schema's ``tsvector`` column uses (an existing one keeps its own)."""
    return (
        ("0001_vector_extension", _EXTENSION),
        ("0002_meta", _META),
        ("0003_records", _RECORDS),
        ("0004_lexemes", _LEXEMES.format(config=text_search)),
        ("0005_audit", _AUDIT),
        ("0006_traces", _TRACES),
        ("0007_share_grants", _SHARE_GRANTS),
        ("0008_consolidation", _CONSOLIDATION),
        ("0009_merge_links", _MERGE_LINKS),
        ("0010_tombstones", _TOMBSTONES),
        ("0011_cache_generations", _CACHE_GENERATIONS),
        ("0012_sweeps", _SWEEPS),
        ("0013_vector_owner_counts", _VECTOR_OWNERS),
        ("0014_records_fillfactor", _FILLFACTOR),
    )
