//! `multipart/form-data` (RFC 7578), just enough to take a file field out
//! of a form upload: POST /api/voice sends the recording as field `audio`.

use super::ApiError;

/// One part of a form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub name: String,
    pub filename: Option<String>,
    pub content_type: Option<String>,
    pub data: Vec<u8>,
}

/// The boundary from a `Content-Type: multipart/form-data; boundary=…`.
pub fn boundary(content_type: Option<&str>) -> Result<String, ApiError> {
    let fix = "send the recording as multipart/form-data with a field named \"audio\" (curl -F audio=@clip.wav)";
    let content_type = content_type.unwrap_or("");
    let mut params = content_type.split(';').map(str::trim);
    let mime = params.next().unwrap_or("");
    if !mime.eq_ignore_ascii_case("multipart/form-data") {
        return Err(ApiError::new(
            415,
            format!(
                "expected Content-Type multipart/form-data, got {:?}; {fix}",
                content_type
            ),
        ));
    }
    params
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("boundary"))
        .map(|(_, v)| v.trim().trim_matches('"').to_string())
        .filter(|b| !b.is_empty() && b.len() <= 200)
        .ok_or_else(|| {
            ApiError::bad_request(format!("the multipart Content-Type has no boundary; {fix}"))
        })
}

/// Split a form body into its parts.
pub fn parts(body: &[u8], boundary: &str) -> Result<Vec<Part>, ApiError> {
    let malformed = |what: &str| {
        ApiError::bad_request(format!(
            "the multipart body is malformed ({what}); send a form with a field named \"audio\""
        ))
    };
    let delimiter = format!("--{boundary}").into_bytes();
    let next_delimiter = format!("\r\n--{boundary}").into_bytes();
    let mut pos =
        find(body, &delimiter, 0).ok_or_else(|| malformed("no boundary line"))? + delimiter.len();
    let mut out = Vec::new();
    loop {
        if body[pos..].starts_with(b"--") {
            return Ok(out);
        }
        if !body[pos..].starts_with(b"\r\n") {
            return Err(malformed("boundary not followed by a line break"));
        }
        pos += 2;
        let head_end =
            find(body, b"\r\n\r\n", pos).ok_or_else(|| malformed("part headers never end"))?;
        let head = String::from_utf8_lossy(&body[pos..head_end]).into_owned();
        let data_start = head_end + 4;
        let data_end = find(body, &next_delimiter, data_start)
            .ok_or_else(|| malformed("missing closing boundary"))?;
        let mut part = Part {
            name: String::new(),
            filename: None,
            content_type: None,
            data: body[data_start..data_end].to_vec(),
        };
        for line in head.split("\r\n") {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            if key.trim().eq_ignore_ascii_case("content-disposition") {
                part.name = param(value, "name").unwrap_or_default();
                part.filename = param(value, "filename");
            } else if key.trim().eq_ignore_ascii_case("content-type") {
                part.content_type = Some(value.trim().to_string());
            }
        }
        out.push(part);
        pos = data_end + next_delimiter.len();
    }
}

/// A `key="value"` parameter of a header value.
fn param(value: &str, key: &str) -> Option<String> {
    value.split(';').map(str::trim).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case(key)
            .then(|| v.trim().trim_matches('"').to_string())
    })
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > haystack.len() || needle.is_empty() {
        return None;
    }
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(boundary: &str, fields: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (name, filename, data) in fields {
            body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            match filename {
                Some(f) => body.extend_from_slice(
                    format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"{f}\"\r\nContent-Type: audio/wav\r\n\r\n").as_bytes(),
                ),
                None => body.extend_from_slice(format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes()),
            }
            body.extend_from_slice(data);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        body
    }

    #[test]
    fn finds_the_file_field_with_binary_data() {
        let wav = [0u8, 13, 10, 45, 45, 255, 1];
        let body = form(
            "xyz",
            &[("note", None, b"hello"), ("audio", Some("a.wav"), &wav)],
        );
        let b = boundary(Some("multipart/form-data; boundary=\"xyz\"")).unwrap();
        let parts = parts(&body, &b).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name, "note");
        assert_eq!(parts[0].data, b"hello");
        assert_eq!(parts[1].name, "audio");
        assert_eq!(parts[1].filename.as_deref(), Some("a.wav"));
        assert_eq!(parts[1].content_type.as_deref(), Some("audio/wav"));
        assert_eq!(parts[1].data, wav);
    }

    #[test]
    fn wrong_content_type_and_garbage_are_4xx() {
        assert_eq!(boundary(Some("application/json")).unwrap_err().status, 415);
        assert_eq!(boundary(None).unwrap_err().status, 415);
        assert_eq!(
            boundary(Some("multipart/form-data")).unwrap_err().status,
            400
        );
        assert_eq!(parts(b"garbage", "b").unwrap_err().status, 400);
        assert_eq!(
            parts(
                b"--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nno end",
                "b"
            )
            .unwrap_err()
            .status,
            400
        );
        assert_eq!(parts(b"--b", "b").unwrap_err().status, 400);
    }
}
