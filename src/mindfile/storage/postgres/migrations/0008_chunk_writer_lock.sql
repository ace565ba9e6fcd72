-- One chunk writer at a time (issue 13; docs/postgres.md, "Concurrency").
--
-- The derived indexes (BM25, vectors) catch up by "chunk ids above the highest I hold"
-- and by change-log seq. Identity values are handed out when a row is inserted, not
-- when its transaction commits, so two concurrent writers could commit ids 11 and 10
-- in that order and a reader that saw 11 would never read 10. SQLite avoids this with
-- its single writer; this migration does the same for the tables the indexes read:
-- every statement that writes chunks (or the chunk columns the indexes hold) or
-- chunks_vec first takes a transaction-scoped advisory lock, held until commit. Ids
-- of chunks and seqs of chunks_changes / chunks_vec_changes (written by these tables'
-- row triggers) are then assigned only by the one transaction holding the lock, and
-- that transaction is visible before the next writer gets the lock: ids and seqs are
-- in commit order. Readers take no lock and never wait.
--
-- The lock key is fixed: 7883097498056551283, "mfchunks" in ASCII (big-endian); the
-- Python side takes the same key first in every store method that writes chunks or
-- vectors (storage/postgres/writer_lock.py, which tests check against this file).
--
-- A statement-level BEFORE trigger runs before the statement's first row is formed,
-- so before the identity default (nextval) of any row: no chunk id exists before the
-- lock. It also fires for statements that write no row, and for the deletes a foreign
-- key cascades into chunks (deleting a session).
--
-- UPDATE takes the lock only for the columns the derived indexes read (text, context,
-- session, id, creation time): importance, pins, use counts, expiry and hashes change
-- often, on the read path too, and no index holds them.

CREATE FUNCTION mindfile_chunk_writer_lock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7883097498056551283);
    RETURN NULL;
END
$$;

CREATE TRIGGER chunks_writer_lock
BEFORE INSERT OR DELETE
    OR UPDATE OF id, session_id, chunk_text, context_before, context_after, created_at
ON chunks FOR EACH STATEMENT EXECUTE FUNCTION mindfile_chunk_writer_lock();

CREATE TRIGGER chunks_vec_writer_lock BEFORE INSERT OR UPDATE OR DELETE ON chunks_vec
FOR EACH STATEMENT EXECUTE FUNCTION mindfile_chunk_writer_lock();
