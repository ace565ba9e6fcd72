-- Optional LLM features (mindfile.llm): a log of failed model calls.
-- A task whose model call fails, or whose answer breaks the JSON contract, writes one
-- row here before raising, so a malformed answer is a recorded failure and never silent
-- data loss: raw_excerpt keeps the start of what the model said, details_json the
-- error's details (reason, HTTP status, schema errors...). Rows are removed only by
-- mindfile.llm.delete_llm_failures(); forgetting a session does not touch them.

CREATE TABLE llm_failures (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    task         TEXT NOT NULL,
    reason       TEXT NOT NULL,
    message      TEXT NOT NULL,
    model        TEXT,
    scope        TEXT,
    session_id   TEXT,
    raw_excerpt  TEXT,
    details_json TEXT NOT NULL DEFAULT '{}',
    created_at   TEXT NOT NULL
);
CREATE INDEX idx_llm_failures_task ON llm_failures (task, id);
