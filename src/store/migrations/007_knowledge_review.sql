-- earshot schema v7: the local knowledge base (R-RAG), feedback and expert
-- review (R-OBS), and the turn log's R-OBS columns.

-- One row per ingested file. The content hash decides skip / replace.
CREATE TABLE knowledge_documents (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    path          TEXT NOT NULL UNIQUE,      -- canonical absolute path
    title         TEXT NOT NULL,
    content_hash  TEXT NOT NULL,             -- sha256 of the file's bytes
    bytes         INTEGER NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('txt','md','pdf')),
    tier          INTEGER NOT NULL CHECK (tier IN (1,2,3)),
    tags_json     TEXT NOT NULL DEFAULT '[]',
    strategy      TEXT NOT NULL CHECK (strategy IN ('section','paragraph')),
    analysed_by   TEXT NOT NULL,             -- llm:<model> | heuristic:<rule> | plan
    chunk_count   INTEGER NOT NULL DEFAULT 0,
    ingested_at   TEXT NOT NULL
);

-- Chunks in document order. Embeddings live in `vectors` (collection
-- 'knowledge', item_id = chunk id) as little-endian f32 BLOBs, so the
-- usearch file can be rebuilt without re-embedding.
CREATE TABLE knowledge_chunks (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id   INTEGER NOT NULL REFERENCES knowledge_documents(id) ON DELETE CASCADE,
    ordinal       INTEGER NOT NULL,          -- position in the document, from 0
    section       TEXT,                      -- heading the chunk sits under
    text          TEXT NOT NULL,
    UNIQUE (document_id, ordinal)
);
-- Porter stemming: "descale" finds "descaling" and "descaled".
CREATE VIRTUAL TABLE knowledge_fts USING fts5(text, section, content='knowledge_chunks', content_rowid='id', tokenize='porter unicode61');
CREATE TRIGGER knowledge_chunks_ai AFTER INSERT ON knowledge_chunks BEGIN
    INSERT INTO knowledge_fts(rowid, text, section) VALUES (new.id, new.text, new.section);
END;
CREATE TRIGGER knowledge_chunks_ad AFTER DELETE ON knowledge_chunks BEGIN
    INSERT INTO knowledge_fts(knowledge_fts, rowid, text, section) VALUES ('delete', old.id, old.text, old.section);
    INSERT INTO vector_collections (name, generation) VALUES ('knowledge', 1)
        ON CONFLICT(name) DO UPDATE SET generation = generation + 1;
    UPDATE vectors SET embedding = NULL,
        generation = (SELECT generation FROM vector_collections WHERE name = 'knowledge')
    WHERE collection = 'knowledge' AND item_id = old.id;
END;

-- What the search_knowledge tool retrieved, until the turn that asked is
-- logged: the turn-log trigger below claims the rows written since the
-- turn started and copies them into turn_log.retrieval_json.
CREATE TABLE knowledge_retrievals (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id     INTEGER REFERENCES turn_log(id) ON DELETE CASCADE,
    created_at  TEXT NOT NULL,
    payload     TEXT NOT NULL                -- JSON: query, ids, scores, rerank scores, snippets
);
CREATE INDEX knowledge_retrievals_unclaimed ON knowledge_retrievals(turn_id, created_at);

-- R-OBS columns of the turn log. Writers put `memories` and `models` into
-- extra_json (TurnRecord.extra); the trigger lifts them into columns.
ALTER TABLE turn_log ADD COLUMN memories_json TEXT NOT NULL DEFAULT '[]';
ALTER TABLE turn_log ADD COLUMN retrieval_json TEXT NOT NULL DEFAULT '[]';
ALTER TABLE turn_log ADD COLUMN models_json TEXT NOT NULL DEFAULT '{}';
CREATE TRIGGER turn_log_obs AFTER INSERT ON turn_log BEGIN
    UPDATE knowledge_retrievals SET turn_id = new.id
        WHERE turn_id IS NULL AND created_at >= new.started_at;
    UPDATE turn_log SET
        memories_json = COALESCE(json_extract(new.extra_json, '$.memories'), '[]'),
        retrieval_json = COALESCE(json_extract(new.extra_json, '$.retrieval'),
            (SELECT json_group_array(json(payload)) FROM knowledge_retrievals WHERE turn_id = new.id)),
        models_json = COALESCE(json_extract(new.extra_json, '$.models'),
            CASE WHEN new.model IS NULL THEN '{}' ELSE json_object('answer', new.model) END)
    WHERE id = new.id;
END;

-- A user's signal on an answer: `not_helpful` (UX) or `error`
-- (misinformation, goes to the priority review queue).
CREATE TABLE feedback (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id     INTEGER NOT NULL REFERENCES turn_log(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('not_helpful','error')),
    note        TEXT,
    created_at  TEXT NOT NULL
);
CREATE INDEX feedback_turn ON feedback(turn_id);

-- One rubric per (turn, reviewer). The verdict is a generated column: it
-- can never be typed, so rubric and verdict cannot contradict each other.
CREATE TABLE reviews (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id       INTEGER NOT NULL REFERENCES turn_log(id) ON DELETE CASCADE,
    reviewer      TEXT NOT NULL,
    correctness   REAL NOT NULL CHECK (correctness IN (0, 0.5, 1)),
    completeness  INTEGER NOT NULL CHECK (completeness IN (0, 1)),
    clarity       INTEGER NOT NULL CHECK (clarity IN (0, 1)),
    efficiency    INTEGER NOT NULL CHECK (efficiency IN (0, 1)),
    verdict       TEXT GENERATED ALWAYS AS (
                      CASE WHEN correctness = 1 AND completeness = 1 THEN 'GOOD' ELSE 'BAD' END
                  ) STORED,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    UNIQUE (turn_id, reviewer)
);
