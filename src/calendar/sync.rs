//! Two-way sync between the local calendar and one CalDAV collection.
//!
//! One pass: list the server's resources with their ETags, then for each
//! local row and each server resource decide:
//!
//! | local | server | action |
//! |---|---|---|
//! | new (no href) | — | PUT `If-None-Match: *` |
//! | edited | same ETag | PUT `If-Match: etag` |
//! | edited | other ETag | conflict: the newer LAST-MODIFIED/DTSTAMP wins |
//! | unchanged | other ETag | GET, replace the local copy |
//! | unchanged | gone | deleted locally |
//! | edited | gone | PUT again (the local edit is kept) |
//! | deleted | present | DELETE `If-Match: etag` (412: the server's newer copy is kept) |
//! | — | new | GET, insert |
//!
//! A conflict keeps both sides' data: the winner becomes the event, the
//! loser's iCalendar is kept in `calendar_conflicts` and logged. Network
//! work happens before each local write, and each local write is one
//! statement, so a failure half-way leaves every row either done or still
//! queued — the next pass picks it up. A resource the server sends that is
//! not valid iCalendar is skipped with one line and nothing of it stored.

use std::time::Duration;

use rusqlite::OptionalExtension;

use super::caldav::{same_href, CalDav, DavError, Listed};
use super::{ical, row, Calendar, Row, ROW_COLUMNS};
use crate::cancel::CancelToken;
use crate::store::StoreError;

/// Why a sync did not complete; one line, and nothing is lost.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("no CalDAV server is configured; set calendar.caldav_url (or EARSHOT_CALDAV_URL)")]
    NotConfigured,
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Dav(#[from] DavError),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// What one pass moved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Local adds and edits written to the server (titles).
    pub pushed: Vec<String>,
    /// Local deletes done on the server.
    pub deleted_remote: Vec<String>,
    /// Server events new or changed here.
    pub pulled: Vec<String>,
    /// Events deleted here because the server deleted them.
    pub deleted_local: Vec<String>,
    /// Conflicts resolved (one line each: who won).
    pub conflicts: Vec<String>,
    /// Server resources skipped (unreadable), one line each.
    pub skipped: Vec<String>,
}

impl SyncReport {
    /// One line per change, for `calendar sync`.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        out.extend(self.pushed.iter().map(|t| format!("sent: {t}")));
        out.extend(
            self.deleted_remote
                .iter()
                .map(|t| format!("deleted on the server: {t}")),
        );
        out.extend(self.pulled.iter().map(|t| format!("received: {t}")));
        out.extend(
            self.deleted_local
                .iter()
                .map(|t| format!("deleted here (gone from the server): {t}")),
        );
        out.extend(self.conflicts.iter().map(|t| format!("conflict: {t}")));
        out.extend(self.skipped.iter().map(|t| format!("skipped: {t}")));
        out
    }
}

/// What doctor shows: the last attempt and success, the last error and
/// how many local changes wait for the server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncState {
    pub last_attempt: Option<String>,
    pub last_success: Option<String>,
    pub last_error: Option<String>,
    pub failures: i64,
    pub queued: i64,
}

/// Read the sync state from an open connection (doctor reads it
/// read-only).
pub fn read_state(c: &rusqlite::Connection) -> rusqlite::Result<SyncState> {
    let queued: i64 = c.query_row(
        "SELECT COUNT(*) FROM calendar_events WHERE dirty = 1 OR deleted = 1",
        [],
        |r| r.get(0),
    )?;
    let state = c
        .query_row(
            "SELECT last_attempt, last_success, last_error, failures FROM calendar_sync WHERE id = 1",
            [],
            |r| {
                Ok(SyncState {
                    last_attempt: r.get(0)?,
                    last_success: r.get(1)?,
                    last_error: r.get(2)?,
                    failures: r.get(3)?,
                    queued: 0,
                })
            },
        )
        .optional()?
        .unwrap_or_default();
    Ok(SyncState { queued, ..state })
}

/// How long to wait after `failures` failed passes in a row: 15 s,
/// doubling, never longer than the regular interval.
pub fn retry_delay(failures: u32, interval: Duration) -> Duration {
    if failures == 0 {
        return interval;
    }
    let doubled =
        Duration::from_secs(15).saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    doubled.min(interval)
}

impl Calendar {
    /// The sync state for doctor and `calendar sync`.
    pub fn sync_state(&self) -> Result<SyncState, StoreError> {
        self.store().with_conn(read_state)
    }

    fn client(&self) -> Result<CalDav, SyncError> {
        let c = self.config();
        if !c.syncs() {
            return Err(SyncError::NotConfigured);
        }
        CalDav::new(
            &c.caldav_url,
            &c.caldav_username,
            &c.caldav_password,
            Duration::from_millis(c.timeout_ms.max(500)),
        )
        .map_err(SyncError::Config)
    }

    /// One sync pass; its outcome is recorded for doctor either way.
    pub fn sync(&self) -> Result<SyncReport, SyncError> {
        let result = self.client().and_then(|dav| self.sync_with(&dav));
        let now = crate::store::now();
        let recorded = self.store().with_conn(|c| match &result {
            Ok(_) => c.execute(
                "INSERT INTO calendar_sync (id, last_attempt, last_success, last_error, failures)
                 VALUES (1, ?1, ?1, NULL, 0)
                 ON CONFLICT(id) DO UPDATE SET last_attempt = ?1, last_success = ?1, last_error = NULL, failures = 0",
                [&now],
            ),
            Err(e) => c.execute(
                "INSERT INTO calendar_sync (id, last_attempt, last_error, failures) VALUES (1, ?1, ?2, 1)
                 ON CONFLICT(id) DO UPDATE SET last_attempt = ?1, last_error = ?2, failures = failures + 1",
                rusqlite::params![now, e.to_string()],
            ),
        });
        if let Err(e) = recorded {
            tracing::warn!("cannot record the calendar sync state: {e}");
        }
        result
    }

    fn all_rows(&self) -> Result<Vec<Row>, StoreError> {
        let sql = format!("SELECT {ROW_COLUMNS} FROM calendar_events ORDER BY id");
        self.store().with_conn(|c| {
            let mut stmt = c.prepare(&sql)?;
            let rows = stmt.query_map([], row)?;
            rows.collect()
        })
    }

    fn sync_with(&self, dav: &CalDav) -> Result<SyncReport, SyncError> {
        let listed = dav.list()?;
        let mut report = SyncReport::default();
        let rows = self.all_rows()?;
        let mut seen: Vec<&Listed> = Vec::new();
        for r in &rows {
            let on_server = r
                .href
                .as_deref()
                .and_then(|h| listed.iter().find(|l| same_href(&l.href, h)));
            if let Some(l) = on_server {
                seen.push(l);
            }
            let title = local_title(r);
            if r.deleted {
                match (r.href.as_deref(), on_server) {
                    (Some(href), Some(l)) if r.etag.as_deref() == Some(l.etag.as_str()) => {
                        match dav.delete(href, Some(&l.etag)) {
                            Ok(()) => {
                                self.delete_row(r.id)?;
                                report.deleted_remote.push(title);
                            }
                            Err(DavError::PreconditionFailed { .. }) => {
                                self.kept_server_copy(dav, r, l, &title, &mut report)?
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                    (Some(_), Some(l)) => self.kept_server_copy(dav, r, l, &title, &mut report)?,
                    // Never on the server, or already gone from it.
                    _ => self.delete_row(r.id)?,
                }
                continue;
            }
            match (r.href.as_deref(), on_server) {
                (None, _) => {
                    let href = dav.href_for(&r.uid);
                    match dav.put(&href, &r.ics, None) {
                        Ok(etag) => {
                            self.mark_pushed(r, &href, etag.as_deref(), &r.ics)?;
                            report.pushed.push(title);
                        }
                        Err(DavError::PreconditionFailed { .. }) => {
                            // Something already lives at that name: resolve
                            // against it on the next pass.
                            self.store().with_conn(|c| {
                                c.execute(
                                    "UPDATE calendar_events SET href = ?2, etag = NULL WHERE id = ?1",
                                    rusqlite::params![r.id, href],
                                )
                            })?;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                (Some(href), Some(l)) => {
                    let server_changed = r.etag.as_deref() != Some(l.etag.as_str());
                    match (r.dirty, server_changed) {
                        (false, false) => {}
                        (false, true) => self.pull_over(dav, r, l, &mut report, false)?,
                        (true, false) => match dav.put(href, &r.ics, Some(&l.etag)) {
                            Ok(etag) => {
                                self.mark_pushed(r, href, etag.as_deref(), &r.ics)?;
                                report.pushed.push(title);
                            }
                            Err(DavError::PreconditionFailed { .. }) => {
                                let fresh = Listed {
                                    href: href.to_string(),
                                    etag: String::new(),
                                };
                                self.resolve_conflict(dav, r, &fresh, &mut report)?;
                            }
                            Err(e) => return Err(e.into()),
                        },
                        (true, true) => self.resolve_conflict(dav, r, l, &mut report)?,
                    }
                }
                (Some(href), None) => {
                    if r.dirty {
                        // Deleted on the server, edited here: keep the edit.
                        match dav.put(href, &r.ics, None) {
                            Ok(etag) => {
                                self.mark_pushed(r, href, etag.as_deref(), &r.ics)?;
                                report.conflicts.push(format!(
                                    "{title}: deleted on the server but changed here; kept this copy"
                                ));
                            }
                            Err(DavError::PreconditionFailed { .. }) => {}
                            Err(e) => return Err(e.into()),
                        }
                    } else {
                        self.delete_row(r.id)?;
                        report.deleted_local.push(title);
                    }
                }
            }
        }
        for l in &listed {
            if seen.iter().any(|s| s.href == l.href) {
                continue;
            }
            self.pull_new(dav, l, &mut report)?;
        }
        Ok(report)
    }

    fn delete_row(&self, id: i64) -> Result<(), StoreError> {
        self.store()
            .with_conn(|c| c.execute("DELETE FROM calendar_events WHERE id = ?1", [id]))?;
        Ok(())
    }

    /// Deleted here, changed on the server since: the server's newer copy
    /// comes back (a delete never destroys someone else's edit).
    fn kept_server_copy(
        &self,
        dav: &CalDav,
        r: &Row,
        l: &Listed,
        title: &str,
        report: &mut SyncReport,
    ) -> Result<(), SyncError> {
        self.pull_over(dav, r, l, report, true)?;
        report.conflicts.push(format!(
            "{title}: deleted here but changed on the server; kept the server's copy"
        ));
        Ok(())
    }

    fn mark_pushed(
        &self,
        r: &Row,
        href: &str,
        etag: Option<&str>,
        pushed_ics: &str,
    ) -> Result<(), StoreError> {
        // Only clear `dirty` when the row still holds what was sent: an
        // edit made during the PUT stays queued.
        self.store().with_conn(|c| {
            c.execute(
                "UPDATE calendar_events SET href = ?2, etag = ?3,
                   dirty = CASE WHEN ics = ?4 THEN 0 ELSE dirty END
                 WHERE id = ?1",
                rusqlite::params![r.id, href, etag, pushed_ics],
            )
        })?;
        Ok(())
    }

    /// Fetch a server resource, or `None` (reported) when it is unreadable.
    fn fetch(
        &self,
        dav: &CalDav,
        href: &str,
        report: &mut SyncReport,
    ) -> Result<Option<(String, Option<String>, ical::Resource)>, SyncError> {
        let (text, etag) = match dav.get(href) {
            Ok(got) => got,
            // Gone between the listing and the GET: the next pass sees it.
            Err(DavError::PreconditionFailed { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match ical::parse(&text) {
            Ok(resource) => {
                for w in &resource.warnings {
                    tracing::warn!("calendar: {w}");
                }
                Ok(Some((text, etag, resource)))
            }
            Err(e) => {
                let line = format!("{href}: {e}");
                tracing::warn!("calendar sync skipped a server event: {line}");
                report.skipped.push(line);
                Ok(None)
            }
        }
    }

    /// Replace a local row by the server's copy.
    fn pull_over(
        &self,
        dav: &CalDav,
        r: &Row,
        l: &Listed,
        report: &mut SyncReport,
        undelete: bool,
    ) -> Result<(), SyncError> {
        let Some((text, etag, resource)) = self.fetch(dav, &l.href, report)? else {
            return Ok(());
        };
        let title = resource
            .master()
            .map(|m| m.title.clone())
            .unwrap_or_default();
        let etag = etag.unwrap_or_else(|| l.etag.clone());
        self.store().with_conn(|c| {
            c.execute(
                "UPDATE calendar_events SET uid = ?2, title = ?3, ics = ?4, etag = ?5, dirty = 0,
                   deleted = CASE WHEN ?6 THEN 0 ELSE deleted END, updated_at = ?7
                 WHERE id = ?1",
                rusqlite::params![
                    r.id,
                    resource.uid(),
                    title,
                    text,
                    etag,
                    undelete,
                    crate::store::now()
                ],
            )
        })?;
        report.pulled.push(title);
        Ok(())
    }

    /// Insert a resource new to this device (or link a row with its UID).
    fn pull_new(&self, dav: &CalDav, l: &Listed, report: &mut SyncReport) -> Result<(), SyncError> {
        let Some((text, etag, resource)) = self.fetch(dav, &l.href, report)? else {
            return Ok(());
        };
        let title = resource
            .master()
            .map(|m| m.title.clone())
            .unwrap_or_default();
        let etag = etag.unwrap_or_else(|| l.etag.clone());
        let existing: Option<Row> = self.store().with_conn(|c| {
            c.query_row(
                &format!("SELECT {ROW_COLUMNS} FROM calendar_events WHERE uid = ?1"),
                [resource.uid()],
                row,
            )
            .optional()
        })?;
        match existing {
            Some(r) if r.dirty || r.deleted => {
                // The same UID queued here under another name: link it and
                // let the next pass resolve it.
                self.store().with_conn(|c| {
                    c.execute(
                        "UPDATE calendar_events SET href = ?2, etag = NULL WHERE id = ?1",
                        rusqlite::params![r.id, l.href],
                    )
                })?;
            }
            _ => {
                self.store().with_conn(|c| {
                    c.execute(
                        "INSERT INTO calendar_events (uid, title, ics, href, etag, dirty, deleted, updated_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, 0, 0, ?6)
                         ON CONFLICT(uid) DO UPDATE SET title = excluded.title, ics = excluded.ics,
                           href = excluded.href, etag = excluded.etag, updated_at = excluded.updated_at",
                        rusqlite::params![resource.uid(), title, text, l.href, etag, crate::store::now()],
                    )
                })?;
                report.pulled.push(title);
            }
        }
        Ok(())
    }

    /// Both sides changed: the newer one (LAST-MODIFIED, else DTSTAMP)
    /// wins; the loser's text is kept in `calendar_conflicts` and logged.
    fn resolve_conflict(
        &self,
        dav: &CalDav,
        r: &Row,
        l: &Listed,
        report: &mut SyncReport,
    ) -> Result<(), SyncError> {
        let href = r.href.clone().unwrap_or_else(|| l.href.clone());
        let Some((server_text, server_etag, server)) = self.fetch(dav, &href, report)? else {
            return Ok(());
        };
        let local_modified = ical::parse(&r.ics).ok().and_then(|res| res.modified());
        let server_modified = server.modified();
        let title = local_title(r);
        let local_wins = local_modified > server_modified;
        if local_wins {
            let Some(tag) = server_etag
                .as_deref()
                .or(Some(l.etag.as_str()).filter(|e| !e.is_empty()))
            else {
                return Ok(());
            };
            match dav.put(&href, &r.ics, Some(tag)) {
                Ok(etag) => self.mark_pushed(r, &href, etag.as_deref(), &r.ics)?,
                // Changed yet again: the next pass tries again.
                Err(DavError::PreconditionFailed { .. }) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
            self.keep_loser(&r.uid, "local", &server_text)?;
        } else {
            self.keep_loser(&r.uid, "server", &r.ics)?;
            let title = server.master().map(|m| m.title.clone()).unwrap_or_default();
            let etag = server_etag.unwrap_or_else(|| l.etag.clone());
            self.store().with_conn(|c| {
                c.execute(
                    "UPDATE calendar_events SET title = ?2, ics = ?3, etag = ?4, href = ?5, dirty = 0, updated_at = ?6
                     WHERE id = ?1",
                    rusqlite::params![r.id, title, server_text, etag, href, crate::store::now()],
                )
            })?;
        }
        let line = format!(
            "{title}: changed on both sides; kept the {} copy (the other is saved in calendar_conflicts)",
            if local_wins { "local" } else { "server's" }
        );
        tracing::warn!("calendar sync conflict: {line}");
        report.conflicts.push(line);
        Ok(())
    }

    fn keep_loser(&self, uid: &str, kept: &str, loser: &str) -> Result<(), StoreError> {
        self.store().with_conn(|c| {
            c.execute(
                "INSERT INTO calendar_conflicts (uid, kept, loser_ics, created_at) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![uid, kept, loser, crate::store::now()],
            )
        })?;
        Ok(())
    }

    /// Sync every `sync_interval_secs` on its own thread until `stop`;
    /// after a failure retry sooner, with backoff ([`retry_delay`]).
    /// `None` when no server is configured.
    pub fn start_background(&self, stop: CancelToken) -> Option<std::thread::JoinHandle<()>> {
        if !self.config().syncs() {
            return None;
        }
        let calendar = self.clone();
        let interval = Duration::from_secs(self.config().sync_interval_secs.max(10));
        std::thread::Builder::new()
            .name("calendar-sync".into())
            .spawn(move || {
                crate::cpu::lower_this_thread();
                let mut failures = 0u32;
                while !stop.is_cancelled() {
                    // Not beside a live turn's STT/TTS (bounded wait).
                    crate::cpu::wait_until_quiet(Duration::from_secs(10));
                    match calendar.sync() {
                        Ok(report) => {
                            failures = 0;
                            for line in report.lines() {
                                tracing::info!("calendar sync: {line}");
                            }
                        }
                        Err(e) => {
                            failures = failures.saturating_add(1);
                            tracing::warn!("calendar sync failed: {e}");
                        }
                    }
                    let wait = retry_delay(failures, interval);
                    let until = std::time::Instant::now() + wait;
                    while !stop.is_cancelled() && std::time::Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(250));
                    }
                }
            })
            .map_err(|e| tracing::error!("cannot start the calendar sync thread: {e}"))
            .ok()
    }
}

fn local_title(r: &Row) -> String {
    super::title_of(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_up_to_the_interval() {
        let interval = Duration::from_secs(300);
        assert_eq!(retry_delay(0, interval), interval);
        assert_eq!(retry_delay(1, interval), Duration::from_secs(15));
        assert_eq!(retry_delay(2, interval), Duration::from_secs(30));
        assert_eq!(retry_delay(5, interval), Duration::from_secs(240));
        assert_eq!(retry_delay(6, interval), interval);
        assert_eq!(retry_delay(60, interval), interval);
    }
}
