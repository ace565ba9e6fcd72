-- Author match (docs/retrieval.md; mindfile.retrieve.authors): a search for more than ten
-- results reads the author (metadata "author") of up to ~300 candidates. From the chunk
-- rows (text inline, ~1 KB a chunk of chat) that cost ~1 ms at 117k chunks, whether the
-- store has authors or not; from this partial index it is index probes only, and a store
-- without authors has an empty index.
CREATE INDEX idx_chunks_author ON chunks (id, json_extract(metadata_json, '$.author'))
WHERE json_type(metadata_json, '$.author') = 'text';
