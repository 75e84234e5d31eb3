//! systemd's notify protocol (`sd_notify`), hand-written over a Unix
//! datagram socket so the service needs no libsystemd.
//!
//! Why: the unit is `Type=notify` with `WatchdogSec=`. systemd considers the
//! service started only when it says `READY=1` (after models load, so a
//! dependent unit never talks to a half-started assistant), and restarts it
//! when the main loop stops saying `WATCHDOG=1` (a hung audio device or a
//! deadlock becomes a restart instead of a silent, deaf box).
//!
//! The protocol: `$NOTIFY_SOCKET` names a datagram socket (a path, or an
//! abstract name written with a leading `@`); each datagram is newline-
//! separated `KEY=VALUE` lines. `$WATCHDOG_USEC` is the watchdog timeout;
//! `$WATCHDOG_PID`, when set, says which process it is meant for. Outside
//! systemd (no `$NOTIFY_SOCKET`) every call is a cheap no-op.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

/// Where notifications go, read once from the environment at start.
#[derive(Debug)]
pub struct Notifier {
    target: Option<Target>,
    /// Half the watchdog timeout (systemd's own advice), when one is set
    /// for this process.
    watchdog_interval: Option<Duration>,
}

#[derive(Debug)]
struct Target {
    socket: UnixDatagram,
    /// The `$NOTIFY_SOCKET` value as given (path or `@abstract`).
    address: String,
}

impl Notifier {
    /// A notifier from `$NOTIFY_SOCKET`, `$WATCHDOG_USEC` and
    /// `$WATCHDOG_PID`. A socket that cannot be created is logged and
    /// notifications are dropped: readiness must never stop the service.
    pub fn from_env() -> Notifier {
        let address = std::env::var("NOTIFY_SOCKET").ok();
        let usec = std::env::var("WATCHDOG_USEC").ok();
        let pid = std::env::var("WATCHDOG_PID").ok();
        Self::new(address.as_deref(), usec.as_deref(), pid.as_deref())
    }

    /// As [`Notifier::from_env`], with the values given (tests use this).
    pub fn new(
        address: Option<&str>,
        watchdog_usec: Option<&str>,
        watchdog_pid: Option<&str>,
    ) -> Notifier {
        let target = address.filter(|a| !a.is_empty()).and_then(|address| {
            match UnixDatagram::unbound() {
                Ok(socket) => Some(Target {
                    socket,
                    address: address.to_string(),
                }),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot create the systemd notify socket; readiness and watchdog pings are off");
                    None
                }
            }
        });
        let for_us = match watchdog_pid.map(str::trim).filter(|p| !p.is_empty()) {
            Some(pid) => pid.parse::<u32>().ok() == Some(std::process::id()),
            None => true,
        };
        let watchdog_interval = watchdog_usec
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|usec| *usec > 0 && for_us && target.is_some())
            .map(|usec| Duration::from_micros(usec / 2));
        Notifier {
            target,
            watchdog_interval,
        }
    }

    /// A notifier that sends nothing (for front doors run outside systemd).
    pub fn disabled() -> Notifier {
        Notifier {
            target: None,
            watchdog_interval: None,
        }
    }

    /// Whether systemd is listening at all.
    pub fn is_enabled(&self) -> bool {
        self.target.is_some()
    }

    /// How often the main loop must ping, or `None` when no watchdog is set.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog_interval
    }

    /// Send raw `KEY=VALUE` lines. Errors are returned for tests and logged
    /// by the convenience methods below.
    pub fn send(&self, state: &str) -> io::Result<()> {
        let Some(target) = &self.target else {
            return Ok(());
        };
        send_to(&target.socket, &target.address, state.as_bytes())
    }

    /// Start-up is complete (models loaded, sockets bound).
    pub fn ready(&self) {
        self.send_logged("READY=1");
    }

    /// The main loop is alive.
    pub fn watchdog(&self) {
        self.send_logged("WATCHDOG=1");
    }

    /// A one-line status shown by `systemctl status`.
    pub fn status(&self, status: &str) {
        // A newline would start a new KEY=VALUE line; keep it one line.
        let status = status.replace('\n', " ");
        self.send_logged(&format!("STATUS={status}"));
    }

    /// Shutdown has begun (in-flight work is finishing).
    pub fn stopping(&self) {
        self.send_logged("STOPPING=1");
    }

    fn send_logged(&self, state: &str) {
        if let Err(e) = self.send(state) {
            tracing::debug!(error = %e, state, "systemd notify failed");
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn send_to(socket: &UnixDatagram, address: &str, payload: &[u8]) -> io::Result<()> {
    if let Some(name) = address.strip_prefix('@') {
        #[cfg(target_os = "android")]
        use std::os::android::net::SocketAddrExt;
        #[cfg(target_os = "linux")]
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        socket.send_to_addr(payload, &addr).map(|_| ())
    } else {
        socket.send_to(payload, address).map(|_| ())
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn send_to(socket: &UnixDatagram, address: &str, payload: &[u8]) -> io::Result<()> {
    if address.starts_with('@') {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "abstract notify sockets exist only on Linux",
        ));
    }
    socket.send_to(payload, address).map(|_| ())
}

/// Paces watchdog pings from a main loop: call [`Heartbeat::beat`] every
/// iteration; it pings only when half the timeout has passed. Only the main
/// loop may own this — a ping from a helper thread would hide a hung loop.
#[derive(Debug)]
pub struct Heartbeat<'a> {
    notifier: &'a Notifier,
    last: Option<Instant>,
}

impl<'a> Heartbeat<'a> {
    pub fn new(notifier: &'a Notifier) -> Self {
        Self {
            notifier,
            last: None,
        }
    }

    /// Ping when due; returns whether a ping was sent.
    pub fn beat(&mut self) -> bool {
        let Some(interval) = self.notifier.watchdog_interval() else {
            return false;
        };
        if self.last.is_some_and(|last| last.elapsed() < interval) {
            return false;
        }
        self.notifier.watchdog();
        self.last = Some(Instant::now());
        true
    }

    /// The longest a loop iteration may block and still ping in time.
    pub fn max_wait(&self, default: Duration) -> Duration {
        match self.notifier.watchdog_interval() {
            Some(interval) => interval.min(default),
            None => default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recv(socket: &UnixDatagram) -> String {
        let mut buf = [0u8; 256];
        let n = socket.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn path_socket_receives_each_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let listener = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::new(path.to_str(), Some("1000000"), None);
        assert!(n.is_enabled());
        assert_eq!(n.watchdog_interval(), Some(Duration::from_millis(500)));
        n.ready();
        n.watchdog();
        n.status("loading\nmodels");
        n.stopping();
        assert_eq!(recv(&listener), "READY=1");
        assert_eq!(recv(&listener), "WATCHDOG=1");
        assert_eq!(recv(&listener), "STATUS=loading models");
        assert_eq!(recv(&listener), "STOPPING=1");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn abstract_socket_with_at_sign() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("earshot-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        let n = Notifier::new(Some(&format!("@{name}")), None, None);
        n.send("READY=1").unwrap();
        assert_eq!(recv(&listener), "READY=1");
    }

    #[test]
    fn no_socket_is_a_no_op_and_no_watchdog() {
        let n = Notifier::new(None, Some("1000000"), None);
        assert!(!n.is_enabled());
        assert_eq!(n.watchdog_interval(), None);
        n.send("READY=1").unwrap();
        assert!(!Heartbeat::new(&n).beat());
    }

    #[test]
    fn watchdog_for_another_pid_is_ignored() {
        let n = Notifier::new(Some("/nonexistent/sock"), Some("1000000"), Some("1"));
        assert_eq!(n.watchdog_interval(), None);
        let mine = std::process::id().to_string();
        let n = Notifier::new(Some("/nonexistent/sock"), Some("1000000"), Some(&mine));
        assert!(n.watchdog_interval().is_some());
    }

    #[test]
    fn missing_socket_path_is_an_error_not_a_panic() {
        let n = Notifier::new(Some("/nonexistent/dir/sock"), None, None);
        assert!(n.send("READY=1").is_err());
        n.ready(); // logged, not fatal
    }

    #[test]
    fn heartbeat_paces_pings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n.sock");
        let listener = UnixDatagram::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        // 2 s timeout → ping at most every second.
        let n = Notifier::new(path.to_str(), Some("2000000"), None);
        let mut hb = Heartbeat::new(&n);
        assert!(hb.beat());
        assert!(!hb.beat());
        assert_eq!(hb.max_wait(Duration::from_secs(5)), Duration::from_secs(1));
        let mut buf = [0u8; 64];
        assert_eq!(listener.recv(&mut buf).unwrap(), "WATCHDOG=1".len());
        assert!(listener.recv(&mut buf).is_err(), "only one ping expected");
    }
}
