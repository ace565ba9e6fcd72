-- The embedding cache (SQLite 0011): document vectors by (model, hash of the text).
-- The vector stays a little-endian float32 blob (bytea): the cache is read by key only.

CREATE TABLE embedding_cache (
    model_id       text COLLATE "C" NOT NULL,
    text_hash      text COLLATE "C" NOT NULL,
    embedding_blob bytea NOT NULL,
    created_at     text COLLATE "C" NOT NULL,
    last_used_at   text COLLATE "C" NOT NULL,
    PRIMARY KEY (model_id, text_hash)
);
CREATE INDEX embedding_cache_lru ON embedding_cache (last_used_at);
