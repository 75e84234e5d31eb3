//! The readable examples file: one file per intent set.
//!
//! ```text
//! # comments start with '#'; blank lines are ignored
//! ## time.now
//! what's the time
//! what time is it
//!
//! ## todo.add
//! remind me to buy milk
//! ```
//!
//! `## name` starts an intent; every other non-blank line is one utterance
//! of the current intent. A JSON object `{"intent": ["utterance", …]}` is
//! accepted too (files ending in `.json`). Mistakes are reported with
//! `file:line` so a hand-edited file is easy to fix.

use std::collections::BTreeMap;
use std::path::Path;

/// Intent name → its example utterances (sorted by intent for stable
/// cache keys).
pub type Examples = BTreeMap<String, Vec<String>>;

/// A problem in an examples file, located at `origin:line`.
#[derive(Debug, thiserror::Error)]
#[error("{origin}:{line}: {message}")]
pub struct ExamplesError {
    pub origin: String,
    pub line: usize,
    pub message: String,
}

/// Parse the `## intent` text format. `origin` names the file in errors.
pub fn parse_examples(text: &str, origin: &str) -> Result<Examples, ExamplesError> {
    let err = |line: usize, message: String| ExamplesError {
        origin: origin.to_string(),
        line,
        message,
    };
    let mut out = Examples::new();
    let mut header_line: BTreeMap<String, usize> = BTreeMap::new();
    let mut seen: BTreeMap<String, (String, usize)> = BTreeMap::new();
    let mut current: Option<String> = None;
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let line = raw.trim();
        if let Some(name) = line.strip_prefix("##") {
            let name = name.trim();
            if name.is_empty() {
                return Err(err(number, "`##` needs an intent name after it".into()));
            }
            if name.chars().any(char::is_whitespace) {
                return Err(err(
                    number,
                    format!("intent name {name:?} must not contain spaces"),
                ));
            }
            if let Some(first) = header_line.get(name) {
                return Err(err(
                    number,
                    format!("intent {name} is already defined at line {first}"),
                ));
            }
            header_line.insert(name.to_string(), number);
            out.insert(name.to_string(), Vec::new());
            current = Some(name.to_string());
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(intent) = &current else {
            return Err(err(
                number,
                format!("utterance {line:?} comes before any `## intent` header"),
            ));
        };
        let key = line.to_lowercase();
        if let Some((other, at)) = seen.get(&key) {
            if other != intent {
                return Err(err(
                    number,
                    format!("{line:?} is also an example of {other} (line {at}); an utterance belongs to one intent"),
                ));
            }
            continue; // harmless duplicate within the same intent
        }
        seen.insert(key, (intent.clone(), number));
        if let Some(list) = out.get_mut(intent) {
            list.push(line.to_string());
        }
    }
    if let Some((name, _)) = out.iter().find(|(_, v)| v.is_empty()) {
        let line = header_line.get(name).copied().unwrap_or(0);
        return Err(err(line, format!("intent {name} has no examples")));
    }
    if out.is_empty() {
        return Err(err(
            0,
            "no intents found (expected `## intent` headers)".into(),
        ));
    }
    Ok(out)
}

/// Parse the JSON form `{"intent": ["utterance", …]}`.
pub fn parse_examples_json(text: &str, origin: &str) -> Result<Examples, ExamplesError> {
    let parsed: BTreeMap<String, Vec<String>> =
        serde_json::from_str(text).map_err(|e| ExamplesError {
            origin: origin.to_string(),
            line: e.line(),
            message: format!("expected {{\"intent\": [\"utterance\", …]}}: {e}"),
        })?;
    // Re-check through the text parser's rules.
    let mut text_form = String::new();
    for (intent, utterances) in &parsed {
        text_form.push_str(&format!("## {intent}\n"));
        for u in utterances {
            text_form.push_str(u.lines().next().unwrap_or(""));
            text_form.push('\n');
        }
    }
    parse_examples(&text_form, origin).map_err(|mut e| {
        e.line = 0;
        e
    })
}

/// Read and parse an examples file (text format, or JSON by extension).
pub fn load_examples(path: &Path) -> anyhow::Result<Examples> {
    let bytes = std::fs::read(path)
        .map_err(|e| anyhow::anyhow!("cannot read examples file {}: {e}", path.display()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("examples file {} is not UTF-8 text", path.display()))?;
    let origin = path.display().to_string();
    let parsed = if path.extension().is_some_and(|e| e == "json") {
        parse_examples_json(&text, &origin)?
    } else {
        parse_examples(&text, &origin)?
    };
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_headers_comments_and_blank_lines() {
        let ex = parse_examples("# c\n## a\none\n\ntwo\n## b\nthree\n", "f").unwrap();
        assert_eq!(ex["a"], vec!["one", "two"]);
        assert_eq!(ex["b"], vec!["three"]);
    }

    #[test]
    fn errors_carry_file_and_line() {
        let e = parse_examples("hello\n## a\nx\n", "routes.txt").unwrap_err();
        assert_eq!(
            e.to_string().split(':').take(2).collect::<Vec<_>>(),
            ["routes.txt", "1"]
        );
        let e = parse_examples("## a\nx\n## b\n\n## c\ny\n", "f").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.to_string().contains("intent b has no examples"));
        let e = parse_examples("## a\nsame\n## b\nSame\n", "f").unwrap_err();
        assert_eq!(e.line, 4);
        let e = parse_examples("## a\nx\n## a\ny\n", "f").unwrap_err();
        assert!(e.to_string().contains("already defined at line 1"), "{e}");
        let e = parse_examples("##  \nx\n", "f").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(parse_examples("", "f").is_err());
    }

    #[test]
    fn json_form_is_accepted_and_checked() {
        let ex = parse_examples_json(r#"{"a": ["x", "y"], "b": ["z"]}"#, "f.json").unwrap();
        assert_eq!(ex["a"].len(), 2);
        let e = parse_examples_json("{\n\"a\": [1]}", "f.json").unwrap_err();
        assert_eq!((e.origin.as_str(), e.line), ("f.json", 2));
        assert!(parse_examples_json(r#"{"a": []}"#, "f.json").is_err());
    }
}
