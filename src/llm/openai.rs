//! The OpenAI-compatible chat-completions client (Groq, llama.cpp, Ollama).
//!
//! Blocking (ureq) on a worker thread; the caller's thread waits on a
//! channel so it can notice cancellation (barge-in, SIGTERM) and an idle
//! stream (no byte for `read_timeout`) without any async runtime.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde_json::Value;

use super::sse::SseParser;
use super::think::ThinkFilter;
use super::LlmConfig;
use super::{ChatModel, ChatRequest, ChatResponse, LlmError, ToolCall};
use crate::cancel::CancelToken;
use crate::http::{self, Head, HttpError, HttpSettings};

/// Largest error or non-streamed body we read.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// A client for one base URL and key.
#[derive(Clone)]
pub struct OpenAiClient {
    base_url: String,
    api_key: String,
    agent: ureq::Agent,
    read_timeout: Duration,
    first_byte_timeout: Duration,
    total_timeout: Duration,
    max_retry_after: Duration,
    reply_cap: usize,
    max_retries: u32,
    backoff: Duration,
    configured: Result<(), String>,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("OpenAiClient")
            .field("base_url", &self.base_url)
            .finish()
    }
}

enum Piece {
    Head {
        status: u16,
        retry_after: Option<Duration>,
        json: bool,
    },
    Bytes(Vec<u8>),
    End,
    Failed(LlmError),
}

impl OpenAiClient {
    pub fn new(cfg: &LlmConfig) -> Self {
        let agent = HttpSettings {
            connect_timeout: Some(Duration::from_secs(cfg.connect_timeout_secs.max(1))),
            response_timeout: Some(Duration::from_secs(cfg.first_byte_timeout_secs.max(1))),
            // The idle and total deadlines are enforced by the caller; this
            // only bounds a reader thread left behind by a stalled stream.
            global_timeout: Some(Duration::from_secs(cfg.total_timeout_secs.max(1) + 5)),
            ..HttpSettings::default()
        }
        .agent();
        let configured = if cfg.base_url.trim().is_empty() {
            Err("Set LLM_BASE_URL (or llm.base_url) to an OpenAI-compatible server.".to_string())
        } else if !cfg.is_usable() {
            Err("Set GROQ_API_KEY, or point LLM_BASE_URL at a local OpenAI-compatible server such as llama.cpp or Ollama.".to_string())
        } else {
            Ok(())
        };
        Self {
            base_url: cfg.base_url.trim_end_matches('/').to_string(),
            api_key: cfg.api_key.clone(),
            agent,
            read_timeout: Duration::from_secs(cfg.read_timeout_secs.max(1)),
            first_byte_timeout: Duration::from_secs(cfg.first_byte_timeout_secs.max(1)),
            total_timeout: Duration::from_secs(cfg.total_timeout_secs.max(1)),
            max_retry_after: Duration::from_secs(cfg.max_retry_after_secs),
            reply_cap: cfg.reply_cap(),
            max_retries: cfg.max_retries,
            backoff: Duration::from_millis(cfg.retry_backoff_ms),
            configured,
        }
    }

    /// As [`OpenAiClient::new`] with a sub-second idle timeout (tests).
    pub fn with_read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// As [`OpenAiClient::new`] with sub-second first-byte and total
    /// deadlines (tests).
    pub fn with_deadlines(mut self, first_byte: Duration, total: Duration) -> Self {
        self.first_byte_timeout = first_byte;
        self.total_timeout = total;
        self
    }

    fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }

    /// Start the HTTP exchange on a worker thread; pieces come back on a
    /// channel.
    fn start(&self, body: String) -> Receiver<Piece> {
        let (tx, rx) = crossbeam_channel::bounded::<Piece>(64);
        let agent = self.agent.clone();
        let url = self.endpoint();
        let key = self.api_key.clone();
        let spawned = std::thread::Builder::new()
            .name("llm-http".into())
            .spawn(move || {
                let mut request = agent
                    .post(&url)
                    .header("Content-Type", "application/json")
                    .header("Accept", "text/event-stream, application/json");
                if !key.is_empty() {
                    request = request.header("Authorization", format!("Bearer {key}"));
                }
                let response = match request.send(body.as_bytes()) {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = tx.send(Piece::Failed(llm_error(&url, e.into())));
                        return;
                    }
                };
                let head = Head::of(&response);
                if tx
                    .send(Piece::Head {
                        status: head.status,
                        retry_after: head.retry_after,
                        json: head.content_type.contains("application/json"),
                    })
                    .is_err()
                {
                    return;
                }
                let mut reader = response.into_body().into_reader();
                let mut buf = vec![0u8; 8192];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) => {
                            let _ = tx.send(Piece::End);
                            return;
                        }
                        Ok(n) => {
                            if tx.send(Piece::Bytes(buf[..n].to_vec())).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            let _ = tx.send(Piece::Failed(llm_error(&url, http::io_error(&e))));
                            return;
                        }
                    }
                }
            });
        if spawned.is_err() {
            let (tx2, rx2) = crossbeam_channel::bounded(1);
            let _ = tx2.send(Piece::Failed(LlmError::Protocol(
                "could not start a thread".into(),
            )));
            return rx2;
        }
        rx
    }

    /// Wait for the next piece until `deadline`, honouring cancellation.
    fn next_by(
        &self,
        rx: &Receiver<Piece>,
        cancel: &CancelToken,
        deadline: Instant,
    ) -> Result<Piece, LlmError> {
        loop {
            if cancel.is_cancelled() {
                return Err(LlmError::Cancelled);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(LlmError::Timeout);
            }
            let wait = (deadline - now).min(Duration::from_millis(50));
            match rx.recv_timeout(wait) {
                Ok(Piece::Failed(e)) => return Err(e),
                Ok(piece) => return Ok(piece),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(LlmError::Protocol("the connection closed".into()))
                }
            }
        }
    }

    /// The next body piece: the idle timeout, within the call's deadline.
    fn next(
        &self,
        rx: &Receiver<Piece>,
        cancel: &CancelToken,
        call_deadline: Instant,
    ) -> Result<Piece, LlmError> {
        let idle = Instant::now() + self.read_timeout;
        self.next_by(rx, cancel, idle.min(call_deadline))
    }

    /// One attempt. `emitted` tells the caller whether any token went out
    /// (then a retry would repeat text, so it must not happen).
    /// `call_deadline` ends the whole call (retries included).
    fn attempt(
        &self,
        request: &ChatRequest,
        on_token: &mut dyn FnMut(&str),
        cancel: &CancelToken,
        emitted: &mut bool,
        call_deadline: Instant,
    ) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let rx = self.start(request.to_json().to_string());
        let head_deadline = (started + self.first_byte_timeout).min(call_deadline);
        let (status, retry_after, json) = match self.next_by(&rx, cancel, head_deadline)? {
            Piece::Head {
                status,
                retry_after,
                json,
            } => (status, retry_after, json),
            _ => return Err(LlmError::Protocol("no response head".into())),
        };
        if !(200..300).contains(&status) {
            let body = self
                .read_all(&rx, cancel, call_deadline)
                .unwrap_or_default();
            return Err(map_status(status, retry_after, &body));
        }
        if !request.stream || json {
            let body = self.read_all(&rx, cancel, call_deadline)?;
            let mut response = parse_completion(&body)?;
            if cap_text(&mut response.content, self.reply_cap) {
                tracing::warn!(
                    cap = self.reply_cap,
                    "the LLM reply was longer than llm.max_reply_chars; the rest was dropped"
                );
                response.finish_reason = Some("length".into());
            }
            response.first_token_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
            if !response.content.is_empty() {
                *emitted = true;
                on_token(&response.content);
            }
            return Ok(response);
        }
        let mut parser = SseParser::new();
        let mut stream = StreamState::default();
        let mut emit = |t: &str| {
            *emitted = true;
            on_token(t)
        };
        loop {
            let piece = match self.next(&rx, cancel, call_deadline) {
                Ok(piece) => piece,
                // Out of time mid-answer: keep the words already said unless
                // a tool call is half-sent (running half a call is worse).
                Err(LlmError::Timeout) if Instant::now() >= call_deadline => {
                    if stream.calls.is_empty() && !stream.content.trim().is_empty() {
                        tracing::warn!(
                            secs = self.total_timeout.as_secs_f64(),
                            "the LLM stream outlasted llm.total_timeout_secs; keeping the answer so far"
                        );
                        stream.finish_reason = Some("timeout".into());
                        return Ok(stream.finish(&mut emit));
                    }
                    return Err(LlmError::Timeout);
                }
                Err(e) => return Err(e),
            };
            match piece {
                Piece::Bytes(bytes) => {
                    for data in parser.feed(&bytes) {
                        if stream.apply(&data, &mut emit, started)? {
                            return Ok(stream.finish(&mut emit));
                        }
                        if stream.content.len() > self.reply_cap {
                            tracing::warn!(cap = self.reply_cap, "the LLM reply was longer than llm.max_reply_chars; stopped reading");
                            cap_text(&mut stream.content, self.reply_cap);
                            stream.finish_reason = Some("length".into());
                            return Ok(stream.finish(&mut emit));
                        }
                    }
                }
                Piece::End => {
                    if let Some(data) = parser.finish() {
                        if stream.apply(&data, &mut emit, started)? {
                            return Ok(stream.finish(&mut emit));
                        }
                    }
                    if stream.finish_reason.is_some() {
                        return Ok(stream.finish(&mut emit));
                    }
                    return Err(LlmError::Protocol(
                        "the stream ended before the answer was complete".into(),
                    ));
                }
                Piece::Head { .. } | Piece::Failed(_) => {
                    return Err(LlmError::Protocol("unexpected stream piece".into()))
                }
            }
        }
    }

    fn read_all(
        &self,
        rx: &Receiver<Piece>,
        cancel: &CancelToken,
        call_deadline: Instant,
    ) -> Result<String, LlmError> {
        let mut body = Vec::new();
        loop {
            match self.next(rx, cancel, call_deadline)? {
                Piece::Bytes(b) => {
                    body.extend_from_slice(&b);
                    if body.len() > MAX_BODY {
                        return Err(LlmError::Protocol("the reply is too large".into()));
                    }
                }
                Piece::End => break,
                _ => return Err(LlmError::Protocol("unexpected body piece".into())),
            }
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }
}

impl ChatModel for OpenAiClient {
    fn chat(
        &self,
        request: &ChatRequest,
        on_token: &mut dyn FnMut(&str),
        cancel: &CancelToken,
    ) -> Result<ChatResponse, LlmError> {
        self.check_configured()?;
        let call_deadline = Instant::now() + self.total_timeout;
        let mut attempt = 0;
        loop {
            let mut emitted = false;
            match self.attempt(request, on_token, cancel, &mut emitted, call_deadline) {
                Ok(mut response) => {
                    if response.model.is_empty() {
                        response.model = request.model.clone();
                    }
                    return Ok(response);
                }
                Err(e) if e.is_retryable() && !emitted && attempt < self.max_retries => {
                    let wait = match &e {
                        // A server that did not answer in time will not
                        // answer the retry either: say so now.
                        LlmError::Timeout => return Err(e),
                        LlmError::RateLimited {
                            retry_after: Some(d),
                        } if *d > self.max_retry_after => {
                            tracing::warn!(retry_after_secs = d.as_secs(), cap_secs = self.max_retry_after.as_secs(), "LLM rate limited for longer than llm.max_retry_after_secs; not waiting");
                            return Err(e);
                        }
                        LlmError::RateLimited {
                            retry_after: Some(d),
                        } => *d,
                        _ => self.backoff * 2u32.saturating_pow(attempt),
                    };
                    // No retry that could not even get its head in time.
                    if Instant::now() + wait + Duration::from_millis(100) >= call_deadline {
                        return Err(e);
                    }
                    // Info: a retry (or the next model of llm.order) is no user-facing problem.
                    tracing::info!(error = %e, attempt = attempt + 1, wait_ms = wait.as_millis() as u64, "LLM request failed; retrying");
                    attempt += 1;
                    let until = Instant::now() + wait;
                    while Instant::now() < until {
                        if cancel.is_cancelled() {
                            return Err(LlmError::Cancelled);
                        }
                        std::thread::sleep(Duration::from_millis(20).min(until - Instant::now()));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn check_configured(&self) -> Result<(), LlmError> {
        self.configured.clone().map_err(LlmError::NotConfigured)
    }
}

/// Accumulates a streamed answer: content through the think filter, tool
/// call deltas merged by index.
#[derive(Default)]
struct StreamState {
    think: ThinkFilter,
    content: String,
    calls: BTreeMap<u64, ToolCall>,
    finish_reason: Option<String>,
    model: String,
    first_token_ms: Option<f64>,
}

impl StreamState {
    /// Apply one SSE data payload; `Ok(true)` at `[DONE]`.
    fn apply(
        &mut self,
        data: &str,
        on_token: &mut dyn FnMut(&str),
        started: Instant,
    ) -> Result<bool, LlmError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| LlmError::Protocol(format!("a stream chunk is not JSON ({e})")))?;
        if let Some(err) = chunk.get("error") {
            return Err(in_reply_error(err));
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            self.model = model.to_string();
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else {
            return Ok(false);
        };
        let delta = &choice["delta"];
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.content.push_str(text);
            let visible = self.think.push(text);
            if !visible.is_empty() {
                if self.first_token_ms.is_none() {
                    self.first_token_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
                }
                on_token(&visible);
            }
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (position, call) in calls.iter().enumerate() {
                let index = call
                    .get("index")
                    .and_then(Value::as_u64)
                    .unwrap_or(position as u64);
                let entry = self.calls.entry(index).or_default();
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    entry.id = id.to_string();
                }
                if let Some(name) = call["function"].get("name").and_then(Value::as_str) {
                    entry.name.push_str(name);
                }
                match call["function"].get("arguments") {
                    Some(Value::String(a)) => entry.arguments.push_str(a),
                    Some(Value::Null) | None => {}
                    Some(other) => entry.arguments.push_str(&other.to_string()),
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        Ok(false)
    }

    fn finish(&mut self, on_token: &mut dyn FnMut(&str)) -> ChatResponse {
        let rest = self.think.finish();
        if !rest.is_empty() {
            on_token(&rest);
        }
        ChatResponse {
            content: super::think::strip_think(&self.content),
            tool_calls: std::mem::take(&mut self.calls).into_values().collect(),
            finish_reason: self.finish_reason.take(),
            model: std::mem::take(&mut self.model),
            first_token_ms: self.first_token_ms,
            begun_early_ms: None,
        }
    }
}

/// Parse a non-streamed chat completion.
pub fn parse_completion(body: &str) -> Result<ChatResponse, LlmError> {
    let v: Value = serde_json::from_str(body)
        .map_err(|e| LlmError::Protocol(format!("the reply is not JSON ({e})")))?;
    if let Some(err) = v.get("error") {
        return Err(in_reply_error(err));
    }
    let message = v
        .get("choices")
        .and_then(|c| c.get(0))
        .map(|c| &c["message"])
        .ok_or_else(|| LlmError::Protocol("the reply has no choices".into()))?;
    let content = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let tool_calls = match message.get("tool_calls") {
        Some(Value::Array(calls)) => calls
            .iter()
            .map(|c| serde_json::from_value::<ToolCall>(c.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| LlmError::Protocol(format!("bad tool call ({e})")))?,
        _ => Vec::new(),
    };
    Ok(ChatResponse {
        content: super::think::strip_think(content),
        tool_calls,
        finish_reason: v["choices"][0]
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        model: v
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        first_token_ms: None,
        begun_early_ms: None,
    })
}

/// An `error` object inside a 200 reply or a stream: the server gave up
/// mid-answer (not an HTTP status, so none is invented).
fn in_reply_error(err: &Value) -> LlmError {
    let text = |key: &str| err.get(key).and_then(Value::as_str).map(str::to_string);
    LlmError::InReply {
        code: text("code").or_else(|| text("type")),
        message: text("message")
            .or_else(|| err.as_str().map(str::to_string))
            .unwrap_or_else(|| err.to_string())
            .chars()
            .take(200)
            .collect(),
    }
}

/// Cut `text` to at most `cap` bytes on a character boundary; whether it
/// was cut.
fn cap_text(text: &mut String, cap: usize) -> bool {
    if text.len() <= cap {
        return false;
    }
    let mut end = cap;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    true
}

/// The shared HTTP failure as an [`LlmError`].
fn llm_error(url: &str, e: HttpError) -> LlmError {
    match e {
        HttpError::Timeout => LlmError::Timeout,
        HttpError::Connect { reason } => LlmError::Unreachable {
            url: url.to_string(),
            reason,
        },
        HttpError::Interrupted { reason } => {
            LlmError::Protocol(format!("the connection broke: {reason}"))
        }
        HttpError::TooLarge { .. } => LlmError::Protocol("the reply is too large".into()),
        HttpError::Decode { reason } => LlmError::Protocol(reason),
        HttpError::Status {
            status,
            retry_after,
            body_excerpt,
        } => map_error_parts(status, retry_after, None, body_excerpt),
    }
}

/// Map an HTTP error status and its body to a typed error.
pub fn map_status(status: u16, retry_after: Option<Duration>, body: &str) -> LlmError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    if let Some(err) = parsed.as_ref().and_then(|v| v.get("error")) {
        return map_error_object(status, retry_after, err);
    }
    let snippet: String = body.chars().take(120).collect();
    map_error_parts(status, retry_after, None, snippet.trim().to_string())
}

fn map_error_object(status: u16, retry_after: Option<Duration>, err: &Value) -> LlmError {
    let message = match err {
        Value::String(s) => s.clone(),
        _ => err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("unknown error")
            .to_string(),
    };
    let code = err.get("code").and_then(|c| {
        c.as_str()
            .map(str::to_string)
            .or_else(|| c.as_i64().map(|n| n.to_string()))
    });
    map_error_parts(status, retry_after, code, message)
}

fn map_error_parts(
    status: u16,
    retry_after: Option<Duration>,
    code: Option<String>,
    message: String,
) -> LlmError {
    match status {
        401 | 403 => LlmError::Unauthorized { status },
        429 => LlmError::RateLimited { retry_after },
        408 | 504 => LlmError::Timeout,
        500..=599 => LlmError::Server { status },
        _ => LlmError::BadRequest {
            status,
            code,
            message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groq_tool_use_failed_body_is_recognised() {
        let body = r#"{"error":{"message":"Failed to call a function. Please adjust your prompt.","type":"invalid_request_error","code":"tool_use_failed","failed_generation":"<function=x>"}}"#;
        let e = map_status(400, None, body);
        assert!(e.is_tool_use_failed(), "{e:?}");
        assert!(!e.is_retryable());
    }

    #[test]
    fn html_error_pages_do_not_leak_into_sentences() {
        let e = map_status(502, None, "<html><body>Bad gateway</body></html>");
        assert_eq!(e, LlmError::Server { status: 502 });
        assert!(!e.user_sentence().contains("<html>"));
    }

    #[test]
    fn stream_state_merges_tool_call_deltas() {
        let mut s = StreamState::default();
        let started = Instant::now();
        let mut toks = String::new();
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"calculator","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"expr"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ession\":\"2+2\"}"}},{"index":1,"id":"call_b","function":{"name":"list_todos","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ];
        for c in chunks {
            assert!(!s
                .apply(c, &mut |t: &str| toks.push_str(t), started)
                .unwrap());
        }
        assert!(s.apply("[DONE]", &mut |_: &str| {}, started).unwrap());
        let r = s.finish(&mut |_: &str| {});
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].name, "calculator");
        assert_eq!(r.tool_calls[0].arguments, "{\"expression\":\"2+2\"}");
        assert_eq!(r.tool_calls[1].id, "call_b");
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        assert!(toks.is_empty());
    }

    #[test]
    fn broken_chunk_is_a_protocol_error() {
        let mut s = StreamState::default();
        let e = s
            .apply(
                "{\"choices\":[{\"delta\":",
                &mut |_: &str| {},
                Instant::now(),
            )
            .unwrap_err();
        assert!(matches!(e, LlmError::Protocol(_)));
    }
}
