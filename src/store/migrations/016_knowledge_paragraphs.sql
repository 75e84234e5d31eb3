-- earshot schema v16: one vector per paragraph of a knowledge chunk that
-- has two or more (blank-line separated), written at ingest, so the
-- search can order its first candidates by their best paragraph
-- (knowledge::paragraph) without embedding them at question time. A
-- chunk ingested before v16 has none; the search then embeds its
-- paragraphs on the spot (re-ingest to store them).
CREATE TABLE knowledge_paragraph_vectors (
    chunk_id    INTEGER NOT NULL REFERENCES knowledge_chunks(id) ON DELETE CASCADE,
    ordinal     INTEGER NOT NULL,            -- paragraph position in the chunk
    model       TEXT NOT NULL,               -- the embedder's model id
    embedding   BLOB NOT NULL,               -- little-endian f32, L2-normalised
    PRIMARY KEY (chunk_id, ordinal)
) WITHOUT ROWID;
