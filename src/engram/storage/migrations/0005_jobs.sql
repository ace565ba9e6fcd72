-- Background indexing (issue 4): a durable queue of embedding jobs, and a change log
-- that keeps derived vector indexes exact when vectors arrive out of chunk-id order.
--  * One job per chunk (chunk_rowid UNIQUE): the write path inserts it in the same
--    transaction as the chunk; forgetting the chunk deletes the job by cascade.
--  * status: pending -> running (leased: claim_token, claimed_by, claim_expires_at) ->
--    done, or back to pending with retry_count + 1 and a backed-off next_retry_at, or
--    failed (the dead letter) after the worker's max_retries. A running job whose lease
--    expired (its worker died) is put back to pending by the next worker.
--  * Timestamps are ISO-8601 UTC text with microseconds, so text order is time order.

CREATE TABLE memory_jobs (
    job_id           INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_rowid      INTEGER NOT NULL UNIQUE REFERENCES chunks (id) ON DELETE CASCADE,
    status           TEXT NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'running', 'done', 'failed')),
    retry_count      INTEGER NOT NULL DEFAULT 0,
    next_retry_at    TEXT NOT NULL,
    last_error       TEXT,
    claim_token      TEXT,
    claimed_by       TEXT,
    claim_expires_at TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
CREATE INDEX idx_jobs_status_next ON memory_jobs (status, next_retry_at);

-- Vector indexes catch up by "new ids are above the highest I hold" plus a row count.
-- A vector inserted for a chunk older than the newest chunk ever created (a background
-- job, a retry, a repair) breaks that rule, and so does a vector rewritten in place; such
-- changes are logged here and indexes re-read the logged ids. Pruned to the newest rows
-- by the job worker; an index that fell behind the pruned horizon rebuilds.
CREATE TABLE chunks_vec_changes (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_rowid INTEGER NOT NULL
);

CREATE TRIGGER chunks_vec_changes_ai AFTER INSERT ON chunks_vec
WHEN new.chunk_rowid < coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'chunks'), 0)
BEGIN
    INSERT INTO chunks_vec_changes (chunk_rowid) VALUES (new.chunk_rowid);
END;

CREATE TRIGGER chunks_vec_changes_au AFTER UPDATE ON chunks_vec
BEGIN
    INSERT INTO chunks_vec_changes (chunk_rowid) VALUES (new.chunk_rowid);
END;
