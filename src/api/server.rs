//! Bind, check the address is safe, accept connections within a cap, and
//! feed a small bounded worker pool.
//!
//! The caller owns the accept loop (`earshot serve` pings the systemd
//! watchdog between [`ApiServer::poll`] calls, so a hung loop stops the
//! pings); [`ApiServer::shutdown`] stops accepting and waits for in-flight
//! turns.
//!
//! Each accepted connection gets its own short-lived thread that reads the
//! header block within `api.header_timeout_ms` and [`wire::MAX_HEAD_BYTES`],
//! runs [`routes::admit`] (Host, Origin, route, token, Content-Type) before
//! any of the body, reads the body within `api.body_timeout_ms`, and only
//! then hands the request to a worker. So a slow or hostile client holds a
//! connection slot for a bounded time and never a worker. At most
//! `api.max_connections` are open at once; one more gets a 503 and is
//! closed. Running out of file descriptors (EMFILE) is logged, the waiting
//! connection is shed through a reserved descriptor, and accepting goes on.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _, Result};
use crossbeam_channel::{Sender, TrySendError};
use serde_json::json;

use super::guard::Policy;
use super::routes::{self, Context, Refused, Request};
use super::speech::Speech;
use super::wire::{self, Deadline, Framing};
use super::{ApiConfig, ApiError};
use crate::agent::Services;

// Each worker holds its own clone of the services: they must be shareable.
const _: fn() = || {
    fn shareable<T: Clone + Send + Sync + 'static>() {}
    shareable::<Services>();
};

/// How long one write of the SSE stream may block on a client that does
/// not read (then the turn is cancelled as for a client gone).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections over the cap that get a written 503 at once, each on its
/// own tiny thread; beyond these, extra connections are just closed.
const SHED_THREADS: usize = 16;

/// Connections accepted per [`ApiServer::poll`] at most, so a flood never
/// starves the watchdog ping of the caller's loop.
const ACCEPT_BATCH: usize = 256;

/// How long a client that got an early answer to a bad head is read on
/// (so it reads the answer rather than a reset).
const HEAD_LINGER: Duration = Duration::from_secs(1);

/// The same after a refused request whose body may still be coming.
const BODY_LINGER: Duration = Duration::from_secs(5);

/// How often "out of file descriptors" is logged at most.
const FD_LOG_EVERY: Duration = Duration::from_secs(10);

/// What every connection thread and worker shares.
struct Shared {
    ctx: Context,
    /// Connections accepted and not yet closed (the cap counts these).
    open: AtomicUsize,
    max_connections: usize,
    /// 503s being written to connections over the cap.
    shedding: AtomicUsize,
    /// Connections answered early and read on until the client closes
    /// (their slot is already free); at most `max_connections`.
    lingering: AtomicUsize,
    header_timeout: Duration,
    body_timeout: Duration,
}

/// One open connection counted against `api.max_connections`; dropping it
/// frees the slot.
struct Slot(Arc<Shared>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A request with its body read, for a worker.
struct Job {
    request: Request,
    stream: TcpStream,
    _slot: Slot,
}

/// Out-of-descriptor bookkeeping for the accept loop.
struct FdPressure {
    /// A descriptor held back so one can be freed to accept-and-close the
    /// connection at the head of the queue when the process has none left.
    reserve: Option<File>,
    last_log: Option<Instant>,
    shed_since_log: u64,
}

/// A running API: the listening socket plus its workers.
pub struct ApiServer {
    listener: TcpListener,
    shared: Arc<Shared>,
    jobs: Sender<Job>,
    workers: Vec<JoinHandle<()>>,
    addr: SocketAddr,
    fds: Mutex<FdPressure>,
}

/// Resolve `bind` and refuse an address off loopback unless a token is set:
/// the API can read every conversation and speak through the device.
pub fn check_bind(bind: &str, token: &str) -> Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = bind
        .to_socket_addrs()
        .map_err(|e| {
            anyhow!("api bind address {bind:?} is not ADDR:PORT ({e}); use e.g. 127.0.0.1:8080")
        })?
        .collect();
    let addr = *addrs.first().ok_or_else(|| {
        anyhow!("api bind address {bind:?} resolves to nothing; use e.g. 127.0.0.1:8080")
    })?;
    let loopback = addrs.iter().all(|a| a.ip().is_loopback());
    if !loopback && token.trim().is_empty() {
        return Err(anyhow!(
            "refusing to listen on {bind} without a token: anyone on the network could use the assistant; set [api] token in the config (or bind 127.0.0.1)"
        ));
    }
    Ok(addr)
}

impl ApiServer {
    /// Bind and start the workers over `services` and the speech engines,
    /// both built once by the caller ([`crate::app`]).
    pub fn start_with_speech(
        services: Services,
        speech: Arc<Speech>,
        config: &ApiConfig,
    ) -> Result<ApiServer> {
        let addr = check_bind(&config.bind, &config.token)?;
        let listener = TcpListener::bind(addr).map_err(|e| {
            anyhow!("cannot listen on {addr}: {e}; is another earshot running? pick another port with --bind")
        })?;
        listener
            .set_nonblocking(true)
            .with_context(|| format!("cannot make the API socket on {addr} non-blocking"))?;
        let addr = listener.local_addr().unwrap_or(addr);
        let policy = Policy::new(addr, config)?;
        let workers_n = config.workers.clamp(1, 64);
        let (jobs, queue) = crossbeam_channel::bounded::<Job>(workers_n);
        let ctx = Context {
            services,
            speech,
            token: config.token.trim().to_string(),
            max_body_bytes: config.max_body_bytes,
            keepalive: Duration::from_secs(config.keepalive_secs.max(1)),
            max_tts_chars: config.max_tts_chars,
            max_chat_chars: config.max_chat_chars,
            max_voice_secs: config.max_voice_secs,
            policy: Arc::new(policy),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let shared = Arc::new(Shared {
            ctx,
            open: AtomicUsize::new(0),
            max_connections: config.max_connections.max(1),
            shedding: AtomicUsize::new(0),
            lingering: AtomicUsize::new(0),
            header_timeout: Duration::from_millis(config.header_timeout_ms.max(1)),
            body_timeout: Duration::from_millis(config.body_timeout_ms.max(1)),
        });
        let mut workers = Vec::with_capacity(workers_n);
        for i in 0..workers_n {
            let queue = queue.clone();
            let shared = shared.clone();
            let handle = std::thread::Builder::new()
                .name(format!("api-worker-{i}"))
                .spawn(move || {
                    for job in queue {
                        run_job(&shared.ctx, job);
                    }
                })
                .context("cannot start an API worker thread")?;
            workers.push(handle);
        }
        tracing::info!(
            %addr,
            workers = workers_n,
            max_connections = shared.max_connections,
            auth = !shared.ctx.token.is_empty(),
            "HTTP API listening"
        );
        Ok(ApiServer {
            listener,
            shared,
            jobs,
            workers,
            addr,
            fds: Mutex::new(FdPressure {
                reserve: File::open("/dev/null").ok(),
                last_log: None,
                shed_since_log: 0,
            }),
        })
    }

    /// The address actually bound (port 0 picks a free port).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Wait up to `wait` for connections and take the waiting ones: each
    /// gets a connection thread, or a 503 when `api.max_connections` are
    /// open. Never gives up on an accept error (EMFILE included).
    pub fn poll(&self, wait: Duration) {
        if !readable(&self.listener, wait) {
            return;
        }
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((stream, _peer)) => self.take(stream),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if out_of_descriptors(&e) => {
                    self.out_of_descriptors(&e);
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
                Err(e) => {
                    // ENOBUFS, ENOMEM and the like: back off a little and
                    // try again on the next poll.
                    tracing::warn!(error = %e, "HTTP API accept failed; retrying");
                    std::thread::sleep(Duration::from_millis(20).min(wait));
                    return;
                }
            }
        }
    }

    /// Start a connection thread for `stream`, or shed it over the cap.
    fn take(&self, stream: TcpStream) {
        let shared = &self.shared;
        if shared.open.load(Ordering::SeqCst) >= shared.max_connections {
            self.shed(stream);
            return;
        }
        shared.open.fetch_add(1, Ordering::SeqCst);
        let slot = Slot(shared.clone());
        let jobs = self.jobs.clone();
        let spawned = std::thread::Builder::new()
            .name("api-conn".into())
            .spawn(move || serve_connection(stream, slot, &jobs));
        if let Err(e) = spawned {
            // The closure (stream and slot) is dropped: closed, slot freed.
            tracing::warn!(error = %e, "cannot start an API connection thread; closed the connection");
        }
    }

    /// Answer 503 to a connection over the cap (on a small thread, so a
    /// client that does not read cannot stall the accept loop).
    fn shed(&self, stream: TcpStream) {
        let shared = &self.shared;
        if shared.shedding.fetch_add(1, Ordering::SeqCst) >= SHED_THREADS {
            shared.shedding.fetch_sub(1, Ordering::SeqCst);
            shed_now(&stream, shared.max_connections);
            return;
        }
        let owner = shared.clone();
        let max = shared.max_connections;
        let spawned = std::thread::Builder::new()
            .name("api-shed".into())
            .spawn(move || {
                let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
                let _ = (&stream).write_all(&busy_bytes(max));
                let deadline = Deadline::after(Duration::from_secs(1), &owner.ctx.stop);
                wire::linger(&stream, 64 * 1024, deadline);
                owner.shedding.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared.shedding.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// EMFILE/ENFILE: log (at most every [`FD_LOG_EVERY`]), free the
    /// reserved descriptor to accept and close the waiting connection, and
    /// take the reserve back; the next poll carries on.
    fn out_of_descriptors(&self, error: &io::Error) {
        let mut fds = self.fds.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if fds
            .last_log
            .is_none_or(|at| now.duration_since(at) >= FD_LOG_EVERY)
        {
            tracing::error!(
                error = %error,
                shed = fds.shed_since_log,
                open = self.shared.open.load(Ordering::SeqCst),
                "the HTTP API is out of file descriptors; closing new connections until some close (raise LimitNOFILE or lower api.max_connections)"
            );
            fds.last_log = Some(now);
            fds.shed_since_log = 0;
        }
        match fds.reserve.take() {
            Some(reserve) => {
                drop(reserve);
                if let Ok((stream, _)) = self.listener.accept() {
                    shed_now(&stream, self.shared.max_connections);
                    fds.shed_since_log += 1;
                }
                fds.reserve = File::open("/dev/null").ok();
            }
            None => {
                fds.reserve = File::open("/dev/null").ok();
            }
        }
        if fds.reserve.is_none() {
            // Still none to spare: do not spin on a readable listener.
            drop(fds);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Serve until `stop()` says so, then shut down — for `earshot run`,
    /// where the voice loop owns the main thread (and the watchdog), e.g.
    /// `thread::spawn(move || server.run_until(|| shutdown.is_cancelled()))`.
    pub fn run_until(self, stop: impl Fn() -> bool) {
        while !stop() {
            self.poll(Duration::from_millis(200));
        }
        self.shutdown();
    }

    /// Stop accepting, end reads in progress, let every admitted request
    /// finish, join the workers.
    pub fn shutdown(self) {
        let ApiServer {
            listener,
            shared,
            jobs,
            workers,
            ..
        } = self;
        shared.ctx.stop.store(true, Ordering::SeqCst);
        drop(listener);
        // Workers stop once this and every connection thread's sender is
        // gone and the queue is empty.
        drop(jobs);
        for worker in workers {
            let _ = worker.join();
        }
        tracing::info!("HTTP API stopped");
    }
}

/// Wait up to `wait` for the listener to have a connection waiting.
fn readable(listener: &TcpListener, wait: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(wait.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut fd, 1, ms) };
    n > 0
}

fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// Answer 503 without blocking and close: what the client already sent is
/// read first, so closing does not reset the connection before the
/// client reads the answer.
fn shed_now(stream: &TcpStream, max: usize) {
    let _ = stream.set_nonblocking(true);
    let mut buf = [0u8; 4096];
    for _ in 0..16 {
        match (&mut &*stream).read(&mut buf) {
            Ok(n) if n > 0 => continue,
            _ => break,
        }
    }
    let _ = (&mut &*stream).write_all(&busy_bytes(max));
    let _ = stream.shutdown(Shutdown::Write);
}

/// The 503 for a connection over the cap.
fn busy_bytes(max: usize) -> Vec<u8> {
    routes::json_bytes(
        503,
        &json!({"error": format!("earshot has too many open connections (api.max_connections = {max}); retry in a moment")}),
        &[("Retry-After", "1")],
        None,
        false,
    )
}

/// One connection: head (bounded), admission, body (bounded), then a
/// worker. Every early answer is written here.
fn serve_connection(stream: TcpStream, slot: Slot, jobs: &Sender<Job>) {
    let shared = slot.0.clone();
    let ctx = &shared.ctx;
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let (head, early) = match wire::read_head(
        &stream,
        Deadline::after(shared.header_timeout, &shared.ctx.stop),
    ) {
        Ok(parsed) => parsed,
        Err(e) => {
            if let Some(error) = e.to_api_error(shared.header_timeout) {
                let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
                let refused = Refused {
                    error,
                    path: String::new(),
                    cors: None,
                };
                let bytes = routes::refusal_bytes(&refused);
                answer_early(&shared, &stream, &bytes, slot, HEAD_LINGER, 64 * 1024);
            }
            return;
        }
    };
    let admitted = match routes::admit(ctx, head) {
        Ok(admitted) => admitted,
        Err(refused) => {
            let bytes = routes::refusal_bytes(&refused);
            let linger = shared.body_timeout.min(BODY_LINGER);
            answer_early(&shared, &stream, &bytes, slot, linger, wire::DRAIN_LIMIT);
            return;
        }
    };
    if let Some(bytes) = routes::quick(&admitted) {
        answer(&shared, &stream, &bytes);
        return;
    }
    if admitted.route == routes::Route::Events && !admitted.head_only {
        // A long-lived stream: on this thread, holding only its slot.
        routes::events(ctx, &admitted, &stream);
        let _ = stream.shutdown(Shutdown::Write);
        drop(slot);
        return;
    }
    if admitted.framing != Framing::Empty
        && admitted
            .head
            .header("Expect")
            .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        let _ = (&stream).write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let deadline = Deadline::after(shared.body_timeout, &shared.ctx.stop);
    let body = match wire::read_body(
        &stream,
        &early,
        admitted.framing,
        ctx.max_body_bytes,
        deadline,
    ) {
        Ok(body) => body,
        Err(error) => {
            let refused = Refused {
                error,
                path: admitted.head.path().to_string(),
                cors: admitted.cors.clone(),
            };
            let bytes = routes::refusal_bytes(&refused);
            let linger = shared.body_timeout.min(BODY_LINGER);
            answer_early(&shared, &stream, &bytes, slot, linger, wire::DRAIN_LIMIT);
            return;
        }
    };
    let job = Job {
        request: Request { admitted, body },
        stream,
        _slot: slot,
    };
    match jobs.try_send(job) {
        Ok(()) => {}
        Err(TrySendError::Full(job)) | Err(TrySendError::Disconnected(job)) => {
            let refused = Refused {
                error: ApiError::unavailable(
                    "earshot is busy with other requests; retry in a moment",
                ),
                path: job.request.admitted.head.path().to_string(),
                cors: job.request.admitted.cors.clone(),
            };
            answer(&shared, &job.stream, &routes::refusal_bytes(&refused));
        }
    }
}

/// Run one request on a worker; a bug in a handler must not shrink the
/// pool (the client gets a 500).
fn run_job(ctx: &Context, job: Job) {
    let Job {
        request, stream, ..
    } = job;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        routes::handle(ctx, request, &stream)
    }));
    if result.is_err() {
        tracing::error!("an API request handler panicked");
        let error = ApiError::new(
            500,
            "something went wrong inside earshot; the request was not completed, retry or report it",
        );
        let refused = Refused {
            error,
            path: String::new(),
            cors: None,
        };
        let _ = wire::write_answer(&stream, &routes::refusal_bytes(&refused), &ctx.stop);
    }
    let _ = stream.shutdown(Shutdown::Write);
}

/// Write a whole answer to a request whose body was read, and close.
fn answer(shared: &Shared, stream: &TcpStream, bytes: &[u8]) {
    let _ = wire::write_answer(stream, bytes, &shared.ctx.stop);
    let _ = stream.shutdown(Shutdown::Write);
}

/// Write an answer sent before the body (or the rest of the head) was
/// read, free the connection's slot, then read on and discard up to
/// `unread` bytes for at most `linger` so the client is not reset before
/// it reads the answer. At most `max_connections` linger at once.
fn answer_early(
    shared: &Shared,
    stream: &TcpStream,
    bytes: &[u8],
    slot: Slot,
    linger: Duration,
    unread: u64,
) {
    let written = wire::write_answer(stream, bytes, &shared.ctx.stop);
    drop(slot);
    if written.is_err() {
        return;
    }
    if shared.lingering.fetch_add(1, Ordering::SeqCst) < shared.max_connections {
        wire::linger(
            stream,
            unread.min(wire::DRAIN_LIMIT),
            Deadline::after(linger, &shared.ctx.stop),
        );
    } else {
        let _ = stream.shutdown(Shutdown::Write);
    }
    shared.lingering.fetch_sub(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_needs_no_token_but_elsewhere_does() {
        assert!(check_bind("127.0.0.1:0", "").is_ok());
        assert!(check_bind("[::1]:0", "").is_ok());
        assert!(check_bind("localhost:0", "").is_ok());
        let err = check_bind("0.0.0.0:8080", "").unwrap_err().to_string();
        assert!(err.contains("token"), "{err}");
        assert!(check_bind("0.0.0.0:8080", "s3cret").is_ok());
        assert!(check_bind("not an address", "").is_err());
    }

    #[test]
    fn run_until_serves_then_stops_and_frees_the_port() {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::config::Config {
            state_dir: dir.path().to_path_buf(),
            ..Default::default()
        };
        let store = crate::store::Store::open(&config.database_path()).unwrap();
        let llm: std::sync::Arc<dyn crate::llm::ChatModel> =
            std::sync::Arc::new(crate::llm::openai::OpenAiClient::new(&config.llm));
        let services = crate::app::assemble(&config, store, llm, None, None);
        let speech = Arc::new(Speech::new(
            Err("off in this test".into()),
            crate::tts::Tts::with_engines(Vec::new()),
        ));
        let api = ApiConfig {
            bind: "127.0.0.1:0".into(),
            ..ApiConfig::default()
        };
        let server = ApiServer::start_with_speech(services, speech, &api).unwrap();
        let addr = server.local_addr();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            server.run_until(|| flag.load(std::sync::atomic::Ordering::SeqCst))
        });
        let body = ureq::get(&format!("http://{addr}/api/health"))
            .call()
            .unwrap()
            .into_body()
            .read_to_string()
            .unwrap();
        assert_eq!(body, r#"{"status":"ok"}"#);
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        thread.join().unwrap();
        // Stopped: the port is free again.
        assert!(std::net::TcpListener::bind(addr).is_ok());
    }
}
