-- SQLite 0018: the authors of chunks (metadata "author", author match) read from a
-- partial index instead of the chunk rows.
CREATE INDEX idx_chunks_author ON chunks (id, (metadata_json::jsonb ->> 'author'))
WHERE jsonb_typeof(metadata_json::jsonb -> 'author') = 'string';
