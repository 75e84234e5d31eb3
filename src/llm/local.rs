//! The on-device language model (issue 20): llama.cpp's `llama-server` as
//! a child process earshot starts, health-checks, restarts and stops,
//! spoken to over its OpenAI-compatible API with the one client
//! ([`super::openai::OpenAiClient`]).
//!
//! Why a child and not llama.cpp linked in: whisper-rs-sys and
//! llama-cpp-sys-2 each vendor ggml, and linking both into one binary has
//! failed with duplicate symbols and crashes; a child also cannot take
//! earshot down when a GGUF is corrupt, and its memory is given back
//! whole when it stops.
//!
//! Bounds: the child must answer `/health` within `load_timeout_secs`; an
//! answer is capped at `max_tokens` (server side too, `-n`), its silence at
//! `read_timeout_secs` and its length at `total_timeout_secs`. A child that
//! crashes or hangs is killed (and reaped) and starts again on the next
//! request; one request runs at a time. The child dies with earshot
//! (`PR_SET_PDEATHSIG`, set from a spawner thread that lives as long as the
//! process) and is killed and reaped on drop.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::openai::OpenAiClient;
use super::{ChatModel, ChatRequest, ChatResponse, LlmConfig, LlmError, LocalBackend, LocalConfig};
use crate::cancel::CancelToken;
use crate::paths::Paths;

/// The on-device model behind the [`ChatModel`] seam.
pub struct LocalModel {
    cfg: LocalConfig,
    model_path: PathBuf,
    program: PathBuf,
    log_path: PathBuf,
    label: String,
    state: Mutex<State>,
    /// One request at a time (a second waits, within its deadline).
    gate: Mutex<()>,
}

#[derive(Default)]
struct State {
    child: Option<Child>,
    base_url: String,
    last_used: Option<Instant>,
    /// Times a child was started (tests and `bench` read it).
    starts: u32,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("model", &self.model_path)
            .field("program", &self.program)
            .finish()
    }
}

impl LocalModel {
    /// The model of `[llm.local]`, its files under `paths.models_dir`, the
    /// child's log in the state dir. Nothing starts until
    /// [`LocalModel::start_in_background`] or the first request.
    pub fn new(cfg: &LocalConfig, paths: &Paths) -> Arc<LocalModel> {
        let program = if Path::new(&cfg.server_program).is_absolute() {
            PathBuf::from(&cfg.server_program)
        } else {
            paths.model_path(&cfg.server_program)
        };
        let model = Arc::new(LocalModel {
            cfg: cfg.clone(),
            model_path: paths.model_path(&cfg.model_file),
            program,
            log_path: paths.state_dir.join("llama-server.log"),
            label: format!("local/{}", cfg.model_file),
            state: Mutex::new(State::default()),
            gate: Mutex::new(()),
        });
        if cfg.idle_release_secs > 0 {
            release_when_idle(Arc::downgrade(&model), cfg.idle_release_secs);
        }
        model
    }

    /// The name answers carry in `done.model` and the turn log.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Load the model on a thread of its own so start-up never waits for
    /// it (a request meanwhile waits for the load, within its deadline).
    pub fn start_in_background(self: &Arc<Self>) {
        if self.check_files().is_err() {
            return;
        }
        let me = self.clone();
        let _ = std::thread::Builder::new()
            .name("llm-local-load".into())
            .spawn(move || match me.ensure_running() {
                Ok(_) => tracing::info!(model = %me.label, "on-device language model loaded"),
                Err(e) => tracing::info!(model = %me.label, error = %e, "on-device language model did not load"),
            });
    }

    /// The files are there and the GGUF looks like one; the one line
    /// otherwise says what is wrong and how to fix it.
    pub fn check_files(&self) -> Result<(), LlmError> {
        if self.cfg.backend == LocalBackend::InProcess {
            return Err(LlmError::NotConfigured(
                "llm.local.backend = \"in-process\" is not in this build (llama.cpp and whisper.cpp each bring their own ggml); use backend = \"server\".".into(),
            ));
        }
        let fetch = "run scripts/fetch-models.sh";
        let mut magic = [0u8; 4];
        match std::fs::File::open(&self.model_path) {
            Err(_) => {
                return Err(LlmError::NotConfigured(format!(
                    "The on-device model {} is missing: {fetch}.",
                    self.model_path.display()
                )))
            }
            Ok(mut f) => {
                if f.read_exact(&mut magic).is_err() || &magic != b"GGUF" {
                    return Err(LlmError::NotConfigured(format!(
                        "The on-device model {} is not a GGUF file (corrupt or cut short): {fetch} again.",
                        self.model_path.display()
                    )));
                }
            }
        }
        if !is_executable(&self.program) {
            return Err(LlmError::NotConfigured(format!(
                "llama-server is missing at {}: {fetch} (it builds it).",
                self.program.display()
            )));
        }
        Ok(())
    }

    /// The running child's process id.
    pub fn pid(&self) -> Option<u32> {
        self.lock_state().child.as_ref().map(Child::id)
    }

    /// The child's resident memory in KiB (`/proc/PID/status` VmRSS).
    pub fn rss_kib(&self) -> Option<u64> {
        let pid = self.pid()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
    }

    /// How many times a child was started.
    pub fn starts(&self) -> u32 {
        self.lock_state().starts
    }

    /// The base URL of the running child (`http://127.0.0.1:PORT/v1`),
    /// starting it first when needed.
    pub fn ensure_running(&self) -> Result<String, LlmError> {
        self.check_files()?;
        let mut state = self.lock_state();
        if let Some(child) = state.child.as_mut() {
            match child.try_wait() {
                Ok(None) => return Ok(state.base_url.clone()),
                Ok(Some(status)) => {
                    tracing::info!(%status, "the on-device model's server had stopped; restarting it")
                }
                Err(e) => {
                    tracing::info!(error = %e, "the on-device model's server is gone; restarting it")
                }
            }
            state.child = None;
        }
        let port = free_port().map_err(|e| LlmError::Local(format!("no free local port: {e}")))?;
        let log = std::fs::File::create(&self.log_path)
            .or_else(|_| std::fs::File::create("/dev/null"))
            .map_err(|e| LlmError::Local(format!("cannot open a log for llama-server: {e}")))?;
        let log2 = log
            .try_clone()
            .map_err(|e| LlmError::Local(format!("cannot open a log for llama-server: {e}")))?;
        let threads = if self.cfg.threads == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            self.cfg.threads
        };
        let mut cmd = Command::new(&self.program);
        cmd.arg("-m")
            .arg(&self.model_path)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-t", &threads.to_string(), "-tb", &threads.to_string()])
            .args(["-c", &self.cfg.context_size.to_string()])
            .args(["-n", &self.cfg.max_tokens.to_string()])
            .args(["-np", "1", "--no-webui", "--alias", &self.label])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        let started = Instant::now();
        let mut child = spawn_tied(cmd).map_err(|e| {
            LlmError::Local(format!("cannot start {}: {e}", self.program.display()))
        })?;
        state.starts += 1;
        let base = format!("http://127.0.0.1:{port}");
        let agent = crate::http::HttpSettings {
            connect_timeout: Some(Duration::from_millis(500)),
            response_timeout: Some(Duration::from_secs(2)),
            global_timeout: Some(Duration::from_secs(3)),
            ..Default::default()
        }
        .agent();
        let deadline = started + Duration::from_secs(self.cfg.load_timeout_secs.max(1));
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(LlmError::Local(format!(
                    "llama-server exited while loading {} ({status}){}",
                    self.model_path.display(),
                    last_log_line(&self.log_path)
                        .map(|l| format!(": {l}"))
                        .unwrap_or_default()
                )));
            }
            if let Ok(r) = agent.get(format!("{base}/health")).call() {
                if r.status().as_u16() == 200 {
                    break;
                }
            }
            if Instant::now() >= deadline {
                kill_and_reap(&mut child);
                return Err(LlmError::Local(format!(
                    "llama-server did not load {} within {} s",
                    self.model_path.display(),
                    self.cfg.load_timeout_secs
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        tracing::info!(
            pid = child.id(),
            ms = started.elapsed().as_millis() as u64,
            model = %self.label,
            "on-device model server ready"
        );
        state.child = Some(child);
        state.base_url = format!("{base}/v1");
        state.last_used = Some(Instant::now());
        Ok(state.base_url.clone())
    }

    /// Kill and reap the child (a hang, a crash mid-answer, idle release).
    pub fn stop(&self) {
        let mut state = self.lock_state();
        if let Some(mut child) = state.child.take() {
            kill_and_reap(&mut child);
        }
    }

    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The client for the running child, with this section's deadlines.
    fn client(&self, base_url: &str) -> OpenAiClient {
        let cfg = LlmConfig {
            base_url: base_url.to_string(),
            api_key: String::new(),
            connect_timeout_secs: 2,
            first_byte_timeout_secs: self.cfg.read_timeout_secs.max(1),
            read_timeout_secs: self.cfg.read_timeout_secs.max(1),
            total_timeout_secs: self.cfg.total_timeout_secs.max(1),
            max_retries: 0,
            max_completion_tokens: self.cfg.max_tokens,
            ..LlmConfig::default()
        };
        OpenAiClient::new(&cfg)
    }

    /// The request as the small model gets it: its own name, the token
    /// cap, no tools (it cannot call them; tool turns are left out), and
    /// the oldest history dropped until the prompt fits the window.
    fn local_request(&self, request: &ChatRequest) -> ChatRequest {
        let mut r = request.clone();
        r.model = self.label.clone();
        r.temperature = self.cfg.temperature;
        r.max_completion_tokens = r.max_completion_tokens.min(self.cfg.max_tokens).max(1);
        if !r.tools.is_empty() {
            r.tools.clear();
            r.messages
                .retain(|m| m.role != "tool" && m.tool_calls.is_empty());
        }
        fit_to_window(
            &mut r.messages,
            self.cfg.context_size,
            r.max_completion_tokens as usize,
        );
        r
    }
}

impl ChatModel for LocalModel {
    fn chat(
        &self,
        request: &ChatRequest,
        on_token: &mut dyn FnMut(&str),
        cancel: &CancelToken,
    ) -> Result<ChatResponse, LlmError> {
        self.check_files()?;
        let deadline = Instant::now() + Duration::from_secs(self.cfg.total_timeout_secs.max(1));
        let _turn = loop {
            match self.gate.try_lock() {
                Ok(g) => break g,
                Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
            if cancel.is_cancelled() {
                return Err(LlmError::Cancelled);
            }
            if Instant::now() >= deadline {
                return Err(LlmError::Timeout);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let local = self.local_request(request);
        let cap = if local.stream {
            self.cfg.max_sentences
        } else {
            0
        };
        // A child that died between turns is restarted here, once.
        for attempt in 0..2 {
            let base = self.ensure_running()?;
            let mut emitted = false;
            let started = Instant::now();
            let mut first_token_ms = None;
            let mut limit = SentenceCap::new(cap);
            // Our own flag, so the sentence cap can stop the stream; the
            // caller's cancellation is passed on by a small watcher.
            let inner = CancelToken::new();
            let watching = Arc::new(std::sync::atomic::AtomicBool::new(true));
            watch_cancel(cancel.clone(), inner.clone(), watching.clone());
            let result = self.client(&base).chat(
                &local,
                &mut |t| {
                    emitted = true;
                    first_token_ms.get_or_insert(started.elapsed().as_secs_f64() * 1000.0);
                    let (shown, full) = limit.push(t);
                    if !shown.is_empty() {
                        on_token(shown);
                    }
                    if full {
                        inner.cancel();
                    }
                },
                &inner,
            );
            watching.store(false, std::sync::atomic::Ordering::SeqCst);
            self.lock_state().last_used = Some(Instant::now());
            match result {
                Ok(mut response) => {
                    response.model = self.label.clone();
                    if cap > 0 {
                        response.content = limit.kept().to_string();
                    }
                    return Ok(response);
                }
                Err(LlmError::Cancelled) if limit.is_full() && !cancel.is_cancelled() => {
                    return Ok(ChatResponse {
                        content: limit.kept().to_string(),
                        tool_calls: Vec::new(),
                        finish_reason: Some("sentences".into()),
                        model: self.label.clone(),
                        first_token_ms,
                        begun_early_ms: None,
                    });
                }
                Err(LlmError::Cancelled) => return Err(LlmError::Cancelled),
                Err(e) => {
                    let crashed = matches!(
                        e,
                        LlmError::Unreachable { .. }
                            | LlmError::Protocol(_)
                            | LlmError::Server { .. }
                            | LlmError::InReply { .. }
                    );
                    if crashed || e == LlmError::Timeout {
                        tracing::info!(error = %e, "the on-device model's server failed mid-answer; stopping it (it restarts on the next request)");
                        self.stop();
                    }
                    if crashed && !emitted && attempt == 0 && Instant::now() < deadline {
                        continue;
                    }
                    return Err(match e {
                        LlmError::Timeout => LlmError::Timeout,
                        LlmError::BadRequest { message, .. } => LlmError::Local(message),
                        other => LlmError::Local(other.to_string()),
                    });
                }
            }
        }
        Err(LlmError::Local("llama-server failed twice".into()))
    }

    fn check_configured(&self) -> Result<(), LlmError> {
        self.check_files()
    }

    fn can_use_tools(&self) -> bool {
        false
    }

    fn computes_here(&self) -> bool {
        true
    }
}

impl Drop for LocalModel {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(mut child) = state.child.take() {
            kill_and_reap(&mut child);
        }
    }
}

/// Drop the oldest history (never the first system message or the last
/// message) until the prompt's estimated tokens leave room for the answer
/// in a `window`-token context; then cut the last message from its front
/// (the question is at its end). About 3 characters a token, rounded up.
pub fn fit_to_window(messages: &mut Vec<super::ChatMessage>, window: usize, answer: usize) {
    let budget = window.saturating_sub(answer + 64).max(64);
    let tokens = |ms: &[super::ChatMessage]| -> usize {
        ms.iter()
            .map(|m| m.content.as_deref().map_or(0, str::len) / 3 + 8)
            .sum()
    };
    while tokens(messages) > budget && messages.len() > 2 {
        let first_history = usize::from(messages.first().is_some_and(|m| m.role == "system"));
        if first_history >= messages.len() - 1 {
            break;
        }
        messages.remove(first_history);
    }
    let over = tokens(messages).saturating_sub(budget);
    if over > 0 {
        if let Some(last) = messages.last_mut().and_then(|m| m.content.as_mut()) {
            let keep = last.len().saturating_sub(over * 3);
            let mut start = last.len() - keep;
            while !last.is_char_boundary(start) {
                start += 1;
            }
            *last = last[start..].to_string();
        }
    }
}

/// Pass the caller's cancellation on to `inner` until `watching` drops.
fn watch_cancel(
    outer: CancelToken,
    inner: CancelToken,
    watching: Arc<std::sync::atomic::AtomicBool>,
) {
    let _ = std::thread::Builder::new()
        .name("llm-local-cancel".into())
        .spawn(move || {
            while watching.load(std::sync::atomic::Ordering::SeqCst) {
                if outer.is_cancelled() {
                    inner.cancel();
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
}

/// Keeps a streamed answer to its first `max` sentences: text is passed
/// on up to the end of the last whole sentence allowed, and `full` says
/// when to stop the stream. A sentence ends at `.`, `!` or `?` (closing
/// quotes or brackets included) followed by white space, so "3.5" and a
/// final "." still waiting for its space do not count.
pub struct SentenceCap {
    max: usize,
    text: String,
    passed: usize,
    cut: Option<usize>,
}

impl SentenceCap {
    /// `max` = 0: no cap.
    pub fn new(max: usize) -> SentenceCap {
        SentenceCap {
            max,
            text: String::new(),
            passed: 0,
            cut: None,
        }
    }

    /// Add a token; returns what to pass on and whether the cap is reached.
    pub fn push(&mut self, token: &str) -> (&str, bool) {
        if self.cut.is_some() {
            return ("", true);
        }
        self.text.push_str(token);
        let end = if self.max == 0 {
            self.text.len()
        } else {
            match nth_sentence_end(&self.text, self.max) {
                Some(at) => {
                    self.cut = Some(at);
                    at
                }
                None => self.text.len(),
            }
        };
        let from = self.passed.min(end);
        self.passed = end.max(self.passed);
        (&self.text[from..end], self.cut.is_some())
    }

    /// Whether the cap was reached.
    pub fn is_full(&self) -> bool {
        self.cut.is_some()
    }

    /// The text kept (all of it when the cap was not reached).
    pub fn kept(&self) -> &str {
        &self.text[..self.cut.unwrap_or(self.text.len())]
    }
}

/// Byte offset just after the `n`th sentence end in `text`.
fn nth_sentence_end(text: &str, n: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut seen = 0;
    let mut i = 0;
    while i < b.len() {
        if matches!(b[i], b'.' | b'!' | b'?') {
            let mut j = i + 1;
            while j < b.len() && matches!(b[j], b'"' | b'\'' | b')' | b'.' | b'!' | b'?') {
                j += 1;
            }
            if j < b.len() && b[j].is_ascii_whitespace() {
                seen += 1;
                if seen == n {
                    return Some(j);
                }
            }
            i = j;
        } else {
            i += 1;
        }
    }
    None
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn last_log_line(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(200).collect())
}

fn kill_and_reap(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Spawn on the one spawner thread, which lives as long as the process, so
/// `PR_SET_PDEATHSIG` (which fires when the *thread* that forked exits)
/// kills the child exactly when earshot exits, however it exits.
fn spawn_tied(cmd: Command) -> std::io::Result<Child> {
    use std::sync::mpsc;
    type Job = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: std::sync::OnceLock<Mutex<mpsc::Sender<Job>>> = std::sync::OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let _ = std::thread::Builder::new()
            .name("llm-local-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(spawn_with_death_signal(&mut cmd));
                }
            });
        Mutex::new(tx)
    });
    let (tx, rx) = mpsc::channel();
    sender
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((cmd, tx))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}

fn spawn_with_death_signal(cmd: &mut Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) between
    // fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// Stop the child after `secs` unused (its memory goes back to the
/// system); it loads again on the next request.
fn release_when_idle(model: Weak<LocalModel>, secs: u64) {
    let _ = std::thread::Builder::new()
        .name("llm-local-idle".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(500));
            let Some(model) = model.upgrade() else { return };
            let Ok(_busy) = model.gate.try_lock() else {
                continue;
            };
            let idle = {
                let state = model.lock_state();
                state.child.is_some()
                    && state
                        .last_used
                        .is_some_and(|t| t.elapsed() >= Duration::from_secs(secs))
            };
            if idle {
                tracing::info!(
                    secs,
                    "on-device model unused; stopping it to release its memory"
                );
                model.stop();
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatMessage;

    fn model_in(dir: &Path, cfg: LocalConfig) -> Arc<LocalModel> {
        LocalModel::new(&cfg, &Paths::new(dir, dir))
    }

    #[test]
    fn missing_or_corrupt_files_are_one_line_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let m = model_in(dir.path(), LocalConfig::default());
        let e = m.check_files().unwrap_err().to_string();
        assert!(
            e.contains("is missing") && e.contains("fetch-models.sh"),
            "{e}"
        );
        std::fs::write(
            dir.path().join(&LocalConfig::default().model_file),
            b"<html>",
        )
        .unwrap();
        let e = m.check_files().unwrap_err().to_string();
        assert!(e.contains("not a GGUF file"), "{e}");
        std::fs::write(
            dir.path().join(&LocalConfig::default().model_file),
            b"GGUF....",
        )
        .unwrap();
        let e = m.check_files().unwrap_err().to_string();
        assert!(e.contains("llama-server is missing"), "{e}");
        let m = model_in(
            dir.path(),
            LocalConfig {
                backend: LocalBackend::InProcess,
                ..LocalConfig::default()
            },
        );
        assert!(m
            .check_files()
            .unwrap_err()
            .to_string()
            .contains("backend = \"server\""));
        assert!(!m.can_use_tools());
    }

    #[test]
    fn a_child_that_exits_while_loading_is_a_sentence_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("m.gguf"), b"GGUF").unwrap();
        let prog = dir.path().join("fake-server");
        std::fs::write(
            &prog,
            "#!/bin/sh\necho 'gguf_init: bad magic' >&2\nexit 3\n",
        )
        .unwrap();
        std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let m = model_in(
            dir.path(),
            LocalConfig {
                model_file: "m.gguf".into(),
                server_program: "fake-server".into(),
                load_timeout_secs: 10,
                ..LocalConfig::default()
            },
        );
        let started = Instant::now();
        let e = m
            .chat(
                &ChatRequest {
                    model: String::new(),
                    messages: vec![ChatMessage::user("hi")],
                    temperature: 0.0,
                    max_completion_tokens: 10,
                    top_p: 1.0,
                    tools: Vec::new(),
                    stream: true,
                },
                &mut |_| {},
                &CancelToken::new(),
            )
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(matches!(e, LlmError::Local(_)), "{e:?}");
        assert!(e.to_string().contains("bad magic"), "{e}");
        assert!(e.user_sentence().ends_with('.'));
        assert_eq!(m.pid(), None);
    }

    #[test]
    fn a_spoken_answer_stops_after_its_sentences() {
        let mut cap = SentenceCap::new(2);
        let mut out = String::new();
        let mut full = false;
        for t in [
            "Water boils at 100",
            ".5? No",
            ": at 100 degrees.",
            " It is",
            " hot! Then",
            " more.",
        ] {
            let (shown, f) = cap.push(t);
            out.push_str(shown);
            full = f;
            if f {
                break;
            }
        }
        assert!(full);
        assert_eq!(out, "Water boils at 100.5? No: at 100 degrees.");
        assert_eq!(cap.kept(), out);
        let mut none = SentenceCap::new(0);
        assert_eq!(none.push("A. B. C. D. ").0, "A. B. C. D. ");
        assert!(!none.is_full());
    }

    #[test]
    fn the_oldest_history_goes_first_and_the_question_survives() {
        let mut ms = vec![ChatMessage::system("sys")];
        for i in 0..40 {
            ms.push(ChatMessage::user(format!(
                "old question {i} {}",
                "x".repeat(300)
            )));
            ms.push(ChatMessage::assistant("y".repeat(300)));
        }
        ms.push(ChatMessage::user(format!(
            "{} what is the capital of France?",
            "m".repeat(20_000)
        )));
        fit_to_window(&mut ms, 2048, 160);
        assert_eq!(ms[0].role, "system");
        assert_eq!(ms.len(), 2, "all history dropped");
        let last = ms[1].content.as_deref().unwrap();
        assert!(last.ends_with("what is the capital of France?"));
        assert!(last.len() / 3 < 2048);
        let mut short = vec![
            ChatMessage::system("s"),
            ChatMessage::user("q"),
            ChatMessage::assistant("a"),
            ChatMessage::user("q2"),
        ];
        fit_to_window(&mut short, 2048, 160);
        assert_eq!(short.len(), 4, "a prompt that fits is left alone");
    }
}
