-- earshot schema v14: knowledge chunks keep the PDF page they start on
-- (NULL for txt/md, and for chunks ingested before v14: re-ingest to fill
-- it), and the files that yielded no text are remembered for `doctor`.
ALTER TABLE knowledge_chunks ADD COLUMN page INTEGER;

-- One row per file the last ingest could not index (no text layer, empty,
-- not text, damaged…); removed when the file is ingested.
CREATE TABLE knowledge_skipped (
    path        TEXT PRIMARY KEY,            -- canonical absolute path
    reason      TEXT NOT NULL,               -- the one-line error
    no_text     INTEGER NOT NULL DEFAULT 0,  -- 1: the file yielded no text
    at          TEXT NOT NULL
);
