-- earshot schema v10: the calendar (issue 15), synced two ways over CalDAV.
--
-- One row per iCalendar resource (a UID: the series and its overridden
-- occurrences), its text kept whole so an edit written back to the server
-- keeps every property earshot does not know. `href`/`etag` are the
-- server's name and version of it (NULL until first synced). The sync
-- queue is the rows themselves: `dirty` = a local add or edit not yet on
-- the server, `deleted` = a local delete not yet on the server (the row
-- stays, hidden, until the server has it). A change is queued in the same
-- statement that makes it, so an offline change is never lost.

CREATE TABLE calendar_events (
    id         INTEGER PRIMARY KEY,
    uid        TEXT NOT NULL UNIQUE,
    title      TEXT NOT NULL,
    ics        TEXT NOT NULL,
    href       TEXT,
    etag       TEXT,
    dirty      INTEGER NOT NULL DEFAULT 0,
    deleted    INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL
);

-- The losing side of every conflict (newest wins; nothing is thrown away).
CREATE TABLE calendar_conflicts (
    id         INTEGER PRIMARY KEY,
    uid        TEXT NOT NULL,
    kept       TEXT NOT NULL CHECK (kept IN ('local', 'server')),
    loser_ics  TEXT NOT NULL,
    created_at TEXT NOT NULL
);

-- One row: what doctor shows.
CREATE TABLE calendar_sync (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    last_attempt TEXT,
    last_success TEXT,
    last_error   TEXT,
    failures     INTEGER NOT NULL DEFAULT 0
);
