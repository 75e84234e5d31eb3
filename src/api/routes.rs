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

use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{json, Value};
use tiny_http::{Header, Method, Request, Response};

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
}

/// The routes, parsed from the path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    Health,
    Chat,
    ChatStream,
    Voice,
    Tts,
    Feedback,
    Conversations,
    Conversation(String),
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
            _ => {
                let id = path.strip_prefix("/api/conversations/")?;
                if id.is_empty() || id.contains('/') {
                    return None;
                }
                Route::Conversation(id.to_string())
            }
        })
    }

    fn method(&self) -> Method {
        match self {
            Route::Health | Route::Conversations | Route::Conversation(_) => Method::Get,
            _ => Method::Post,
        }
    }
}

/// A finished reply (the stream writes its own).
enum Reply {
    Json(u16, Value),
    Wav(Vec<u8>, Vec<(&'static str, String)>),
    Stream(TurnInput),
}

/// Answer one request; never panics on input.
pub fn handle(ctx: &Context, mut request: Request) {
    let reply = route(ctx, &mut request);
    match reply {
        Ok(Reply::Stream(input)) => {
            let writer = request.into_writer();
            match sse::SseWriter::start(writer) {
                Ok(writer) => {
                    sse::stream_turn(&ctx.services, input, writer, ctx.keepalive);
                }
                Err(e) => {
                    tracing::info!(error = %e, "stream client went away before the first byte")
                }
            }
        }
        Ok(Reply::Json(status, value)) => respond_json(request, status, &value, &[]),
        Ok(Reply::Wav(bytes, headers)) => {
            let mut response = Response::from_data(bytes).with_status_code(200);
            for (k, v) in std::iter::once(("Content-Type", "audio/wav".to_string())).chain(headers)
            {
                if let Ok(h) = Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                    response.add_header(h);
                }
            }
            let _ = request.respond(response);
        }
        Err(e) => {
            let extra: &[(&str, &str)] = match e.status {
                401 => &[("WWW-Authenticate", "Bearer")],
                405 => &[("Allow", allow_for(request.url()))],
                _ => &[],
            };
            respond_json(request, e.status, &json!({ "error": e.message }), extra)
        }
    }
}

/// Write a JSON reply (also used by the server for 503 "busy").
pub fn respond_json(request: Request, status: u16, value: &Value, headers: &[(&str, &str)]) {
    let body = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let len = body.len();
    let mut response = Response::new(
        status.into(),
        Vec::new(),
        Cursor::new(body),
        Some(len),
        None,
    );
    for (k, v) in std::iter::once(&("Content-Type", "application/json")).chain(headers) {
        if let Ok(h) = Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            response.add_header(h);
        }
    }
    let _ = request.respond(response);
}

/// POST /api/feedback `{"turn_id", "kind": "not_helpful"|"error", "note"?}`
/// → `{"feedback_id"}` (R-OBS; errors go to the review queue first).
fn feedback(ctx: &Context, request: &mut Request) -> Result<Reply, ApiError> {
    let body: Value = serde_json::from_slice(&read_body(ctx, request)?)
        .map_err(|e| ApiError::new(400, format!("the body is not JSON ({e})")))?;
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
    match Route::parse(path_of(url)).map(|r| r.method()) {
        Some(Method::Get) => "GET",
        _ => "POST",
    }
}

fn path_of(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or("")
}

fn route(ctx: &Context, request: &mut Request) -> Result<Reply, ApiError> {
    let route = Route::parse(path_of(request.url())).ok_or_else(|| {
        ApiError::not_found(format!(
            "no such endpoint: {} {}; see /api/health, /api/chat, /api/chat/stream, /api/voice, /api/tts, /api/feedback, /api/conversations",
            request.method(),
            path_of(request.url())
        ))
    })?;
    let method = request.method().clone();
    let allowed = route.method();
    let head_ok = method == Method::Head && allowed == Method::Get;
    if method != allowed && !head_ok {
        return Err(ApiError::new(
            405,
            format!(
                "{} does not accept {method}; use {allowed}",
                path_of(request.url())
            ),
        ));
    }
    if route != Route::Health {
        authorize(ctx, request)?;
    }
    match route {
        Route::Health => Ok(Reply::Json(200, json!({"status": "ok"}))),
        Route::Chat => chat(ctx, request),
        Route::ChatStream => {
            let input = turn_input(ctx, request)?;
            Ok(Reply::Stream(input))
        }
        Route::Voice => voice(ctx, request),
        Route::Tts => {
            let map = body::json_object(&read_body(ctx, request)?)?;
            let text = body::required_text(&map, "text")?;
            let wav = ctx.speech.synthesize(&text)?;
            Ok(Reply::Wav(wav, Vec::new()))
        }
        Route::Feedback => feedback(ctx, request),
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
        Route::Conversation(id) => conversation(ctx, &id),
    }
}

/// `Authorization: Bearer <token>` when a token is configured; compared in
/// constant time so the token cannot be guessed byte by byte.
fn authorize(ctx: &Context, request: &Request) -> Result<(), ApiError> {
    if ctx.token.is_empty() {
        return Ok(());
    }
    let given = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .map(|h| h.value.as_str().trim())
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

fn read_body(ctx: &Context, request: &mut Request) -> Result<Vec<u8>, ApiError> {
    let declared = request.body_length();
    body::read_limited(request.as_reader(), declared, ctx.max_body_bytes)
}

/// Parse and check a chat body; a named conversation must exist (404).
fn turn_input(ctx: &Context, request: &mut Request) -> Result<TurnInput, ApiError> {
    let map = body::json_object(&read_body(ctx, request)?)?;
    let text = body::required_text(&map, "text")?;
    let conversation_id = body::optional_id(&map, "conversation_id")?;
    if let Some(id) = conversation_id {
        ensure_conversation(ctx, id)?;
    }
    let mut input = TurnInput::text(text);
    input.conversation_id = conversation_id;
    input.source = "api".into();
    Ok(input)
}

fn ensure_conversation(ctx: &Context, id: i64) -> Result<(), ApiError> {
    match ctx.services.store.conversation(id) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(ApiError::not_found(format!(
            "conversation {id} does not exist; leave out conversation_id to start a new one"
        ))),
        Err(e) => Err(ApiError::new(
            500,
            format!("could not read the database: {e}"),
        )),
    }
}

fn chat(ctx: &Context, request: &mut Request) -> Result<Reply, ApiError> {
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

fn voice(ctx: &Context, request: &mut Request) -> Result<Reply, ApiError> {
    let content_type = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Content-Type"))
        .map(|h| h.value.as_str().to_string());
    let boundary = multipart::boundary(content_type.as_deref())?;
    let body = read_body(ctx, request)?;
    let parts = multipart::parts(&body, &boundary)?;
    let audio = parts.iter().find(|p| p.name == "audio").ok_or_else(|| {
        ApiError::bad_request(
            "the form has no field named \"audio\"; send the WAV as audio=@clip.wav",
        )
    })?;
    speech::check_wav(&audio.data)?;
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

fn conversation(ctx: &Context, id: &str) -> Result<Reply, ApiError> {
    let id: i64 = id.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "conversation id {id:?} is not a number; GET /api/conversations lists them"
        ))
    })?;
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
        assert_eq!(Route::Chat.method(), Method::Post);
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
