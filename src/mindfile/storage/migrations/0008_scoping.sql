-- Privacy scoping (seed 003's data model): a session belongs to at most one user and
-- one channel; its events and chunks inherit both through session_id. NULL means
-- unscoped (stores made before this migration, callers that never pass a user).
-- Reads scoped to a user resolve that user's session ids here first, then filter the
-- derived indexes by session, as session filters always did (docs/privacy.md).
ALTER TABLE sessions ADD COLUMN user_id TEXT;
ALTER TABLE sessions ADD COLUMN channel TEXT;
CREATE INDEX idx_sessions_user_channel ON sessions (user_id, channel);

-- Notes and facts already live in per-user namespace sessions.
UPDATE sessions SET user_id = substr(session_id, length('memory:') + 1)
WHERE session_id LIKE 'memory:%' AND user_id IS NULL;
UPDATE sessions SET user_id = substr(session_id, length('facts:') + 1)
WHERE session_id LIKE 'facts:%' AND user_id IS NULL;
