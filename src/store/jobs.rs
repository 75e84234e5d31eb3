//! Background jobs persisted in SQLite so a restart resumes them. The turn
//! enqueues in its own transaction; a worker claims, runs and finishes them.

use rusqlite::{params, Connection, OptionalExtension};

use super::{now, Result, Store};

crate::choice! {
    /// What a background job does: the job-kind name table (the `kind`
    /// column spells these names).
    pub enum JobKind("job kind") {
        ExtractMemory = "extract_memory": "extract durable facts from a finished exchange",
        Summarize = "summarize": "refresh a conversation's running summary",
    }
}

/// A pending job.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: i64,
    pub kind: String,
    pub payload: String,
    pub attempts: i64,
}

impl Job {
    /// The job's kind; a name this build does not know (a row written by
    /// another version) is an error the worker reports and drops.
    pub fn parsed_kind(&self) -> std::result::Result<JobKind, crate::choice::UnknownChoice> {
        self.kind.parse()
    }
}

pub(super) fn enqueue_in(c: &Connection, kind: JobKind, payload: &str) -> rusqlite::Result<i64> {
    c.execute(
        "INSERT INTO jobs (kind, payload, created_at) VALUES (?1, ?2, ?3)",
        params![kind.name(), payload, now()],
    )?;
    Ok(c.last_insert_rowid())
}

impl Store {
    pub fn enqueue_job(&self, kind: JobKind, payload: &str) -> Result<i64> {
        self.with_conn(|c| enqueue_in(c, kind, payload))
    }

    /// The oldest pending job of one of `kinds` with fewer than
    /// `max_attempts` attempts; its attempt count is bumped.
    pub fn next_job(&self, kinds: &[JobKind], max_attempts: i64) -> Result<Option<Job>> {
        self.with_tx(|tx| {
            let mut found = None;
            for kind in kinds {
                let job = tx
                    .query_row(
                        "SELECT id, kind, payload, attempts FROM jobs
                         WHERE kind = ?1 AND attempts < ?2 ORDER BY id LIMIT 1",
                        params![kind.name(), max_attempts],
                        |r| {
                            Ok(Job {
                                id: r.get(0)?,
                                kind: r.get(1)?,
                                payload: r.get(2)?,
                                attempts: r.get(3)?,
                            })
                        },
                    )
                    .optional()?;
                if let Some(job) = job {
                    if found.as_ref().is_none_or(|f: &Job| job.id < f.id) {
                        found = Some(job);
                    }
                }
            }
            if let Some(job) = &found {
                tx.execute(
                    "UPDATE jobs SET attempts = attempts + 1 WHERE id = ?1",
                    [job.id],
                )?;
            }
            Ok(found)
        })
    }

    /// The job is done: remove it.
    pub fn finish_job(&self, id: i64) -> Result<()> {
        self.with_conn(|c| {
            c.execute("DELETE FROM jobs WHERE id = ?1", [id])
                .map(|_| ())
        })
    }

    /// The job failed this time; keep it (it is retried until max attempts).
    pub fn fail_job(&self, id: i64, error: &str) -> Result<()> {
        self.with_conn(|c| {
            c.execute(
                "UPDATE jobs SET last_error = ?2 WHERE id = ?1",
                params![id, error],
            )
            .map(|_| ())
        })
    }

    pub fn pending_jobs(&self) -> Result<i64> {
        self.with_conn(|c| c.query_row("SELECT COUNT(*) FROM jobs", [], |r| r.get(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_survive_reopen_and_are_claimed_in_order() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open_in(dir.path()).unwrap();
            store.enqueue_job(JobKind::Summarize, "{\"c\":1}").unwrap();
            store
                .enqueue_job(JobKind::ExtractMemory, "{\"c\":2}")
                .unwrap();
        }
        let store = Store::open_in(dir.path()).unwrap();
        let job = store
            .next_job(&[JobKind::ExtractMemory, JobKind::Summarize], 3)
            .unwrap()
            .unwrap();
        assert_eq!(job.kind, "summarize");
        store.finish_job(job.id).unwrap();
        let job = store
            .next_job(&[JobKind::ExtractMemory, JobKind::Summarize], 3)
            .unwrap()
            .unwrap();
        assert_eq!(job.parsed_kind(), Ok(JobKind::ExtractMemory));
        store.fail_job(job.id, "boom").unwrap();
        assert_eq!(store.pending_jobs().unwrap(), 1);
        // attempts: 1 so far; two more claims exhaust it.
        assert!(store
            .next_job(&[JobKind::ExtractMemory], 3)
            .unwrap()
            .is_some());
        assert!(store
            .next_job(&[JobKind::ExtractMemory], 3)
            .unwrap()
            .is_some());
        assert!(store
            .next_job(&[JobKind::ExtractMemory], 3)
            .unwrap()
            .is_none());
    }
}
