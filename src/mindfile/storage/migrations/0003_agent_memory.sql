-- Agent memory: the notes catalog, key/value facts and their history.
--  * A note is a conversation_event (payload kind "note") in its namespace session plus
--    the chunks indexed from it. `notes` maps (session, note_id) to that event, so a
--    note id is unique per namespace and lookups never parse payloads; deleting the
--    event (or forgetting the session) removes the catalog row by cascade.
--  * Scratchpad and rolling-summary state live in session_state.state_json (no table).
--  * Facts are unique per (scope, category, key); a superseded or deleted value moves to
--    fact_history. Each fact is also indexed as a chunk in session 'facts:{scope}'.

CREATE TABLE notes (
    session_id TEXT NOT NULL,
    note_id    TEXT NOT NULL,
    sequence   INTEGER NOT NULL,
    PRIMARY KEY (session_id, note_id),
    UNIQUE (session_id, sequence),
    FOREIGN KEY (session_id, sequence)
        REFERENCES conversation_events (session_id, sequence) ON DELETE CASCADE
);

-- Finds a note's chunks without scanning its session.
CREATE INDEX idx_chunks_note ON chunks (session_id, json_extract(metadata_json, '$.note_id'));

CREATE TABLE facts (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    scope      TEXT NOT NULL,
    category   TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    source     TEXT NOT NULL CHECK (source IN ('agent', 'user')),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (scope, category, key)
);

CREATE TABLE fact_history (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    scope         TEXT NOT NULL,
    category      TEXT NOT NULL,
    key           TEXT NOT NULL,
    value         TEXT NOT NULL,
    source        TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    superseded_at TEXT NOT NULL,
    reason        TEXT NOT NULL CHECK (reason IN ('updated', 'deleted'))
);
CREATE INDEX idx_fact_history_key ON fact_history (scope, category, key, id);
