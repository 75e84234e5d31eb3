-- earshot schema v9: timers, alarms and reminders (issue 15).
--
-- One row per timer/alarm/reminder. `state` moves pending → ringing →
-- done (or back to pending for a repeat), and pending/ringing → missed or
-- cancelled; every change bumps `rev`, so a scheduler can tell what
-- another process changed. The scheduler commits a row's new state before
-- it tells anyone, so nothing rings twice.
--
-- `anchor` says how `due_at` is kept: `delay` rows (a timer, "in 20
-- minutes") count down on the monotonic clock while earshot runs and
-- `due_at` is the wall time that countdown ends at; `clock` rows (an
-- alarm, a reminder at 9:30) are due at `local_at`, a local wall time,
-- whatever the zone's offset is then (`due_at` is its UTC instant as last
-- resolved).

CREATE TABLE timers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('timer', 'alarm', 'reminder')),
    label TEXT NOT NULL DEFAULT '',
    anchor TEXT NOT NULL CHECK (anchor IN ('delay', 'clock')),
    -- RFC 3339 UTC with milliseconds: sorts as text.
    due_at TEXT NOT NULL,
    -- Local wall time 'YYYY-MM-DDTHH:MM:SS' of a clock row (and of a
    -- repeating alarm's current occurrence, kept through a snooze).
    local_at TEXT,
    -- The length a delay row was set for, in seconds ("your 5-minute timer").
    duration_s INTEGER,
    -- 'daily', 'weekdays', 'weekends' or days like 'mon,wed'; NULL = once.
    repeat TEXT,
    state TEXT NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'ringing', 'done', 'missed', 'cancelled')),
    rev INTEGER NOT NULL DEFAULT 1,
    rang_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE INDEX timers_active ON timers(state, due_at);
