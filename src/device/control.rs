//! The control socket of a running `earshot run`: `<state_dir>/control.sock`
//! (a Unix stream socket), one line in, one line out. `earshot mute`
//! reaches the loop through it.
//!
//! Commands: `mute on`, `mute off`, `mute toggle`, `mute status`; the
//! answer is `muted` or `unmuted` (or `error: …`). The server only flips a
//! shared flag the voice loop polls every tick: it never touches audio.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};

/// The socket's file name in the state directory.
pub const SOCKET: &str = "control.sock";

/// `<state_dir>/control.sock`.
pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join(SOCKET)
}

/// The server side, owned by `earshot run`; removes its socket when
/// dropped.
pub struct ControlServer {
    path: PathBuf,
    muted: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Listen at `path`. A socket file nobody answers on (a crash) is
    /// replaced; one a live process answers on is an error (another
    /// `earshot run` on this state directory).
    pub fn start(path: &Path) -> Result<ControlServer> {
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(anyhow!(
                    "another earshot run answers on {}; mute reaches that one",
                    path.display()
                ));
            }
            std::fs::remove_file(path)
                .with_context(|| format!("cannot remove the stale {}", path.display()))?;
        }
        let listener = UnixListener::bind(path)
            .with_context(|| format!("cannot listen on {}", path.display()))?;
        let muted = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (m, s) = (muted.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if s.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Ok(conn) = conn {
                        answer(conn, &m);
                    }
                }
            })?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            muted,
            stop,
            thread: Some(thread),
        })
    }

    /// The flag `mute` commands set.
    pub fn muted(&self) -> &Arc<AtomicBool> {
        &self.muted
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn answer(conn: UnixStream, muted: &AtomicBool) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
    let mut line = String::new();
    let mut reader = BufReader::new(&conn).take(256);
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let reply = match line.split_whitespace().collect::<Vec<_>>().as_slice() {
        ["mute", "on"] => {
            muted.store(true, Ordering::SeqCst);
            "muted".to_string()
        }
        ["mute", "off"] => {
            muted.store(false, Ordering::SeqCst);
            "unmuted".to_string()
        }
        ["mute", "toggle"] | ["mute"] => {
            let now = !muted.fetch_xor(true, Ordering::SeqCst);
            if now { "muted" } else { "unmuted" }.to_string()
        }
        ["mute", "status"] => if muted.load(Ordering::SeqCst) {
            "muted"
        } else {
            "unmuted"
        }
        .to_string(),
        _ => format!(
            "error: unknown command {:?}; use mute on|off|toggle|status",
            line.trim()
        ),
    };
    let mut conn = conn;
    let _ = writeln!(conn, "{reply}");
}

/// Why a command could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("earshot run is not running (no control socket answers at {0})")]
    NotRunning(PathBuf),
    #[error("the control socket at {0} did not answer: {1}")]
    Failed(PathBuf, String),
}

/// Send one command to the running loop; its one-line answer.
pub fn send(path: &Path, command: &str) -> Result<String, ControlError> {
    let mut conn =
        UnixStream::connect(path).map_err(|_| ControlError::NotRunning(path.to_path_buf()))?;
    let fail = |e: std::io::Error| ControlError::Failed(path.to_path_buf(), e.to_string());
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(fail)?;
    writeln!(conn, "{command}").map_err(fail)?;
    let mut line = String::new();
    BufReader::new(conn).read_line(&mut line).map_err(fail)?;
    Ok(line.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mute_commands_flip_the_flag_and_answer_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = socket_path(dir.path());
        assert!(matches!(
            send(&path, "mute on"),
            Err(ControlError::NotRunning(_))
        ));
        let server = ControlServer::start(&path).unwrap();
        assert_eq!(send(&path, "mute on").unwrap(), "muted");
        assert!(server.muted().load(Ordering::SeqCst));
        assert_eq!(send(&path, "mute toggle").unwrap(), "unmuted");
        assert_eq!(send(&path, "mute status").unwrap(), "unmuted");
        assert!(send(&path, "reboot")
            .unwrap()
            .starts_with("error: unknown command"));
        // A second server on the same state dir is refused.
        assert!(ControlServer::start(&path).is_err());
        drop(server);
        assert!(!path.exists());
        // A stale socket file (a crash) is replaced.
        let stale = UnixListener::bind(&path).unwrap();
        drop(stale);
        let server = ControlServer::start(&path).unwrap();
        assert_eq!(send(&path, "mute").unwrap(), "muted");
        drop(server);
    }
}
