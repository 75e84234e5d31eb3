-- earshot schema v4: embeddings kept in SQLite (the source of truth) so a
-- vector index file can be rebuilt at any time without re-embedding.
--
-- Each collection (memories, conversations, later knowledge chunks) has a
-- generation counter bumped by every change; each vector row remembers
-- the generation that last touched it. An index file records the
-- generation it reflects, so a reader catches up with one query
-- (`generation > ?`). A deleted item keeps its row with a NULL embedding
-- (a tombstone) so readers behind it learn about the deletion.
CREATE TABLE vector_collections (
    name        TEXT PRIMARY KEY,
    generation  INTEGER NOT NULL DEFAULT 0
);
INSERT INTO vector_collections (name, generation) VALUES ('memories', 0), ('conversations', 0);

CREATE TABLE vectors (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    collection  TEXT NOT NULL,
    item_id     INTEGER NOT NULL,
    user_id     TEXT NOT NULL,
    -- The usearch key: (users.rowid << 40) | item_id, stable per (user, item).
    key         INTEGER NOT NULL,
    model       TEXT NOT NULL,
    -- Little-endian f32 × dims, L2-normalised; NULL = deleted.
    embedding   BLOB,
    generation  INTEGER NOT NULL,
    UNIQUE (collection, item_id)
);
CREATE INDEX vectors_generation ON vectors(collection, generation);

-- Whoever deletes a memory or a conversation (the memory API, a cleanup
-- command, a cascade), its vector becomes a tombstone in the same
-- transaction, so an index can never return a deleted item for long.
CREATE TRIGGER memories_vec_ad AFTER DELETE ON memories BEGIN
    UPDATE vector_collections SET generation = generation + 1 WHERE name = 'memories';
    UPDATE vectors SET embedding = NULL,
        generation = (SELECT generation FROM vector_collections WHERE name = 'memories')
    WHERE collection = 'memories' AND item_id = old.id;
END;
-- A text changed outside the memory API: its embedding is no longer valid;
-- the memory API writes the new embedding right after, in the same
-- transaction, and the next open re-embeds anything left without one.
CREATE TRIGGER memories_vec_au AFTER UPDATE OF text ON memories BEGIN
    UPDATE vector_collections SET generation = generation + 1 WHERE name = 'memories';
    UPDATE vectors SET embedding = NULL,
        generation = (SELECT generation FROM vector_collections WHERE name = 'memories')
    WHERE collection = 'memories' AND item_id = old.id;
END;
CREATE TRIGGER conversations_vec_ad AFTER DELETE ON conversations BEGIN
    UPDATE vector_collections SET generation = generation + 1 WHERE name = 'conversations';
    UPDATE vectors SET embedding = NULL,
        generation = (SELECT generation FROM vector_collections WHERE name = 'conversations')
    WHERE collection = 'conversations' AND item_id = old.id;
END;
