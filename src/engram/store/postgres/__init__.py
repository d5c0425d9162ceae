"""The PostgreSQL store: records, lexical (``tsvector``) and vector (pgvector HNSW)
indexes in one database, behind the ``engram.store.contract`` protocols."""
