//! A scripted HTTP/1.1 server on a real loopback socket, for tests that
//! speak cloud APIs' wire formats (Groq/OpenAI, Tavily, Notion…).
//!
//! ```ignore
//! let server = TestServer::start(|req: &Request| Reply::json(200, r#"{"ok":true}"#));
//! let url = server.url(); // http://127.0.0.1:PORT
//! ```
//! A reply is a status, headers and body *pieces*: each piece is written
//! and flushed, optionally after a pause, so SSE streams arrive in chunks;
//! `Piece::Stall` keeps the socket open and silent (timeout tests).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One piece of a response body.
#[derive(Debug, Clone)]
pub enum Piece {
    Bytes(Vec<u8>),
    /// Wait before the next piece.
    Pause(Duration),
    /// Stop sending but keep the connection open for this long.
    Stall(Duration),
    /// Close the connection abruptly here.
    Close,
}

/// A scripted response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub pieces: Vec<Piece>,
    /// Send `Content-Length` (true) or stream with `Connection: close`.
    pub sized: bool,
}

impl Reply {
    pub fn new(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            pieces: Vec::new(),
            sized: true,
        }
    }
    pub fn json(status: u16, body: &str) -> Self {
        Self::new(status)
            .header("Content-Type", "application/json")
            .body(body.as_bytes())
    }
    pub fn bytes(status: u16, content_type: &str, body: &[u8]) -> Self {
        Self::new(status)
            .header("Content-Type", content_type)
            .body(body)
    }
    /// A server-sent-events stream: each item is one `data:` payload.
    pub fn sse(events: &[&str]) -> Self {
        let mut r = Self::new(200).header("Content-Type", "text/event-stream");
        r.sized = false;
        for e in events {
            r.pieces
                .push(Piece::Bytes(format!("data: {e}\n\n").into_bytes()));
        }
        r
    }
    pub fn header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.into(), v.into()));
        self
    }
    pub fn body(mut self, b: &[u8]) -> Self {
        self.pieces.push(Piece::Bytes(b.to_vec()));
        self
    }
    pub fn piece(mut self, p: Piece) -> Self {
        self.sized = false;
        self.pieces.push(p);
        self
    }
    pub fn streamed(mut self) -> Self {
        self.sized = false;
        self
    }
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// The server; stops accepting when dropped.
pub struct TestServer {
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

impl TestServer {
    pub fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let log = requests.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let handler = handler.clone();
                let log = log.clone();
                thread::spawn(move || serve(stream, &*handler, &log));
            }
        });
        TestServer { port, requests }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, handler: &Handler, log: &Mutex<Vec<Request>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let len = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0);
        let chunked = headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
        let mut body = vec![0u8; len];
        if len > 0 && reader.read_exact(&mut body).is_err() {
            return;
        }
        if chunked {
            body = read_chunked(&mut reader);
        }
        let request = Request {
            method,
            path,
            headers,
            body,
        };
        log.lock().unwrap().push(request.clone());
        let reply = handler(&request);
        let mut out = stream.try_clone().unwrap();
        let reason = match reply.status {
            200 => "OK",
            400 => "Bad Request",
            401 => "Unauthorized",
            404 => "Not Found",
            429 => "Too Many Requests",
            500 => "Internal Server Error",
            502 => "Bad Gateway",
            503 => "Service Unavailable",
            _ => "Status",
        };
        let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason);
        for (k, v) in &reply.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        let total: usize = reply
            .pieces
            .iter()
            .map(|p| if let Piece::Bytes(b) = p { b.len() } else { 0 })
            .sum();
        if reply.sized {
            head.push_str(&format!("Content-Length: {total}\r\n\r\n"));
        } else {
            head.push_str("Connection: close\r\n\r\n");
        }
        if out.write_all(head.as_bytes()).is_err() {
            return;
        }
        for piece in &reply.pieces {
            match piece {
                Piece::Bytes(b) => {
                    if out.write_all(b).is_err() || out.flush().is_err() {
                        return;
                    }
                }
                Piece::Pause(d) => thread::sleep(*d),
                Piece::Stall(d) => {
                    thread::sleep(*d);
                    return;
                }
                Piece::Close => {
                    let _ = out.shutdown(std::net::Shutdown::Both);
                    return;
                }
            }
        }
        if !reply.sized {
            let _ = out.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

fn read_chunked(reader: &mut BufReader<TcpStream>) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        if reader.read_line(&mut size).unwrap_or(0) == 0 {
            return body;
        }
        let n =
            usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        if n == 0 {
            let mut end = String::new();
            let _ = reader.read_line(&mut end);
            return body;
        }
        let mut chunk = vec![0u8; n];
        if reader.read_exact(&mut chunk).is_err() {
            return body;
        }
        body.extend_from_slice(&chunk);
        let mut crlf = String::new();
        let _ = reader.read_line(&mut crlf);
    }
}

/// OpenAI/Groq streamed chat-completion chunks for a plain text answer.
pub fn openai_stream_chunks(model: &str, pieces: &[&str]) -> Vec<String> {
    let mut out = vec![serde_json::json!({
        "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": model,
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]
    }).to_string()];
    for p in pieces {
        out.push(serde_json::json!({
            "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": model,
            "choices": [{"index": 0, "delta": {"content": p}, "logprobs": null, "finish_reason": null}]
        }).to_string());
    }
    out.push(serde_json::json!({
        "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": model,
        "choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"}],
        "x_groq": {"id": "req_test", "usage": {"prompt_tokens": 10, "completion_tokens": pieces.len()}}
    }).to_string());
    out.push("[DONE]".into());
    out
}

/// A non-streamed OpenAI/Groq chat completion with plain content.
pub fn openai_completion(model: &str, content: &str) -> String {
    serde_json::json!({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    }).to_string()
}
