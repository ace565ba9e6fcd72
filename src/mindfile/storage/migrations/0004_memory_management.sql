-- Memory management (issue 4): importance, pinning, expiry, consolidation, access stats.
-- Importance lives on chunks (what retrieval ranks); an event's chunks share it, and a
-- chunk shared by several events (content dedup) keeps the highest.

ALTER TABLE chunks ADD COLUMN importance REAL NOT NULL DEFAULT 0.5;
ALTER TABLE chunks ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE chunks ADD COLUMN expires_at TEXT;
ALTER TABLE chunks ADD COLUMN consolidated_at TEXT;
ALTER TABLE chunks ADD COLUMN last_accessed_at TEXT;
ALTER TABLE chunks ADD COLUMN access_count INTEGER NOT NULL DEFAULT 0;

CREATE INDEX idx_chunks_expires ON chunks (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX idx_chunks_session_importance ON chunks (session_id, importance);

-- Which events a chunk holds text of. A chunk is shared by every event of its session
-- with the same content (dedup), so chunk -> events is many-to-many; the sweep, quota
-- eviction and span consolidation need it exactly (an event whose chunks are all gone
-- is removed with them; a pinned chunk pins its events). Maintained by triggers, so
-- every write path (messages, notes, summaries) links its chunks without extra code:
-- a chunk is linked to the event at its sequence when it is inserted, and to the
-- event at its new sequence_end when dedup extends it. Chunks with no event (facts)
-- have no links.
CREATE TABLE event_chunks (
    session_id  TEXT NOT NULL,
    sequence    INTEGER NOT NULL,
    chunk_rowid INTEGER NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
    PRIMARY KEY (session_id, sequence, chunk_rowid),
    FOREIGN KEY (session_id, sequence)
        REFERENCES conversation_events (session_id, sequence) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX idx_event_chunks_chunk ON event_chunks (chunk_rowid);

CREATE TRIGGER event_chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT OR IGNORE INTO event_chunks (session_id, sequence, chunk_rowid)
    SELECT new.session_id, new.sequence_start, new.id
    WHERE EXISTS (SELECT 1 FROM conversation_events
                  WHERE session_id = new.session_id AND sequence = new.sequence_start);
END;
CREATE TRIGGER event_chunks_au AFTER UPDATE OF sequence_end ON chunks
WHEN new.sequence_end <> old.sequence_end BEGIN
    INSERT OR IGNORE INTO event_chunks (session_id, sequence, chunk_rowid)
    SELECT new.session_id, new.sequence_end, new.id
    WHERE EXISTS (SELECT 1 FROM conversation_events
                  WHERE session_id = new.session_id AND sequence = new.sequence_end);
END;

-- Stores made before this migration: link each chunk to the events at both ends of
-- its range (the only ones known for certain).
INSERT OR IGNORE INTO event_chunks (session_id, sequence, chunk_rowid)
SELECT c.session_id, e.sequence, c.id
FROM chunks AS c
JOIN conversation_events AS e
  ON e.session_id = c.session_id AND e.sequence IN (c.sequence_start, c.sequence_end);

-- Quotas per scope ('agent:{id}', 'user:{id}' or 'session:{id}'; see
-- docs/memory-management.md). NULL limit = unlimited. The eviction counters are
-- cumulative, for observability.
CREATE TABLE quotas (
    scope         TEXT PRIMARY KEY,
    max_items     INTEGER CHECK (max_items IS NULL OR max_items >= 0),
    max_bytes     INTEGER CHECK (max_bytes IS NULL OR max_bytes >= 0),
    policy        TEXT NOT NULL DEFAULT 'evict' CHECK (policy IN ('evict', 'fail')),
    evicted_items INTEGER NOT NULL DEFAULT 0,
    evicted_bytes INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);

-- Provenance of consolidation: one row per merge (near-duplicates folded into a
-- surviving chunk) or summary (an old span condensed into summary chunks).
-- sources_json lists what was folded in: merged chunks (id, text, range, importance)
-- or summarized event sequences.
CREATE TABLE consolidations (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    kind           TEXT NOT NULL CHECK (kind IN ('merge', 'summary')),
    session_id     TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    chunk_id       TEXT NOT NULL,
    sequence_start INTEGER NOT NULL,
    sequence_end   INTEGER NOT NULL,
    sources_json   TEXT NOT NULL,
    created_at     TEXT NOT NULL
);
CREATE INDEX idx_consolidations_chunk ON consolidations (chunk_id);
CREATE INDEX idx_consolidations_session ON consolidations (session_id, sequence_start);
