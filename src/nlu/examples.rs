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

/// One utterance as read, with the line it is on (so a later check, such
/// as a clash with another file of the same set, can name `file:line`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub intent: String,
    pub text: String,
    pub line: usize,
}

/// Everything a lint pass found: the utterances it could read (in file
/// order, same-intent duplicates dropped) and every problem, not just the
/// first, so a hand-edited file is fixed in one go.
#[derive(Debug, Default)]
pub struct Linted {
    pub examples: Vec<Located>,
    /// In the order found: line problems first, then intents left empty.
    pub problems: Vec<ExamplesError>,
}

impl Linted {
    /// The utterances grouped by intent (duplicates already dropped).
    pub fn to_examples(&self) -> Examples {
        let mut out = Examples::new();
        for e in &self.examples {
            out.entry(e.intent.clone())
                .or_default()
                .push(e.text.clone());
        }
        out
    }
}

/// Check the `## intent` text format, reporting every problem. After a bad
/// header its utterances are skipped (the header is the problem, not each
/// line under it); a repeated header reports and goes on adding to the
/// first. A text with no intents at all is not a problem here (callers
/// decide: [`parse_examples`] refuses it).
pub fn lint_examples(text: &str, origin: &str) -> Linted {
    let err = |line: usize, message: String| ExamplesError {
        origin: origin.to_string(),
        line,
        message,
    };
    let mut out = Linted::default();
    let mut header_line: BTreeMap<String, usize> = BTreeMap::new();
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    let mut seen: BTreeMap<String, (String, usize)> = BTreeMap::new();
    // `None` before any header; `Some(None)` under a bad one.
    let mut current: Option<Option<String>> = None;
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let line = raw.trim();
        if let Some(name) = line.strip_prefix("##") {
            let name = name.trim();
            current = Some(None);
            if name.is_empty() {
                out.problems
                    .push(err(number, "`##` needs an intent name after it".into()));
            } else if name.chars().any(char::is_whitespace) {
                out.problems.push(err(
                    number,
                    format!("intent name {name:?} must not contain spaces"),
                ));
            } else if let Some(first) = header_line.get(name) {
                out.problems.push(err(
                    number,
                    format!("intent {name} is already defined at line {first}"),
                ));
                current = Some(Some(name.to_string()));
            } else {
                header_line.insert(name.to_string(), number);
                count.insert(name.to_string(), 0);
                current = Some(Some(name.to_string()));
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let intent = match &current {
            None => {
                out.problems.push(err(
                    number,
                    format!("utterance {line:?} comes before any `## intent` header"),
                ));
                continue;
            }
            Some(None) => continue,
            Some(Some(intent)) => intent,
        };
        let key = line.to_lowercase();
        if let Some((other, at)) = seen.get(&key) {
            if other != intent {
                out.problems.push(err(
                    number,
                    format!("{line:?} is also an example of {other} (line {at}); an utterance belongs to one intent"),
                ));
            }
            continue; // a same-intent duplicate is harmless
        }
        seen.insert(key, (intent.clone(), number));
        *count.entry(intent.clone()).or_default() += 1;
        out.examples.push(Located {
            intent: intent.clone(),
            text: line.to_string(),
            line: number,
        });
    }
    for (name, n) in &count {
        if *n == 0 {
            let line = header_line.get(name).copied().unwrap_or(0);
            out.problems
                .push(err(line, format!("intent {name} has no examples")));
        }
    }
    out
}

/// Parse the `## intent` text format. `origin` names the file in errors;
/// the error is the first problem [`lint_examples`] finds.
pub fn parse_examples(text: &str, origin: &str) -> Result<Examples, ExamplesError> {
    let linted = lint_examples(text, origin);
    if let Some(first) = linted.problems.into_iter().next() {
        return Err(first);
    }
    if linted.examples.is_empty() {
        return Err(ExamplesError {
            origin: origin.to_string(),
            line: 0,
            message: "no intents found (expected `## intent` headers)".into(),
        });
    }
    let mut out = Examples::new();
    for e in linted.examples {
        out.entry(e.intent).or_default().push(e.text);
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
    fn lint_reports_every_problem_and_keeps_what_it_can_read() {
        let text = "stray\n## a\none\nONE\n##\nlost\n## b\n## a\ntwo\n## c d\nx\n## e\none\n";
        let l = lint_examples(text, "f.txt");
        let lines: Vec<usize> = l.problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [1, 5, 8, 10, 13, 7, 12], "{:#?}", l.problems);
        assert!(l.problems[4]
            .message
            .contains("also an example of a (line 3)"));
        assert!(l.problems[5].message.contains("intent b has no examples"));
        let ex = l.to_examples();
        assert_eq!(
            ex["a"],
            vec!["one", "two"],
            "duplicates dropped, repeated header merged"
        );
        assert_eq!(ex.len(), 1);
        assert_eq!(l.examples[1].line, 9);
        assert!(lint_examples("# only a comment\n", "f").problems.is_empty());
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
