//! Bind, check the address is safe, and feed a small bounded worker pool.
//!
//! The caller owns the loop (`earshot serve` pings the systemd watchdog
//! between [`ApiServer::poll`] calls, so a hung loop stops the pings);
//! [`ApiServer::shutdown`] stops accepting and waits for in-flight turns.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, Context as _, Result};
use crossbeam_channel::{Sender, TrySendError};
use serde_json::json;

use super::routes::{self, Context};
use super::speech::Speech;
use super::ApiConfig;
use crate::agent::Services;

// Each worker holds its own clone of the services: they must be shareable.
const _: fn() = || {
    fn shareable<T: Clone + Send + Sync + 'static>() {}
    shareable::<Services>();
};

/// A running API: the listening socket plus its workers.
pub struct ApiServer {
    http: tiny_http::Server,
    jobs: Sender<tiny_http::Request>,
    workers: Vec<JoinHandle<()>>,
    addr: SocketAddr,
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
        let http = tiny_http::Server::http(addr).map_err(|e| {
            anyhow!("cannot listen on {addr}: {e}; is another earshot running? pick another port with --bind")
        })?;
        let addr = http.server_addr().to_ip().unwrap_or(addr);
        let workers_n = config.workers.clamp(1, 64);
        let (jobs, queue) = crossbeam_channel::bounded::<tiny_http::Request>(workers_n);
        let ctx = Context {
            services,
            speech,
            token: config.token.trim().to_string(),
            max_body_bytes: config.max_body_bytes,
            keepalive: Duration::from_secs(config.keepalive_secs.max(1)),
        };
        let mut workers = Vec::with_capacity(workers_n);
        for i in 0..workers_n {
            let queue = queue.clone();
            let ctx = ctx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("api-worker-{i}"))
                .spawn(move || {
                    for request in queue {
                        // A bug in one handler must not shrink the pool;
                        // the dropped request answers 500 by itself.
                        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            routes::handle(&ctx, request)
                        }));
                        if result.is_err() {
                            tracing::error!("an API request handler panicked");
                        }
                    }
                })
                .context("cannot start an API worker thread")?;
            workers.push(handle);
        }
        tracing::info!(%addr, workers = workers_n, auth = !ctx.token.is_empty(), "HTTP API listening");
        Ok(ApiServer {
            http,
            jobs,
            workers,
            addr,
        })
    }

    /// The address actually bound (port 0 picks a free port).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Wait up to `wait` for one request and hand it to a worker. A full
    /// pool answers 503 at once rather than queueing without bound.
    pub fn poll(&self, wait: Duration) {
        match self.http.recv_timeout(wait) {
            Ok(Some(request)) => match self.jobs.try_send(request) {
                Ok(()) => {}
                Err(TrySendError::Full(request)) | Err(TrySendError::Disconnected(request)) => {
                    routes::respond_json(
                        request,
                        503,
                        &json!({"error": "earshot is busy with other requests; retry in a moment"}),
                        &[("Retry-After", "1")],
                    );
                }
            },
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "HTTP API receive failed"),
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

    /// Stop accepting, let every in-flight request finish, join the workers.
    pub fn shutdown(self) {
        let ApiServer {
            http,
            jobs,
            workers,
            ..
        } = self;
        drop(http);
        drop(jobs);
        for worker in workers {
            let _ = worker.join();
        }
        tracing::info!("HTTP API stopped");
    }
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
