//! Method + path → handler, and every failure → a JSON `{"error": …}` with
//! the right 4xx/5xx status.
//!
//! | route | body | reply |
//! |---|---|---|
//! | `GET /api/health` | | `{"status":"ok"}` (no token needed) |
//! | `POST /api/chat` | `{"text","conversation_id"?}` | `{"response","conversation_id","route","intent"}` |
//! | `POST /api/chat/stream` | same | R-SSE frames |
//! | `POST /api/voice` | multipart field `audio` (WAV) | `audio/wav` + `X-Transcript`, `X-Response`, `X-Conversation-Id` |
//! | `POST /api/tts` | `{"text"}` | `audio/wav` |
//! | `GET /api/conversations[/ID]` | | the list, or one with its messages |
//! | `GET /api/timers` | | `[{"id","kind","label","due","remaining_s","repeat"}]`, as `earshot timers list --json` |
//! | `GET /api/events` | | SSE: the device's events (timers, the tree's `publish_event` as `{"type":"event",…}`) as they happen |
//!
//! [`admit`] runs on the connection thread right after the header block
//! is read and before any of the body: `Host`, `Origin`, route, method,
//! token, `Content-Type`, body framing, in that order. Only an admitted
//! request has its body read and goes to a worker ([`handle`]).

use std::io::BufWriter;
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{json, Value};

use super::guard::{self, Policy};
use super::wire::{self, Framing, Head};
use super::{body, multipart, speech, sse, ApiError};
use crate::agent::turn::{run_turn, TurnInput};
use crate::agent::Services;
use crate::cancel::CancelToken;
use crate::events::CollectSink;

/// What every handler needs; one per worker, cheap to clone.
#[derive(Clone)]
pub struct Context {
    pub services: Services,
    /// Speech-to-text and text-to-speech, loaded once.
    pub speech: Arc<speech::Speech>,
    /// Empty = no authentication (loopback only; the server enforces that).
    pub token: String,
    pub max_body_bytes: usize,
    pub keepalive: Duration,
    /// `api.max_tts_chars`: longest text POST /api/tts speaks (413).
    pub max_tts_chars: usize,
    /// `api.max_chat_chars`: longest chat text or feedback note (413).
    pub max_chat_chars: usize,
    /// `api.max_voice_secs`: longest recording POST /api/voice takes (413).
    pub max_voice_secs: u64,
    /// The `Host` / `Origin` rules.
    pub policy: Arc<Policy>,
    /// Set when the server shuts down: reads give up, a TTS stops between
    /// sentences, blocked writes get a short grace.
    pub stop: Arc<AtomicBool>,
}

/// The routes, parsed from the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Health,
    Chat,
    ChatStream,
    Voice,
    Tts,
    Feedback,
    Conversations,
    Conversation(String),
    Timers,
    /// The device's event stream (timers, tree events).
    Events,
}

impl Route {
    fn parse(path: &str) -> Option<Route> {
        let path = path.trim_end_matches('/');
        Some(match path {
            "/api/health" => Route::Health,
            "/api/chat" => Route::Chat,
            "/api/chat/stream" => Route::ChatStream,
            "/api/voice" => Route::Voice,
            "/api/tts" => Route::Tts,
            "/api/feedback" => Route::Feedback,
            "/api/conversations" => Route::Conversations,
            "/api/timers" => Route::Timers,
            "/api/events" => Route::Events,
            _ => {
                let id = path.strip_prefix("/api/conversations/")?;
                if id.is_empty() || id.contains('/') {
                    return None;
                }
                Route::Conversation(id.to_string())
            }
        })
    }

    fn method(&self) -> &'static str {
        match self {
            Route::Health
            | Route::Conversations
            | Route::Conversation(_)
            | Route::Timers
            | Route::Events => "GET",
            _ => "POST",
        }
    }

    /// Whether the route answers `method` (besides HEAD and OPTIONS): its
    /// own method, and PATCH on one conversation (its mode).
    fn accepts(&self, method: &str) -> bool {
        method == self.method() || (matches!(self, Route::Conversation(_)) && method == "PATCH")
    }

    /// The `Allow` header: every method the route answers.
    fn allow(&self) -> &'static str {
        match self {
            Route::Conversation(_) => "GET, PATCH",
            _ => self.method(),
        }
    }

    /// The body's media type, for the state-changing routes.
    fn body_type(&self) -> Option<&'static str> {
        match self {
            Route::Voice => Some("multipart/form-data"),
            Route::Chat | Route::ChatStream | Route::Tts | Route::Feedback => {
                Some("application/json")
            }
            _ => None,
        }
    }
}

/// A request that passed [`admit`]: what to run and how to answer.
#[derive(Debug, Clone)]
pub struct Admitted {
    /// The endpoint.
    pub route: Route,
    /// The request line and headers as parsed.
    pub head: Head,
    /// The allowed `Origin` of a browser page, echoed in CORS headers.
    pub cors: Option<String>,
    /// How the body is framed (read by the connection thread).
    pub framing: Framing,
    /// A `HEAD` request: headers only.
    pub head_only: bool,
    /// An `OPTIONS` request (a CORS preflight): answered at once.
    pub preflight: bool,
}

/// A request [`admit`] refused: the error, and the CORS origin if the
/// page's origin is allowed (so it can read the error).
#[derive(Debug, Clone)]
pub struct Refused {
    /// The status and sentence to answer.
    pub error: ApiError,
    /// The request path (for the `Allow` header of a 405).
    pub path: String,
    /// The allowed browser origin, if any.
    pub cors: Option<String>,
}

/// An admitted request with its body, for a worker.
pub struct Request {
    /// What [`admit`] found in the head.
    pub admitted: Admitted,
    /// The whole body, read within its limits.
    pub body: Vec<u8>,
}

/// Check everything about a request that its head shows, before any of
/// the body is read: a browser page's `Host`/`Origin` (403), the route
/// (404) and method (405), the token (401), the body's `Content-Type`
/// (415) and framing (400/413/501).
pub fn admit(ctx: &Context, head: Head) -> Result<Admitted, Refused> {
    let path = head.path().to_string();
    let refuse = |error: ApiError, cors: Option<String>| Refused {
        error,
        path: path.clone(),
        cors,
    };
    ctx.policy
        .check_host(head.header("Host"), head.minor_version == 0)
        .map_err(|e| refuse(e, None))?;
    let cors = ctx
        .policy
        .check_origin(head.all("Origin"))
        .map_err(|e| refuse(e, None))?;
    let route = Route::parse(&path).ok_or_else(|| {
        refuse(
            ApiError::not_found(format!(
                "no such endpoint: {} {path}; see /api/health, /api/chat, /api/chat/stream, /api/voice, /api/tts, /api/feedback, /api/conversations, /api/timers, /api/events",
                head.method
            )),
            cors.clone(),
        )
    })?;
    let allowed = route.method();
    let preflight = head.method == "OPTIONS";
    let head_only = head.method == "HEAD" && allowed == "GET";
    if !route.accepts(&head.method) && !head_only && !preflight {
        return Err(refuse(
            ApiError::new(
                405,
                format!(
                    "{path} does not accept {}; use {}",
                    head.method,
                    route.allow().replace(", ", " or ")
                ),
            ),
            cors,
        ));
    }
    if preflight {
        return Ok(Admitted {
            route,
            head,
            cors,
            framing: Framing::Empty,
            head_only: false,
            preflight: true,
        });
    }
    if route != Route::Health {
        authorize(ctx, &head).map_err(|e| refuse(e, cors.clone()))?;
    }
    let body_type = if head.method == "PATCH" {
        Some("application/json")
    } else {
        route.body_type()
    };
    match body_type {
        Some("application/json") => guard::require_json(head.header("Content-Type"), &path),
        Some(_) => multipart::boundary(head.header("Content-Type")).map(|_| ()),
        None => Ok(()),
    }
    .map_err(|e| refuse(e, cors.clone()))?;
    let framing = wire::framing(&head).map_err(|e| refuse(e, cors.clone()))?;
    if let Framing::Length(n) = framing {
        if n > u64::try_from(ctx.max_body_bytes).unwrap_or(u64::MAX) {
            return Err(refuse(body::too_large(ctx.max_body_bytes), cors));
        }
    }
    Ok(Admitted {
        route,
        head,
        cors,
        framing,
        head_only,
        preflight: false,
    })
}

/// The answer to a request that needs no worker (health, a preflight),
/// or `None`.
pub fn quick(admitted: &Admitted) -> Option<Vec<u8>> {
    let cors = admitted.cors.as_deref();
    if admitted.preflight {
        let allow = format!("{}, OPTIONS", admitted.route.allow());
        let mut headers = vec![("Allow", allow.as_str())];
        if let Some(origin) = cors {
            headers.extend([
                ("Access-Control-Allow-Origin", origin),
                ("Access-Control-Allow-Methods", allow.as_str()),
                (
                    "Access-Control-Allow-Headers",
                    "Authorization, Content-Type",
                ),
                ("Access-Control-Max-Age", "600"),
                ("Vary", "Origin"),
            ]);
        }
        return Some(wire::response_bytes(204, &headers, b"", false));
    }
    if admitted.route == Route::Health {
        return Some(json_bytes(
            200,
            &json!({"status": "ok"}),
            &[],
            cors,
            admitted.head_only,
        ));
    }
    None
}

/// The bytes of a refusal: `{"error": …}` plus `WWW-Authenticate` (401),
/// `Allow` (405) or `Retry-After` (503).
pub fn refusal_bytes(refused: &Refused) -> Vec<u8> {
    let e = &refused.error;
    let allow;
    let extra: &[(&str, &str)] = match e.status {
        401 => &[("WWW-Authenticate", "Bearer")],
        405 => {
            allow = allow_for(&refused.path);
            &[("Allow", allow)]
        }
        503 => &[("Retry-After", "1")],
        _ => &[],
    };
    json_bytes(
        e.status,
        &json!({ "error": e.message }),
        extra,
        refused.cors.as_deref(),
        false,
    )
}

/// A JSON answer, with CORS headers for an allowed browser origin.
pub fn json_bytes(
    status: u16,
    value: &Value,
    headers: &[(&str, &str)],
    cors: Option<&str>,
    head_only: bool,
) -> Vec<u8> {
    let body = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let mut all = vec![("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    if let Some(origin) = cors {
        all.extend(cors_headers(origin));
    }
    wire::response_bytes(status, &all, &body, head_only)
}

fn cors_headers(origin: &str) -> [(&'static str, &str); 3] {
    [
        ("Access-Control-Allow-Origin", origin),
        (
            "Access-Control-Expose-Headers",
            "X-Transcript, X-Response, X-Conversation-Id",
        ),
        ("Vary", "Origin"),
    ]
}

/// `GET /api/events`: stream the device's events on this connection until
/// the client leaves or the server stops. Runs on the connection's own
/// thread (never a worker: a client may listen for hours), within the
/// connection cap.
pub fn events(ctx: &Context, admitted: &Admitted, stream: &TcpStream) {
    let mut extra: Vec<(&str, &str)> = Vec::new();
    if let Some(origin) = admitted.cors.as_deref() {
        extra.extend(cors_headers(origin));
    }
    let sources = event_sources(&ctx.services);
    // A client that stops reading is dropped after the write timeout.
    match sse::SseWriter::start_with(BufWriter::new(stream), &extra) {
        Ok(writer) => sse::stream_events(writer, sources, ctx.keepalive, &ctx.stop),
        Err(e) => tracing::info!(error = %e, "event stream client went away at once"),
    }
}

/// What `GET /api/events` forwards: every timer event as the contract's
/// `{"type":"timer","event","id","kind","label","due"}`, and the tree's
/// `publish_event`s as the R-SSE frame `{"type":"event","event","data",
/// "conversation_id","timestamp"}` (the same frame `/api/chat/stream` sends
/// in the turn's stream).
fn event_sources(services: &Services) -> Vec<sse::EventSource> {
    let mut sources = vec![sse::EventSource::new(
        services.timers.subscribe(),
        |e: crate::timers::TimerEvent| serde_json::to_value(&e).unwrap_or(Value::Null),
    )];
    if let Some(tree) = &services.tree {
        sources.push(sse::EventSource::new(tree.subscribe(), |p| {
            p.to_event().to_frame().unwrap_or(Value::Null)
        }));
    }
    sources
}

/// A finished reply (the stream writes its own).
enum Reply {
    Json(u16, Value),
    Wav(Vec<u8>, Vec<(&'static str, String)>),
    Stream(TurnInput),
}

/// Answer one admitted request on `stream`; never panics on input.
pub fn handle(ctx: &Context, request: Request, stream: &TcpStream) {
    let cors = request.admitted.cors.clone();
    let head_only = request.admitted.head_only;
    let path = request.admitted.head.path().to_string();
    let bytes = match route(ctx, &request) {
        Ok(Reply::Stream(input)) => {
            let mut extra: Vec<(&str, &str)> = Vec::new();
            if let Some(origin) = cors.as_deref() {
                extra.extend(cors_headers(origin));
            }
            match sse::SseWriter::start_with(BufWriter::new(stream), &extra) {
                Ok(writer) => {
                    sse::stream_turn(&ctx.services, input, writer, ctx.keepalive);
                }
                Err(e) => {
                    tracing::info!(error = %e, "stream client went away before the first byte")
                }
            }
            return;
        }
        Ok(Reply::Json(status, value)) => {
            json_bytes(status, &value, &[], cors.as_deref(), head_only)
        }
        Ok(Reply::Wav(bytes, headers)) => {
            let mut all: Vec<(&str, &str)> = vec![("Content-Type", "audio/wav")];
            all.extend(headers.iter().map(|(k, v)| (*k, v.as_str())));
            if let Some(origin) = cors.as_deref() {
                all.extend(cors_headers(origin));
            }
            wire::response_bytes(200, &all, &bytes, head_only)
        }
        Err(error) => refusal_bytes(&Refused { error, path, cors }),
    };
    if let Err(e) = wire::write_answer(stream, &bytes, &ctx.stop) {
        tracing::info!(error = %e, "API client went away before reading the answer");
    }
}

/// POST /api/feedback `{"turn_id", "kind": "not_helpful"|"error", "note"?}`
/// → `{"feedback_id"}` (R-OBS; errors go to the review queue first).
fn feedback(ctx: &Context, request: &Request) -> Result<Reply, ApiError> {
    let body: Value = serde_json::from_slice(&request.body)
        .map_err(|e| ApiError::new(400, format!("the body is not JSON ({e})")))?;
    if let Some(note) = body.get("note").and_then(Value::as_str) {
        body::within_chars(note, ctx.max_chat_chars, "\"note\"", "api.max_chat_chars")?;
    }
    match crate::review::feedback_from_json(&ctx.services.store, &body) {
        Ok(id) => Ok(Reply::Json(200, json!({ "feedback_id": id }))),
        Err(crate::review::ReviewError::NoSuchTurn(id)) => {
            Err(ApiError::not_found(format!("turn {id} does not exist")))
        }
        Err(crate::review::ReviewError::Invalid(message)) => Err(ApiError::new(400, message)),
        Err(e) => Err(ApiError::new(
            500,
            format!("could not store the feedback: {e}"),
        )),
    }
}

fn allow_for(url: &str) -> &'static str {
    Route::parse(path_of(url)).map_or("POST", |r| r.allow())
}

fn path_of(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or("")
}

fn route(ctx: &Context, request: &Request) -> Result<Reply, ApiError> {
    match &request.admitted.route {
        Route::Health => Ok(Reply::Json(200, json!({"status": "ok"}))),
        Route::Chat => chat(ctx, request),
        Route::ChatStream => {
            let input = turn_input(ctx, request)?;
            Ok(Reply::Stream(input))
        }
        Route::Voice => voice(ctx, request),
        Route::Tts => {
            let map = body::json_object(&request.body)?;
            let text = body::required_text(&map, "text")?;
            body::within_chars(&text, ctx.max_tts_chars, "\"text\"", "api.max_tts_chars")?;
            let wav = ctx.speech.synthesize_until(&text, &ctx.stop)?;
            Ok(Reply::Wav(wav, Vec::new()))
        }
        Route::Feedback => feedback(ctx, request),
        // Only a HEAD gets here; GET streams on the connection's thread.
        Route::Events => Ok(Reply::Json(200, json!({"stream": "text/event-stream"}))),
        Route::Conversations => {
            let list = ctx
                .services
                .store
                .conversations(&ctx.services.settings.user_id, 100)
                .map_err(|e| {
                    ApiError::new(500, format!("could not read the conversations: {e}"))
                })?;
            Ok(Reply::Json(200, json!({ "conversations": list })))
        }
        Route::Conversation(id) if request.admitted.head.method == "PATCH" => {
            set_mode(ctx, id, &request.body)
        }
        Route::Conversation(id) => conversation(ctx, id),
        Route::Timers => {
            let all = ctx
                .services
                .timers
                .list(None)
                .map_err(|e| ApiError::new(500, format!("could not read the timers: {e}")))?;
            let value = serde_json::to_value(all)
                .map_err(|e| ApiError::new(500, format!("could not write the timers: {e}")))?;
            Ok(Reply::Json(200, value))
        }
    }
}

/// `Authorization: Bearer <token>` when a token is configured; compared in
/// constant time so the token cannot be guessed byte by byte.
fn authorize(ctx: &Context, head: &Head) -> Result<(), ApiError> {
    if ctx.token.is_empty() {
        return Ok(());
    }
    let given = head
        .header("Authorization")
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    match given {
        Some(token) if constant_time_eq(token.as_bytes(), ctx.token.as_bytes()) => Ok(()),
        Some(_) => Err(ApiError::new(
            401,
            "wrong bearer token; send Authorization: Bearer <api.token>",
        )),
        None => Err(ApiError::new(
            401,
            "this API needs a token; send Authorization: Bearer <api.token>",
        )),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        diff |= usize::from(x ^ b.get(i % b.len().max(1)).copied().unwrap_or(0));
    }
    diff == 0
}

/// Parse and check a chat body.
fn turn_input(ctx: &Context, request: &Request) -> Result<TurnInput, ApiError> {
    let map = body::json_object(&request.body)?;
    let text = body::required_text(&map, "text")?;
    body::within_chars(&text, ctx.max_chat_chars, "\"text\"", "api.max_chat_chars")?;
    // A conversation that does not exist is not refused: the turn starts a
    // new one on the router graph and names it in `done` (seed 004).
    let conversation_id = body::optional_id(&map, "conversation_id")?;
    let mut input = TurnInput::text(text);
    input.conversation_id = conversation_id;
    input.source = "api".into();
    Ok(input)
}

fn chat(ctx: &Context, request: &Request) -> Result<Reply, ApiError> {
    let input = turn_input(ctx, request)?;
    let mut sink = CollectSink::default();
    let outcome = run_turn(&ctx.services, input, &mut sink, &CancelToken::new());
    if !outcome.ok {
        return Ok(Reply::Json(
            503,
            json!({"error": outcome.response, "conversation_id": outcome.conversation_id}),
        ));
    }
    let done = sink.done();
    Ok(Reply::Json(
        200,
        json!({
            "response": outcome.response,
            "conversation_id": outcome.conversation_id,
            "route": outcome.route,
            "intent": outcome.intent,
            "turn_id": outcome.turn_id,
            "model": done.map(|d| d.model.clone()),
            "actions": done.map(|d| d.actions.clone()).unwrap_or_default(),
            "latency_ms": done.map(|d| d.latency_ms),
        }),
    ))
}

/// The characters left as they are in `X-Transcript` / `X-Response`
/// (RFC 3986 unreserved); everything else, UTF-8 included, is %-encoded.
const HEADER_SAFE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encode UTF-8 text for an HTTP header value.
pub fn header_text(text: &str) -> String {
    utf8_percent_encode(text, HEADER_SAFE).to_string()
}

fn voice(ctx: &Context, request: &Request) -> Result<Reply, ApiError> {
    let boundary = multipart::boundary(request.admitted.head.header("Content-Type"))?;
    let parts = multipart::parts(&request.body, &boundary)?;
    let audio = parts.iter().find(|p| p.name == "audio").ok_or_else(|| {
        ApiError::bad_request(
            "the form has no field named \"audio\"; send the WAV as audio=@clip.wav",
        )
    })?;
    let info = speech::check_wav(&audio.data)?;
    speech::within_duration(&info, ctx.max_voice_secs)?;
    let (transcript, response, conversation) = match ctx.speech.transcribe(&audio.data)? {
        speech::Heard::Nothing => (
            String::new(),
            "I didn't catch anything; please say it again.".to_string(),
            None,
        ),
        speech::Heard::Text(text) => {
            let mut input = TurnInput::text(text.clone());
            input.source = "api".into();
            let mut sink = CollectSink::default();
            let outcome = run_turn(&ctx.services, input, &mut sink, &CancelToken::new());
            // A failed turn still answers with its sentence, spoken.
            (text, outcome.response, outcome.conversation_id)
        }
    };
    let wav = ctx.speech.synthesize(&response)?;
    Ok(Reply::Wav(
        wav,
        vec![
            ("X-Transcript", header_text(&transcript)),
            ("X-Response", header_text(&response)),
            (
                "X-Conversation-Id",
                conversation.map(|id| id.to_string()).unwrap_or_default(),
            ),
        ],
    ))
}

fn conversation_id(id: &str) -> Result<i64, ApiError> {
    id.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "conversation id {id:?} is not a number; GET /api/conversations lists them"
        ))
    })
}

/// `PATCH /api/conversations/ID {"mode": "tree"|"graph"|null}`: how this
/// conversation's turns are dispatched from now on (`null`: the default).
/// Answers the conversation as `GET` does.
fn set_mode(ctx: &Context, id: &str, body: &[u8]) -> Result<Reply, ApiError> {
    let id = conversation_id(id)?;
    let map = body::json_object(body)?;
    let mode = match map.get("mode") {
        None => {
            return Err(ApiError::bad_request(
                "missing field \"mode\": send {\"mode\": \"tree\"}, \"graph\" or null",
            ))
        }
        Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(m)) => Some(
            m.parse::<crate::agent::Mode>()
                .map_err(|e| ApiError::bad_request(format!("\"mode\": {e}")))?,
        ),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "\"mode\" must be \"tree\", \"graph\" or null, not {other}"
            )))
        }
    };
    let store = &ctx.services.store;
    match crate::agent::set_mode(store, &ctx.services.settings.user_id, Some(id), mode) {
        Ok(_) => conversation(ctx, &id.to_string()),
        Err(crate::agent::ModeError::NoSuchConversation(_)) => Err(ApiError::not_found(format!(
            "conversation {id} does not exist; GET /api/conversations lists them"
        ))),
        Err(e) => Err(ApiError::new(500, e.to_string())),
    }
}

fn conversation(ctx: &Context, id: &str) -> Result<Reply, ApiError> {
    let id = conversation_id(id)?;
    let store = &ctx.services.store;
    let conversation = store
        .conversation(id)
        .map_err(|e| ApiError::new(500, format!("could not read the database: {e}")))?
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "conversation {id} does not exist; GET /api/conversations lists them"
            ))
        })?;
    let messages = store
        .messages(id)
        .map_err(|e| ApiError::new(500, format!("could not read the database: {e}")))?;
    Ok(Reply::Json(
        200,
        json!({"conversation": conversation, "messages": messages}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_parse_and_know_their_method() {
        assert_eq!(Route::parse("/api/health"), Some(Route::Health));
        assert_eq!(Route::parse("/api/chat/"), Some(Route::Chat));
        assert_eq!(
            Route::parse("/api/conversations/12"),
            Some(Route::Conversation("12".into()))
        );
        assert_eq!(Route::parse("/api/conversations/1/x"), None);
        assert_eq!(Route::parse("/nope"), None);
        assert_eq!(Route::Chat.method(), "POST");
        assert_eq!(Route::parse("/api/timers/"), Some(Route::Timers));
        assert_eq!(Route::Timers.method(), "GET");
        assert_eq!(allow_for("/api/conversations?x=1"), "GET");
    }

    #[test]
    fn header_text_is_ascii_and_round_trips() {
        let text = "¿Qué hora es? 10:30, \"ok\"\r\n";
        let encoded = header_text(text);
        assert!(encoded.bytes().all(|b| b.is_ascii_graphic()), "{encoded}");
        let decoded = percent_encoding::percent_decode_str(&encoded)
            .decode_utf8()
            .unwrap();
        assert_eq!(decoded, text);
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
