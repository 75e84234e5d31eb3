-- earshot schema v15: apps through Composio (issue 18).
--
-- The Composio Tool Router session of each user, created lazily on first
-- use and reused until Composio rejects it (`scope` says which server and
-- toolkits it was made for; another scope makes another session).
CREATE TABLE composio_sessions (
    user_id    TEXT NOT NULL,
    scope      TEXT NOT NULL,
    session_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (user_id, scope)
);
-- The links that authorise a toolkit (Gmail, GitHub, …), written when
-- `composio_connect` runs so any process (`earshot apps links`, the app)
-- can show them; `used_at` is set once a tool of that toolkit ran.
CREATE TABLE app_links (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id    TEXT NOT NULL,
    toolkit    TEXT NOT NULL,
    url        TEXT NOT NULL,
    created_at TEXT NOT NULL,
    used_at    TEXT
);
CREATE INDEX app_links_open ON app_links(user_id, used_at, id);
