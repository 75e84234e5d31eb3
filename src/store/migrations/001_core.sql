-- earshot schema v1: the conversation tables, the turn log, the device's
-- todo list, long-term memories (+ FTS5), background jobs, tree state.
CREATE TABLE users (
    id          TEXT PRIMARY KEY,
    email       TEXT,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);
INSERT INTO users (id, email) VALUES ('user-1', NULL);

CREATE TABLE conversations (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id      TEXT NOT NULL REFERENCES users(id),
    title        TEXT,
    overview     TEXT,
    action_items TEXT,
    mode         TEXT CHECK (mode IS NULL OR mode IN ('tree','graph')),
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
CREATE INDEX conversations_user ON conversations(user_id, updated_at);

CREATE TABLE messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role            TEXT NOT NULL CHECK (role IN ('user','assistant')),
    content         TEXT NOT NULL,
    timestamp       TEXT NOT NULL
);
CREATE INDEX messages_conversation ON messages(conversation_id, id);

CREATE TABLE turn_log (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
    user_id         TEXT NOT NULL,
    started_at      TEXT NOT NULL,
    source          TEXT NOT NULL,           -- text | voice | api | wyoming
    input           TEXT NOT NULL,
    response        TEXT,
    mode            TEXT,                    -- tree | graph
    route           TEXT,                    -- simple | context | persona | tree
    route_by        TEXT,                    -- keyword | classifier | llm | default | tree
    confidence      REAL,
    intent          TEXT,
    intent_confidence REAL,
    node            TEXT,                    -- the node that answered
    model           TEXT,
    outcome         TEXT NOT NULL,           -- ok | error | cancelled
    error           TEXT,
    notes           TEXT,                    -- why a fallback happened
    timings_json    TEXT NOT NULL DEFAULT '{}',
    tools_json      TEXT NOT NULL DEFAULT '[]',
    extra_json      TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX turn_log_conversation ON turn_log(conversation_id);

CREATE TABLE todos (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id      TEXT NOT NULL REFERENCES users(id),
    title        TEXT NOT NULL,
    done         INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT NOT NULL,
    completed_at TEXT
);
CREATE INDEX todos_user ON todos(user_id, done);

CREATE TABLE memories (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id     TEXT NOT NULL REFERENCES users(id),
    text        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX memories_user ON memories(user_id);
CREATE VIRTUAL TABLE memories_fts USING fts5(text, content='memories', content_rowid='id');
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER memories_au AFTER UPDATE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
END;

-- Work done after the reply (summaries, memory extraction, index upserts).
-- Persisted so a restart resumes it; written in the turn's transaction.
CREATE TABLE jobs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT,
    created_at  TEXT NOT NULL
);

-- The intent tree's per-conversation phase and state (R-TREE).
CREATE TABLE tree_state (
    conversation_id INTEGER PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
    phase           TEXT NOT NULL DEFAULT 'idle',
    state_json      TEXT NOT NULL DEFAULT '{}',
    updated_at      TEXT NOT NULL
);

-- Device-wide state (do-not-disturb, last answer, volume).
CREATE TABLE device_state (
    key         TEXT PRIMARY KEY,
    value       TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
