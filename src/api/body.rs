//! Request bodies: read within `api.max_body_bytes`, parse JSON, and check
//! each field's type, so every bad request gets a 4xx that names the field.

use std::io::Read;

use serde_json::{Map, Value};

use super::ApiError;

/// How much of an oversized body of unknown length is read and discarded
/// before answering 413.
const DRAIN_LIMIT: u64 = 64 * 1024 * 1024;

/// Read the whole body, refusing anything over `max` bytes with a 413.
/// A declared `Content-Length` over the limit is refused before reading
/// (the server then drains what the client still sends, so it gets the
/// reply). A read that timed out is a 408, one cut off by shutdown a 503.
pub fn read_limited(
    reader: &mut dyn Read,
    declared: Option<usize>,
    max: usize,
) -> Result<Vec<u8>, ApiError> {
    if declared.is_some_and(|len| len > max) {
        return Err(too_large(max));
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0).min(max));
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(limit)
        .read_to_end(&mut body)
        .map_err(|e| read_failed(&e))?;
    if body.len() > max {
        // Read on (within reason) so the client, still sending, gets the
        // 413 instead of a reset connection.
        let _ = std::io::copy(&mut reader.take(DRAIN_LIMIT), &mut std::io::sink());
        return Err(too_large(max));
    }
    Ok(body)
}

/// The 413 for a body over `api.max_body_bytes`.
pub fn too_large(max: usize) -> ApiError {
    ApiError::new(
        413,
        format!("the request body is larger than {max} bytes (api.max_body_bytes); send less or raise the limit"),
    )
}

/// A failed body read as the answer to send.
fn read_failed(e: &std::io::Error) -> ApiError {
    match e.kind() {
        std::io::ErrorKind::TimedOut => ApiError::new(
            408,
            "the request body did not arrive in time (api.body_timeout_ms); send it faster or raise the limit",
        ),
        _ if super::wire::is_shutdown(e) => {
            ApiError::unavailable("earshot is shutting down; retry in a moment")
        }
        std::io::ErrorKind::InvalidInput => ApiError::bad_request(
            "the chunked request body is malformed; send valid chunked encoding or use Content-Length",
        ),
        _ => ApiError::bad_request(format!("could not read the request body ({e}); send it again")),
    }
}

/// A `text` field within `max` characters, else a 413 naming the limit
/// and its config key.
pub fn within_chars(text: &str, max: usize, what: &str, key: &str) -> Result<(), ApiError> {
    let chars = text.chars().count();
    if chars > max {
        return Err(ApiError::new(
            413,
            format!("{what} is {chars} characters; the limit is {max} ({key}); send a shorter text or raise the limit"),
        ));
    }
    Ok(())
}

/// Parse a body that must be one JSON object.
pub fn json_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the request body is empty; send a JSON object like {\"text\": \"hello\"}",
        ));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the request body is not valid JSON ({e}); send a JSON object like {{\"text\": \"hello\"}}"
        ))
    })?;
    match value {
        Value::Object(map) => Ok(map),
        other => Err(ApiError::bad_request(format!(
            "the request body must be a JSON object, not {}; send {{\"text\": \"hello\"}}",
            kind(&other)
        ))),
    }
}

/// A required, non-empty string field.
pub fn required_text(map: &Map<String, Value>, field: &str) -> Result<String, ApiError> {
    match map.get(field) {
        None | Some(Value::Null) => Err(ApiError::bad_request(format!(
            "missing field \"{field}\" (a string)"
        ))),
        Some(Value::String(s)) if s.trim().is_empty() => Err(ApiError::bad_request(format!(
            "field \"{field}\" is empty; send the text to answer"
        ))),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(ApiError::bad_request(format!(
            "field \"{field}\" must be a string, not {}",
            kind(other)
        ))),
    }
}

/// An optional integer field (absent or `null` → `None`).
pub fn optional_id(map: &Map<String, Value>, field: &str) -> Result<Option<i64>, ApiError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_i64().filter(|id| *id > 0).map(Some).ok_or_else(|| {
            ApiError::bad_request(format!("field \"{field}\" must be a positive integer"))
        }),
        Some(other) => Err(ApiError::bad_request(format!(
            "field \"{field}\" must be an integer, not {}",
            kind(other)
        ))),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_is_enforced_with_and_without_a_declared_length() {
        let data = vec![b'a'; 11];
        assert_eq!(
            read_limited(&mut &data[..], Some(11), 10)
                .unwrap_err()
                .status,
            413
        );
        assert_eq!(
            read_limited(&mut &data[..], None, 10).unwrap_err().status,
            413
        );
        assert_eq!(read_limited(&mut &data[..], None, 11).unwrap(), data);
    }

    #[test]
    fn text_limits_name_the_limit() {
        assert!(within_chars("ééé", 3, "\"text\"", "api.max_tts_chars").is_ok());
        let err = within_chars("éééé", 3, "\"text\"", "api.max_tts_chars").unwrap_err();
        assert_eq!(err.status, 413);
        assert!(
            err.message.contains("limit is 3 (api.max_tts_chars)"),
            "{}",
            err.message
        );
    }

    #[test]
    fn fields_are_checked_by_type() {
        let map = json_object(br#"{"text": 5, "conversation_id": "7", "x": null}"#).unwrap();
        assert!(required_text(&map, "text")
            .unwrap_err()
            .message
            .contains("must be a string, not a number"));
        assert!(optional_id(&map, "conversation_id")
            .unwrap_err()
            .message
            .contains("not a string"));
        assert!(required_text(&map, "missing")
            .unwrap_err()
            .message
            .contains("missing field \"missing\""));
        assert_eq!(optional_id(&map, "x").unwrap(), None);
        let map = json_object(br#"{"text": "hi", "conversation_id": 3}"#).unwrap();
        assert_eq!(required_text(&map, "text").unwrap(), "hi");
        assert_eq!(optional_id(&map, "conversation_id").unwrap(), Some(3));
    }

    #[test]
    fn bad_json_and_non_objects_are_400() {
        assert_eq!(json_object(b"{not json").unwrap_err().status, 400);
        assert!(json_object(b"[1]")
            .unwrap_err()
            .message
            .contains("an array"));
        assert!(json_object(b"  ").unwrap_err().message.contains("empty"));
    }
}
