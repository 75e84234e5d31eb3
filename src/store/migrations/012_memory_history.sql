-- earshot schema v12: a memory superseded on the device keeps its old text.
--
-- With no LLM, "my car is parked on level 5" after "my car is on level 3"
-- replaces the older memory's text (memory::supersede decides it). The
-- text it had is kept here, as history: it is never recalled or listed as
-- a memory, and it goes when the memory is deleted.
CREATE TABLE memory_history (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id   INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    text        TEXT NOT NULL,
    replaced_at TEXT NOT NULL,
    -- The cosine between the old and the new statement.
    similarity  REAL
);
CREATE INDEX memory_history_memory ON memory_history(memory_id);
