-- Deletion that really deletes (docs/privacy.md): FTS5 keeps a deleted chunk's terms in
-- its index segments until they are merged. Any chunk delete raises this flag; the
-- engine merges the segments ('optimize') and truncates the WAL when it sees the flag
-- on close, and Mindfile.purge() / forget_user() do it at once
-- (mindfile.storage.erase). INSERT OR IGNORE keeps bulk deletes cheap.
CREATE TRIGGER chunks_purge_pending AFTER DELETE ON chunks BEGIN
    INSERT OR IGNORE INTO store_meta (key, value) VALUES ('purge_pending', '1');
END;
