"""SQL of the job queue (table ``memory_jobs``, migration 0005).

Every time is ISO-8601 UTC text with microseconds, so comparing text compares time.
"""

from __future__ import annotations

# Dead workers: a running job whose lease expired goes back to pending (the lost
# attempt counts as a failure), or to the dead letter when out of retries.
RECOVER_EXPIRED = """
UPDATE memory_jobs SET
    retry_count = retry_count + 1,
    status = CASE WHEN retry_count + 1 > :max_retries THEN 'failed' ELSE 'pending' END,
    next_retry_at = :now,
    last_error = 'lease expired: worker ' || coalesce(claimed_by, '?')
                 || ' stopped before finishing',
    claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL,
    updated_at = :now
WHERE status = 'running' AND claim_expires_at <= :now
RETURNING status
"""

# Holders of live leases, checked for liveness (mindfile.jobs.owner).
RUNNING_OWNERS = """
SELECT DISTINCT claimed_by FROM memory_jobs
WHERE status = 'running' AND claim_expires_at > ?1 AND claimed_by IS NOT NULL
"""

# A worker that is gone (killed) before its lease expired: recovered like an expired
# lease, at once.
RECOVER_ORPHANED = """
UPDATE memory_jobs SET
    retry_count = retry_count + 1,
    status = CASE WHEN retry_count + 1 > :max_retries THEN 'failed' ELSE 'pending' END,
    next_retry_at = :now,
    last_error = 'worker ' || claimed_by || ' is gone (killed before finishing)',
    claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL,
    updated_at = :now
WHERE status = 'running' AND claimed_by IN (SELECT value FROM json_each(:owners))
RETURNING status
"""

RUNNING_LEASES = """
SELECT claimed_by, claim_expires_at FROM memory_jobs WHERE status = 'running'
"""

FIRST_DUE = """
SELECT job_id, retry_count FROM memory_jobs
WHERE status = 'pending' AND next_retry_at <= ?
ORDER BY next_retry_at, job_id
LIMIT 1
"""

_LEASE = """
UPDATE memory_jobs SET
    status = 'running', claim_token = :token, claimed_by = :worker,
    claim_expires_at = :expires, updated_at = :now
"""

# A retried job is claimed alone, so one chunk the embedder rejects cannot keep failing
# (and finally dead-letter) the batch it arrived with.
CLAIM_ONE = (
    _LEASE
    + """WHERE job_id = :job_id AND status = 'pending'
RETURNING job_id, chunk_rowid, retry_count
"""
)

CLAIM_FRESH = (
    _LEASE
    + """WHERE job_id IN (
    SELECT job_id FROM memory_jobs
    WHERE status = 'pending' AND retry_count = 0 AND next_retry_at <= :now
    ORDER BY next_retry_at, job_id
    LIMIT :limit
)
RETURNING job_id, chunk_rowid, retry_count
"""
)

CHUNK_TEXTS = """
SELECT id, chunk_text FROM chunks WHERE id IN (SELECT value FROM json_each(?))
"""

# Written only while the job is still ours; ON CONFLICT rewrites a vector only when it
# was made by another model (a repair), so a replayed job is a no-op.
UPSERT_VECTOR = """
INSERT INTO chunks_vec (chunk_rowid, embedding_blob, embedding_model)
SELECT ?1, ?2, ?3 WHERE EXISTS (
    SELECT 1 FROM memory_jobs WHERE job_id = ?4 AND claim_token = ?5 AND status = 'running'
)
ON CONFLICT (chunk_rowid) DO UPDATE SET
    embedding_blob = excluded.embedding_blob,
    embedding_model = excluded.embedding_model
WHERE chunks_vec.embedding_model != excluded.embedding_model
"""

MARK_DONE = """
UPDATE memory_jobs SET
    status = 'done', claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL,
    updated_at = ?1
WHERE job_id = ?2 AND claim_token = ?3 AND status = 'running'
"""

MARK_FAILED_ATTEMPT = """
UPDATE memory_jobs SET
    status = ?1, retry_count = ?2, next_retry_at = ?3, last_error = ?4,
    claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL, updated_at = ?5
WHERE job_id = ?6 AND claim_token = ?7 AND status = 'running'
"""

# Handing a claim back untouched (the worker was interrupted, not the embedder).
RELEASE = """
UPDATE memory_jobs SET
    status = 'pending', claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL,
    updated_at = ?1
WHERE job_id = ?2 AND claim_token = ?3 AND status = 'running'
"""

# The reconciler's enqueue: a new job, or an old one (done / failed) reset to pending.
ENQUEUE = """
INSERT INTO memory_jobs (chunk_rowid, status, next_retry_at, created_at, updated_at)
VALUES (?1, 'pending', ?2, ?2, ?2)
ON CONFLICT (chunk_rowid) DO UPDATE SET
    status = 'pending', retry_count = 0, next_retry_at = ?2, last_error = NULL,
    claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL, updated_at = ?2
"""

RETRY_FAILED = """
UPDATE memory_jobs SET
    status = 'pending', retry_count = 0, next_retry_at = ?1, updated_at = ?1
WHERE status = 'failed'
"""

PRUNE_DONE = "DELETE FROM memory_jobs WHERE status = 'done' AND updated_at < ?"

COUNT_BY_STATUS = "SELECT status, count(*) FROM memory_jobs GROUP BY status"

COUNT_DUE = """
SELECT
    (SELECT count(*) FROM memory_jobs WHERE status = 'pending' AND next_retry_at <= ?1)
  + (SELECT count(*) FROM memory_jobs WHERE status = 'running' AND claim_expires_at <= ?1)
"""

OLDEST_WAITING = """
SELECT min(created_at) FROM memory_jobs WHERE status IN ('pending', 'running')
"""

NEXT_RETRY = """
SELECT min(next_retry_at) FROM memory_jobs WHERE status = 'pending' AND next_retry_at > ?
"""

LIST_JOBS = """
SELECT j.job_id, j.chunk_rowid, c.chunk_id, c.session_id, j.status, j.retry_count,
       j.next_retry_at, j.last_error, j.claimed_by, j.claim_expires_at, j.created_at,
       j.updated_at
FROM memory_jobs AS j JOIN chunks AS c ON c.id = j.chunk_rowid
WHERE (?1 IS NULL OR j.status = ?1)
ORDER BY j.job_id
LIMIT ?2
"""
