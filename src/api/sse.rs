//! The R-SSE stream over HTTP: a turn's events written as they happen.
//!
//! The turn runs on its own (scoped) thread and hands events over a
//! channel; this side writes each as an SSE frame in its own HTTP chunk and
//! flushes, and writes a `: thinking` comment whenever nothing happened for
//! `keepalive` (so proxies and clients keep the connection during long tool
//! calls). If the client goes away the turn is cancelled, not left running.

use std::io::{self, Write};
use std::time::Duration;

use crossbeam_channel::RecvTimeoutError;

use crate::agent::turn::{run_turn, TurnInput, TurnOutcome};
use crate::agent::Services;
use crate::cancel::CancelToken;
use crate::events::Event;

/// An HTTP/1.1 response with a chunked `text/event-stream` body, written
/// straight to the socket so every frame leaves at once (tiny_http's own
/// chunked encoder buffers 8 KiB).
pub struct SseWriter<W: Write> {
    out: W,
}

impl<W: Write> SseWriter<W> {
    /// Write the status line and headers.
    pub fn start(out: W) -> io::Result<Self> {
        Self::start_with(out, &[])
    }

    /// Write the status line and headers, with `extra` ones (CORS for an
    /// allowed browser origin; any with a line break is dropped). The
    /// connection closes after the stream, like every API answer.
    pub fn start_with(mut out: W, extra: &[(&str, &str)]) -> io::Result<Self> {
        let mut head = String::from(
            "HTTP/1.1 200 OK\r\n\
             Content-Type: text/event-stream; charset=utf-8\r\n\
             Cache-Control: no-cache\r\n\
             X-Accel-Buffering: no\r\n\
             Connection: close\r\n",
        );
        for (name, value) in extra {
            if !name.contains(['\r', '\n', ':']) && !value.contains(['\r', '\n']) {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        out.write_all(head.as_bytes())?;
        out.flush()?;
        Ok(Self { out })
    }

    /// Send one piece of SSE text as its own chunk.
    pub fn send(&mut self, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        write!(self.out, "{:x}\r\n", text.len())?;
        self.out.write_all(text.as_bytes())?;
        self.out.write_all(b"\r\n")?;
        self.out.flush()
    }

    /// End the body (the zero-length chunk).
    pub fn finish(mut self) -> io::Result<()> {
        self.out.write_all(b"0\r\n\r\n")?;
        self.out.flush()
    }
}

/// Run a turn and stream it. Returns the outcome (also when the client
/// left early: the turn was then cancelled).
pub fn stream_turn<W: Write>(
    services: &Services,
    input: TurnInput,
    mut writer: SseWriter<W>,
    keepalive: Duration,
) -> Option<TurnOutcome> {
    let cancel = CancelToken::new();
    let (tx, rx) = crossbeam_channel::unbounded::<Event>();
    let keepalive = keepalive.max(Duration::from_millis(50));
    std::thread::scope(|scope| {
        let turn_cancel = cancel.clone();
        let turn = scope.spawn(move || {
            let mut sink = |event: &Event| {
                let _ = tx.send(event.clone());
            };
            run_turn(services, input, &mut sink, &turn_cancel)
        });
        let mut client_gone = false;
        loop {
            let text = match rx.recv_timeout(keepalive) {
                Ok(event) => event.to_sse(),
                Err(RecvTimeoutError::Timeout) => Event::KeepAlive.to_sse(),
                Err(RecvTimeoutError::Disconnected) => break,
            };
            if !client_gone && writer.send(&text).is_err() {
                tracing::info!("stream client went away; cancelling its turn");
                client_gone = true;
                cancel.cancel();
            }
        }
        let outcome = match turn.join() {
            Ok(outcome) => Some(outcome),
            Err(_) => {
                tracing::error!("a streamed turn panicked");
                let frame = Event::Error {
                    message: "Something went wrong inside earshot; the turn was not saved.".into(),
                }
                .to_sse();
                if !client_gone {
                    let _ = writer.send(&frame);
                }
                None
            }
        };
        if !client_gone {
            let _ = writer.finish();
        }
        outcome
    })
}

/// One stream of device events, turned into JSON as they are received
/// (no forwarding thread: the stream selects over all of them).
pub struct EventSource(Box<dyn Source>);

impl EventSource {
    /// Events from `rx`, each written as `map(event)`.
    pub fn new<T: Send + 'static>(
        rx: crossbeam_channel::Receiver<T>,
        map: impl Fn(T) -> serde_json::Value + Send + 'static,
    ) -> EventSource {
        EventSource(Box::new(Mapped { rx, map }))
    }
}

/// A receiver of any event type behind one interface.
trait Source: Send {
    fn register<'a>(&'a self, select: &mut crossbeam_channel::Select<'a>);
    /// The selected event as JSON; `None` once the sender is gone.
    fn take(&self, op: crossbeam_channel::SelectedOperation<'_>) -> Option<serde_json::Value>;
}

struct Mapped<T, F> {
    rx: crossbeam_channel::Receiver<T>,
    map: F,
}

impl<T: Send, F: Fn(T) -> serde_json::Value + Send> Source for Mapped<T, F> {
    fn register<'a>(&'a self, select: &mut crossbeam_channel::Select<'a>) {
        select.recv(&self.rx);
    }
    fn take(&self, op: crossbeam_channel::SelectedOperation<'_>) -> Option<serde_json::Value> {
        op.recv(&self.rx).ok().map(&self.map)
    }
}

/// The device's events as they happen (`GET /api/events`): every tree
/// `publish_event` (`{"type":"event","event","data","conversation_id","timestamp"}`)
/// and every timer event (`{"type":"timer","event":"ringing",…}`), one SSE
/// frame each, a `: thinking` comment after `keepalive` of silence, until
/// the client leaves or `stop` says the server is shutting down.
pub fn stream_events<W: Write>(
    mut writer: SseWriter<W>,
    sources: Vec<EventSource>,
    keepalive: Duration,
    stop: &std::sync::atomic::AtomicBool,
) {
    // Wake at least this often to notice a shutdown.
    let tick = keepalive.clamp(Duration::from_millis(50), Duration::from_millis(500));
    let mut quiet_since = std::time::Instant::now();
    let mut open: Vec<_> = sources;
    loop {
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        let mut frame = None;
        if !open.is_empty() {
            let mut select = crossbeam_channel::Select::new();
            for source in &open {
                source.0.register(&mut select);
            }
            let mut closed = None;
            if let Ok(op) = select.select_timeout(tick) {
                let index = op.index();
                match open[index].0.take(op) {
                    Some(value) => frame = Some(format!("data: {value}\n\n")),
                    None => closed = Some(index),
                }
            }
            drop(select);
            if let Some(index) = closed {
                open.remove(index);
            }
        } else {
            std::thread::sleep(tick);
        }
        let text = match frame {
            Some(text) => text,
            None if quiet_since.elapsed() >= keepalive => Event::KeepAlive.to_sse(),
            None => continue,
        };
        quiet_since = std::time::Instant::now();
        if writer.send(&text).is_err() {
            tracing::info!("event stream client went away");
            return;
        }
    }
    let _ = writer.finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_streamed_with_keepalives_until_the_server_stops() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopper = stop.clone();
        tx.send(serde_json::json!({"type": "timer", "event": "ringing", "id": 1}))
            .unwrap();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(250));
            tx.send(serde_json::json!({"type": "tree", "event": "stop"}))
                .unwrap();
            std::thread::sleep(Duration::from_millis(100));
            stopper.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let mut buf = Vec::new();
        let w = SseWriter::start(&mut buf).unwrap();
        let source = EventSource::new(rx, |v: serde_json::Value| v);
        stream_events(w, vec![source], Duration::from_millis(100), &stop);
        sender.join().unwrap();
        let text = String::from_utf8(buf).unwrap();
        let ringing = text
            .find(r#"data: {"type":"timer","event":"ringing","id":1}"#)
            .unwrap();
        let keep = text.find(": thinking").unwrap();
        let tree = text
            .find(r#"data: {"type":"tree","event":"stop"}"#)
            .unwrap();
        assert!(ringing < keep && keep < tree, "{text}");
        assert!(text.ends_with("0\r\n\r\n"));
    }

    #[test]
    fn frames_are_chunked_and_terminated() {
        let mut buf = Vec::new();
        let mut w = SseWriter::start(&mut buf).unwrap();
        w.send("data: {}\n\n").unwrap();
        w.send("").unwrap();
        w.finish().unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(text.contains("Transfer-Encoding: chunked\r\n\r\n"));
        assert!(
            text.ends_with("\r\n\r\na\r\ndata: {}\n\n\r\n0\r\n\r\n"),
            "{text:?}"
        );
    }
}
