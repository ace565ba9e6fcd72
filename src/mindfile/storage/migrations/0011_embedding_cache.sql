-- The embedding cache (issue 10; docs/embedding-cache.md): document
-- vectors by (embedding model, hash of the chunk text), shared by every session and
-- agent of the store, consulted before an embedder is called. last_used_at orders the
-- LRU eviction when a size bound is set.
CREATE TABLE embedding_cache (
    model_id TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    embedding_blob BLOB NOT NULL,
    created_at TEXT NOT NULL,
    last_used_at TEXT NOT NULL,
    PRIMARY KEY (model_id, text_hash)
) WITHOUT ROWID;

CREATE INDEX embedding_cache_lru ON embedding_cache (last_used_at);

-- The hash of each chunk's own text (NULL for chunks written before this migration):
-- what the cache is keyed by, so a purge can drop the vectors of texts no longer stored
-- anywhere (deleted means gone) and re-embedding can find a chunk's cached vector.
ALTER TABLE chunks ADD COLUMN text_hash TEXT;
