-- Time-aware retrieval (issue 14; docs/retrieval.md): when an event happened, as the
-- caller says (`store(..., occurred_at=...)`), which may be long before it was stored
-- (an imported chat history, a diary). Chunks carry the time of the event that made
-- them (the newest, when several events share a chunk), so search can boost memories
-- from the time a query names ("last May", "two weeks ago") without a join.
--
-- NULL means "when it was stored": readers use coalesce(occurred_at, created_at). Rows
-- written before this migration, and every write that gives no occurred_at (notes,
-- facts, summaries, file sync), keep NULL, so the migration rewrites nothing and is
-- instant on any store.
ALTER TABLE conversation_events ADD COLUMN occurred_at TEXT;
ALTER TABLE chunks ADD COLUMN occurred_at TEXT;
