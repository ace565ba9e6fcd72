-- Sequences never go backwards (issue 8): every session remembers the highest sequence
-- ever stored in it, so deleting its newest events (a note, the expiry sweep, quota
-- eviction, consolidation) never lets a later write reuse their numbers. NULL means
-- nothing was stored yet. Maintained by the write paths in mindfile.storage.log; a
-- forgotten session (its row deleted) starts again from scratch.
ALTER TABLE sessions ADD COLUMN sequence_high_water INTEGER;

-- Stores made before this migration: the highest of the session's events, the chunks
-- indexed at a sequence without an event (facts), and the last sequence the write path
-- recorded in session_state (which already survived deleted notes).
UPDATE sessions SET sequence_high_water = (
    SELECT max(v) FROM (
        SELECT max(e.sequence) AS v FROM conversation_events AS e
        WHERE e.session_id = sessions.session_id
        UNION ALL
        SELECT max(c.sequence_end) FROM chunks AS c
        WHERE c.session_id = sessions.session_id
        UNION ALL
        SELECT json_extract(st.state_json, '$.last_sequence') FROM session_state AS st
        WHERE st.session_id = sessions.session_id
          AND json_type(st.state_json, '$.last_sequence') = 'integer'
    )
);
