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

-- Every change to chunks_vec is logged here, so vector indexes catch up exactly: a
-- vector inserted out of id order (a background job, a retry, a repair, a re-insert
-- after a delete), rewritten in place or deleted. Indexes read ids above the highest
-- they hold and re-read logged ids below it (no count(*) over 1 KB rows on the read
-- path). The write path keeps the newest rows; an index behind that horizon rebuilds. Pruned to the newest rows
-- by the job worker; an index that fell behind the pruned horizon rebuilds.
CREATE TABLE chunks_vec_changes (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_rowid INTEGER NOT NULL
);

CREATE TRIGGER chunks_vec_changes_ai AFTER INSERT ON chunks_vec
BEGIN
    INSERT INTO chunks_vec_changes (chunk_rowid) VALUES (new.chunk_rowid);
END;

CREATE TRIGGER chunks_vec_changes_au AFTER UPDATE ON chunks_vec
BEGIN
    INSERT INTO chunks_vec_changes (chunk_rowid) VALUES (new.chunk_rowid);
END;

CREATE TRIGGER chunks_vec_changes_ad AFTER DELETE ON chunks_vec
BEGIN
    INSERT INTO chunks_vec_changes (chunk_rowid) VALUES (old.chunk_rowid);
END;
