-- The project was renamed to Mindfile in 0.2.0. Stores made by 0.1.0 recorded the
-- bundled model as 'engram/minilm-l6-static-256'; the same weights are now
-- 'mindfile/minilm-l6-static-256'. Rename the id in place (the vectors are unchanged),
-- without logging every vector row as changed.
DROP TRIGGER chunks_vec_changes_au;

UPDATE chunks_vec SET embedding_model = 'mindfile/minilm-l6-static-256'
WHERE embedding_model = 'engram/minilm-l6-static-256';

UPDATE store_meta SET value = 'mindfile/minilm-l6-static-256'
WHERE key = 'embedding_model' AND value = 'engram/minilm-l6-static-256';

CREATE TRIGGER chunks_vec_changes_au AFTER UPDATE ON chunks_vec
BEGIN
    INSERT INTO chunks_vec_changes (chunk_rowid) VALUES (new.chunk_rowid);
END;
