//! The background worker: drains the `jobs` table (written by the turn in
//! its own transaction, so pending work survives a restart) on its own
//! thread, so nothing after the reply delays the next turn.
//!
//! The queue is the table itself; it stays bounded because redundant
//! summarize jobs of a conversation collapse into the newest, and a job is
//! dropped after `max_job_attempts` real failures. A transient LLM outage
//! (unreachable, 429, 5xx, timeout) does not use up attempts: the worker
//! backs off and tries again later.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, Result};
use crossbeam_channel::{bounded, Receiver, Sender};
use serde::Serialize;
use serde_json::Value;

use super::extract::{self, ExtractError};
use super::summary::{self, SummaryOutcome};
use super::{explicit_memory, Memory};
use crate::llm::{ChatModel, LlmConfig};
use crate::store::{Job, JobKind};

/// Job kinds this worker runs (enqueued by `run_turn`).
pub const KINDS: &[JobKind] = JobKind::ALL;
const MAX_BACKOFF: Duration = Duration::from_secs(300);
const FIRST_BACKOFF: Duration = Duration::from_secs(5);

/// How one job ended.
#[derive(Debug)]
enum JobEnd {
    Done(String),
    /// Transient: keep it without using up an attempt.
    RetryLater(String),
    Failed(String),
}

/// What a synchronous drain did (`earshot memory process`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DrainReport {
    pub done: usize,
    pub failed: usize,
    /// Stopped early: the LLM is unreachable; these stay queued.
    pub retry_later: usize,
    pub pending: i64,
    pub notes: Vec<String>,
}

struct Worker {
    memory: Arc<Memory>,
    llm: Arc<dyn ChatModel>,
    llm_config: LlmConfig,
}

/// What the worker needs from whoever built the services (the composition
/// root's `Services` implements it): memory, when enabled, and the LLM that
/// extracts and summarises.
pub trait WorkerParts {
    fn memory(&self) -> Option<Arc<Memory>>;
    fn llm(&self) -> Arc<dyn ChatModel>;
    fn llm_config(&self) -> LlmConfig;
}

impl Worker {
    fn from_services(services: &dyn WorkerParts) -> Option<Worker> {
        Some(Worker {
            memory: services.memory()?,
            llm: services.llm(),
            llm_config: services.llm_config(),
        })
    }

    fn next(&self) -> Result<Option<Job>> {
        Ok(self
            .memory
            .store()
            .next_job(KINDS, self.memory.config().max_job_attempts)?)
    }

    /// Record the end of a job in the table.
    fn finish(&self, job: &Job, end: &JobEnd) {
        let store = self.memory.store();
        let result = match end {
            JobEnd::Done(_) => store.finish_job(job.id),
            JobEnd::Failed(e) => {
                if job.attempts + 1 >= self.memory.config().max_job_attempts {
                    tracing::warn!(job = job.id, kind = %job.kind, error = %e, "background job failed for the last time; dropped");
                    store.finish_job(job.id)
                } else {
                    store.fail_job(job.id, e)
                }
            }
            JobEnd::RetryLater(e) => store.with_conn(|c| {
                c.execute(
                    "UPDATE jobs SET attempts = MAX(attempts - 1, 0), last_error = ?2 WHERE id = ?1",
                    rusqlite::params![job.id, e],
                )
                .map(|_| ())
            }),
        };
        if let Err(e) = result {
            tracing::warn!(job = job.id, error = %e, "could not record a background job's result");
        }
    }

    fn run(&self, job: &Job) -> JobEnd {
        let payload: Value = match serde_json::from_str(&job.payload) {
            Ok(v) => v,
            Err(e) => return JobEnd::Done(format!("unreadable payload ({e}); dropped")),
        };
        let user_id = payload["user_id"].as_str().unwrap_or("user-1").to_string();
        match job.parsed_kind() {
            Ok(JobKind::ExtractMemory) => self.extract(&user_id, &payload),
            Ok(JobKind::Summarize) => self.summarize(job, &payload),
            Err(e) => JobEnd::Done(format!("{e}; dropped")),
        }
    }

    fn extract(&self, user_id: &str, payload: &Value) -> JobEnd {
        let user = payload["user"].as_str().unwrap_or_default();
        // Since v11 the payload names the answer's message; older jobs
        // carry the text.
        let stored = match payload["assistant_message_id"].as_i64() {
            Some(id) => match self.memory.store().message_text(id) {
                Ok(text) => text,
                Err(e) => return JobEnd::Failed(format!("{e:#}")),
            },
            None => None,
        };
        let assistant = stored
            .as_deref()
            .or_else(|| payload["assistant"].as_str())
            .unwrap_or_default();
        if user.trim().is_empty() {
            return JobEnd::Done("empty exchange".into());
        }
        let mut note = String::new();
        // "remember that …" needs no LLM.
        if let Some(fact) = explicit_memory(user) {
            match self.memory.remember(user_id, fact) {
                Ok(r) if r.created => note = format!("remembered #{}; ", r.item.id),
                Ok(_) => {}
                Err(e) => return JobEnd::Failed(format!("{e:#}")),
            }
        }
        if let Err(e) = self.llm.check_configured() {
            return JobEnd::Done(format!("{note}no LLM for extraction ({e})"));
        }
        match extract::extract(
            &self.memory,
            self.llm.as_ref(),
            &self.llm_config,
            user_id,
            user,
            assistant,
        ) {
            Ok(r) => JobEnd::Done(format!(
                "{note}added {}, updated {}, deleted {}",
                r.added, r.updated, r.deleted
            )),
            Err(ExtractError::Llm(e)) if e.is_retryable() => JobEnd::RetryLater(e.to_string()),
            Err(e) => JobEnd::Failed(e.to_string()),
        }
    }

    fn summarize(&self, job: &Job, payload: &Value) -> JobEnd {
        let Some(conversation_id) = payload["conversation_id"].as_i64() else {
            return JobEnd::Done("no conversation id; dropped".into());
        };
        match summary::superseded(self.memory.store(), job.id, conversation_id) {
            Ok(true) => return JobEnd::Done("a newer summary job covers it".into()),
            Ok(false) => {}
            Err(e) => return JobEnd::Failed(format!("{e:#}")),
        }
        if let Err(e) = self.llm.check_configured() {
            return JobEnd::Done(format!("no LLM for summaries ({e})"));
        }
        match summary::summarize(
            &self.memory,
            self.llm.as_ref(),
            &self.llm_config,
            conversation_id,
        ) {
            Ok(SummaryOutcome::Skipped) => JobEnd::Done("too short to summarise".into()),
            Ok(SummaryOutcome::Gone) => JobEnd::Done("conversation deleted".into()),
            Ok(SummaryOutcome::Indexed(s)) => JobEnd::Done(format!("indexed \"{}\"", s.title)),
            Err(ExtractError::Llm(e)) if e.is_retryable() => JobEnd::RetryLater(e.to_string()),
            Err(e) => JobEnd::Failed(e.to_string()),
        }
    }
}

/// Run every pending job now, on this thread (for `earshot memory process`
/// and tests). Stops early when the LLM is unreachable (those jobs stay).
pub fn process_pending(services: &dyn WorkerParts) -> Result<DrainReport> {
    let worker = Worker::from_services(services)
        .ok_or_else(|| anyhow!("memory is disabled ([memory] enabled = false)"))?;
    let mut report = DrainReport::default();
    while let Some(job) = worker.next()? {
        crate::cpu::wait_until_quiet(QUIET_WAIT);
        let end = worker.run(&job);
        worker.finish(&job, &end);
        match &end {
            JobEnd::Done(n) => {
                report.done += 1;
                report.notes.push(format!("{} #{}: {n}", job.kind, job.id));
            }
            JobEnd::Failed(e) => {
                report.failed += 1;
                report
                    .notes
                    .push(format!("{} #{} failed: {e}", job.kind, job.id));
            }
            JobEnd::RetryLater(e) => {
                report.retry_later += 1;
                report
                    .notes
                    .push(format!("{} #{} will be retried: {e}", job.kind, job.id));
                break;
            }
        }
    }
    worker.memory.flush();
    report.pending = worker.memory.store().pending_jobs()?;
    Ok(report)
}

/// The running worker thread. Dropping it asks the thread to stop after
/// the current job without waiting (pending jobs stay in the table).
pub struct BackgroundHandle {
    stop: Arc<AtomicBool>,
    wake: Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl BackgroundHandle {
    /// Look for new jobs now (call after a turn; never blocks).
    pub fn notify(&self) {
        let _ = self.wake.try_send(());
    }

    /// Stop and wait up to `wait` for the current job to end; true when
    /// the thread has ended.
    pub fn shutdown(mut self, wait: Duration) -> bool {
        self.stop.store(true, Ordering::SeqCst);
        self.notify();
        let Some(thread) = self.thread.take() else {
            return true;
        };
        let deadline = std::time::Instant::now() + wait;
        while !thread.is_finished() {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        thread.join().is_ok()
    }
}

impl Drop for BackgroundHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.wake.try_send(());
    }
}

/// Start the worker for these services; `None` when memory is disabled.
/// Call from the long-running front doors (serve, run, chat's REPL); a
/// one-shot `earshot chat` leaves its jobs queued for the next start.
pub fn start_background(services: &dyn WorkerParts) -> Option<BackgroundHandle> {
    let worker = Worker::from_services(services)?;
    let poll = Duration::from_millis(worker.memory.config().worker_poll_ms.max(50));
    let stop = Arc::new(AtomicBool::new(false));
    let (wake, woken) = bounded(1);
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("memory-worker".into())
        .spawn(move || worker_loop(worker, flag, woken, poll))
        .map_err(
            |e| tracing::warn!(error = %e, "could not start the memory worker; jobs stay queued"),
        )
        .ok()?;
    Some(BackgroundHandle {
        stop,
        wake,
        thread: Some(thread),
    })
}

/// Longest a job waits for a live turn's STT/TTS to end before it runs
/// anyway (reniced, so it still yields the cores).
const QUIET_WAIT: Duration = Duration::from_secs(10);

fn worker_loop(worker: Worker, stop: Arc<AtomicBool>, woken: Receiver<()>, poll: Duration) {
    crate::cpu::lower_this_thread();
    let mut backoff = FIRST_BACKOFF;
    while !stop.load(Ordering::SeqCst) {
        let job = match worker.next() {
            Ok(job) => job,
            Err(e) => {
                tracing::warn!(error = %e, "memory worker cannot read the job queue");
                let _ = woken.recv_timeout(poll);
                continue;
            }
        };
        let Some(job) = job else {
            worker.memory.flush();
            let _ = woken.recv_timeout(poll);
            continue;
        };
        let end = worker.run(&job);
        worker.finish(&job, &end);
        match &end {
            JobEnd::Done(note) => {
                tracing::debug!(job = job.id, kind = %job.kind, %note, "background job done");
                backoff = FIRST_BACKOFF;
            }
            JobEnd::Failed(e) => {
                tracing::warn!(job = job.id, kind = %job.kind, error = %e, "background job failed; it will be retried");
            }
            JobEnd::RetryLater(e) => {
                tracing::info!(job = job.id, kind = %job.kind, error = %e, wait_s = backoff.as_secs(), "language model unavailable; background jobs wait");
                let _ = woken.recv_timeout(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
    worker.memory.flush();
}
