//! The user's own phrasings: `$STATE_DIR/intents/<set>.txt`, read at every
//! engine build, so teaching the device "gimme the hour" needs no rebuild.
//!
//! A file named `<set>.txt` adds its examples to that intent set
//! (`device.txt` to the shipped `device` set, `confirm.txt` to `confirm`; a
//! new name makes a new set a custom tree can classify with). Files are
//! read in name order; dotfiles (editor back-ups, lock files) and other
//! extensions are ignored.
//!
//! A file with an error is *left out* — the set is built from the others —
//! and the error is reported (log, `earshot tree check`, `earshot doctor`)
//! rather than refusing the tree: these files are edited by hand on a
//! running device, and a typo must not turn it into one that no longer
//! answers "what time is it". Warnings leave the file in.
//!
//! Bounds (a file is refused with one line past them, read in bounded time
//! and memory): [`MAX_FILE_BYTES`], [`MAX_LINES`], [`MAX_FILES`], and a
//! line longer than the classifier ever reads
//! ([`super::interpreter::MAX_CLASSIFY_CHARS`]) is an error at its line.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::interpreter::MAX_CLASSIFY_CHARS;
use super::validate::Severity;
use crate::nlu::examples::{lint_examples, Examples, Located};

/// A user examples file bigger than this is refused (a phrasing list is a
/// few kilobytes; this is a mistake, e.g. a log copied in).
pub const MAX_FILE_BYTES: u64 = 1_000_000;
/// A file with more lines than this is refused: every utterance is
/// embedded at start-up, and thousands of them take minutes on a board.
pub const MAX_LINES: usize = 5_000;
/// At most this many `*.txt` files are read (the rest are reported).
pub const MAX_FILES: usize = 64;
/// At most this many problems are listed per file (then one line counting
/// the rest), so a file of garbage does not flood the log.
pub const MAX_PROBLEMS_PER_FILE: usize = 50;

/// One problem in a user examples file, `file:line: message` (line 0 when
/// it is about the whole file).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    pub file: String,
    pub line: usize,
    pub message: String,
    pub severity: Severity,
}

impl Problem {
    fn error(file: &Path, line: usize, message: impl Into<String>) -> Problem {
        Problem {
            file: file.display().to_string(),
            line,
            message: message.into(),
            severity: Severity::Error,
        }
    }
    fn warning(file: &Path, line: usize, message: impl Into<String>) -> Problem {
        Problem {
            severity: Severity::Warning,
            ..Problem::error(file, line, message)
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

/// A file that could be read: the set it adds to and its utterances.
#[derive(Debug, Clone)]
pub struct UserFile {
    pub set: String,
    pub path: PathBuf,
    pub examples: Vec<Located>,
    /// It has an error: it is checked against its set (so every problem
    /// is listed at once) but adds nothing.
    pub broken: bool,
}

/// Where the user's examples files live: `$STATE_DIR/intents`.
pub fn dir(paths: &crate::paths::Paths) -> PathBuf {
    paths.state_dir.join("intents")
}

/// What [`read_dir`] found: the usable files and every problem.
#[derive(Debug, Clone, Default)]
pub struct UserIntents {
    pub files: Vec<UserFile>,
    pub problems: Vec<Problem>,
}

/// Read every `*.txt` of `dir`, in name order. A missing directory is the
/// usual case (nothing added, no problem).
pub fn read_dir(dir: &Path) -> UserIntents {
    let mut out = UserIntents::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => {
            out.problems.push(Problem::error(
                dir,
                0,
                format!("cannot read the intents directory: {e}; fix its permissions or remove it"),
            ));
            return out;
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !name.starts_with('.') && p.extension().is_some_and(|e| e == "txt")
        })
        .collect();
    paths.sort();
    if paths.len() > MAX_FILES {
        for skipped in &paths[MAX_FILES..] {
            out.problems.push(Problem::error(
                skipped,
                0,
                format!("more than {MAX_FILES} examples files in the directory; this one was not read (merge files)"),
            ));
        }
        paths.truncate(MAX_FILES);
    }
    for path in paths {
        let (file, problems) = read_file(&path);
        out.problems.extend(problems);
        out.files.extend(file);
    }
    out
}

/// Read and lint one file: the file when it could be read (`broken` when
/// it has errors), and its problems.
pub fn read_file(path: &Path) -> (Option<UserFile>, Vec<Problem>) {
    let set = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("")
        .to_string();
    if set.is_empty()
        || !set
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        let e = Problem::error(
            path,
            0,
            format!("{set:?} is not a set name; name the file <set>.txt with letters, digits, '_' or '-'"),
        );
        return (None, vec![e]);
    }
    let text = match read_bounded(path) {
        Ok(text) => text,
        Err(message) => return (None, vec![Problem::error(path, 0, message)]),
    };
    let mut problems = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if number > MAX_LINES {
            let e = Problem::error(
                path,
                0,
                format!("more than {MAX_LINES} lines; split it or trim it"),
            );
            return (None, vec![e]);
        }
        let chars = line.trim().chars().count();
        if chars > MAX_CLASSIFY_CHARS {
            problems.push(Problem::error(
                path,
                number,
                format!("line is {chars} characters; an utterance is at most {MAX_CLASSIFY_CHARS}"),
            ));
        }
    }
    let origin = path.display().to_string();
    let linted = lint_examples(&text, &origin);
    problems.extend(
        linted
            .problems
            .into_iter()
            .map(|p| Problem::error(path, p.line, p.message)),
    );
    if linted.examples.is_empty() && problems.is_empty() {
        problems.push(Problem::warning(
            path,
            0,
            "no `## intent` headers; nothing is added",
        ));
    }
    problems.sort_by_key(|p| p.line);
    if problems.len() > MAX_PROBLEMS_PER_FILE {
        let more = problems.len() - MAX_PROBLEMS_PER_FILE;
        problems.truncate(MAX_PROBLEMS_PER_FILE);
        problems.push(Problem::error(
            path,
            0,
            format!("{more} more problems not listed; fix the ones above first"),
        ));
    }
    let file = UserFile {
        set,
        path: path.to_path_buf(),
        examples: linted.examples,
        broken: problems.iter().any(|p| p.severity == Severity::Error),
    };
    (Some(file), problems)
}

/// The file's text, refusing (one line) one that is too big, unreadable or
/// not UTF-8. Reads at most [`MAX_FILE_BYTES`] + 1 bytes whatever the file
/// claims (a FIFO or a growing file cannot stall or exhaust the reader).
fn read_bounded(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "larger than {MAX_FILE_BYTES} bytes; an examples file is a list of phrasings, trim it"
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        let line = e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        format!("not UTF-8 text (first bad byte on line {line}); save it as UTF-8")
    })
}

/// Add `user`'s files to `sets`. An utterance a set already has under the
/// same intent is dropped (de-duplicated, case-insensitively); under
/// another intent it is an error at its line and the whole file is left
/// out. A `broken` file is checked the same way but adds nothing. Returns
/// the problems found here.
pub fn merge(sets: &mut BTreeMap<String, Examples>, user: &UserIntents) -> Vec<Problem> {
    let mut problems = Vec::new();
    for file in &user.files {
        let base = sets.get(&file.set);
        let mut known: BTreeMap<String, &str> = BTreeMap::new();
        for (intent, utterances) in base.into_iter().flatten() {
            for u in utterances {
                known.insert(u.to_lowercase(), intent);
            }
        }
        let mut added = Vec::new();
        let mut clashes = Vec::new();
        for e in &file.examples {
            match known.get(&e.text.to_lowercase()) {
                Some(intent) if *intent == e.intent => {}
                Some(intent) => clashes.push(Problem::error(
                    &file.path,
                    e.line,
                    format!(
                        "{:?} is already an example of {intent} in set '{}'; an utterance belongs to one intent (remove it here)",
                        e.text, file.set
                    ),
                )),
                None => added.push(e),
            }
        }
        let refused = file.broken || !clashes.is_empty();
        problems.extend(clashes);
        if refused {
            continue;
        }
        let set = sets.entry(file.set.clone()).or_default();
        for e in added {
            set.entry(e.intent.clone())
                .or_default()
                .push(e.text.clone());
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_missing_directory_adds_nothing_and_says_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let u = read_dir(&dir.path().join("intents"));
        assert!(u.files.is_empty() && u.problems.is_empty());
    }

    #[test]
    fn files_are_read_in_name_order_and_others_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(d, "zeta.txt", b"## a\nx\n");
        write(d, "device.txt", b"## time_now\ngimme the hour\n");
        write(d, ".device.txt", b"junk");
        write(d, "notes.md", b"junk");
        let u = read_dir(d);
        assert!(u.problems.is_empty(), "{:?}", u.problems);
        let sets: Vec<&str> = u.files.iter().map(|f| f.set.as_str()).collect();
        assert_eq!(sets, ["device", "zeta"]);
    }

    #[test]
    fn every_problem_is_one_line_with_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let long = "a".repeat(MAX_CLASSIFY_CHARS + 1);
        let p = write(
            d,
            "device.txt",
            format!("stray\n##\n## empty\n## ok\n{long}\n").as_bytes(),
        );
        let (file, problems) = read_file(&p);
        assert!(file.is_some_and(|f| f.broken));
        let shown: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        let at = |n: usize| format!("{}:{n}: ", p.display());
        assert_eq!(shown.len(), 4, "{shown:#?}");
        assert!(shown[0].starts_with(&at(1)) && shown[0].contains("before any"));
        assert!(shown[1].starts_with(&at(2)) && shown[1].contains("needs an intent name"));
        assert!(shown[2].starts_with(&at(3)) && shown[2].contains("no examples"));
        assert!(shown[3].starts_with(&at(5)) && shown[3].contains("characters"));
        assert!(shown.iter().all(|s| !s.contains('\n')));
    }

    #[test]
    fn bad_bytes_size_lines_and_names_are_refused_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let one = |p: &Path| {
            let (file, problems) = read_file(p);
            assert!(file.is_none_or(|f| f.broken));
            assert_eq!(problems.len(), 1, "{problems:?}");
            problems[0].to_string()
        };
        let p = write(d, "bin.txt", b"## a\nok\n\xff\xfe\n");
        assert!(one(&p).contains("not UTF-8 text (first bad byte on line 3)"));
        let p = write(d, "big.txt", &vec![b'a'; MAX_FILE_BYTES as usize + 10]);
        assert!(one(&p).contains("larger than"));
        let p = write(d, "long.txt", "## a\n".repeat(MAX_LINES + 1).as_bytes());
        assert!(one(&p).contains("more than 5000 lines"));
        let p = write(d, "junk.txt", "stray\n".repeat(200).as_bytes());
        let (_, problems) = read_file(&p);
        assert_eq!(problems.len(), MAX_PROBLEMS_PER_FILE + 1);
        assert!(problems[MAX_PROBLEMS_PER_FILE]
            .message
            .contains("150 more problems"));
        let p = write(d, "two words.txt", b"## a\nx\n");
        assert!(one(&p).contains("not a set name"));
        std::fs::create_dir(d.join("dir.txt")).unwrap();
        assert!(one(&d.join("dir.txt")).contains("cannot read it"));
        let p = write(d, "empty.txt", b"# nothing yet\n");
        let (file, problems) = read_file(&p);
        assert!(
            file.is_some_and(|f| !f.broken),
            "an empty file is only a warning"
        );
        assert_eq!(problems[0].severity, Severity::Warning);
    }

    #[test]
    fn merge_dedupes_adds_new_intents_and_refuses_a_clashing_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut sets = BTreeMap::new();
        let mut device = Examples::new();
        device.insert("time_now".into(), vec!["what time is it".into()]);
        device.insert("stop".into(), vec!["stop".into()]);
        sets.insert("device".to_string(), device);
        write(
            d,
            "device.txt",
            b"## time_now\nWhat time is it\ngimme the hour\n## weather\nis it raining\n",
        );
        write(d, "confirm.txt", b"## yes\nstop\n");
        write(d, "house.txt", b"## lights_on\nlights on\n");
        let u = read_dir(d);
        assert!(u.problems.is_empty());
        let problems = merge(&mut sets, &u);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            sets["device"]["time_now"],
            ["what time is it", "gimme the hour"]
        );
        assert_eq!(sets["device"]["weather"], ["is it raining"]);
        assert_eq!(sets["confirm"]["yes"], ["stop"], "another set may reuse it");
        assert_eq!(sets["house"]["lights_on"], ["lights on"]);

        let p = write(d, "device.txt", b"## time_now\nnew one\n## pause\nStop\n");
        let before = sets.clone();
        let problems = merge(&mut sets, &read_dir(d));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].file, p.display().to_string());
        assert_eq!(problems[0].line, 4);
        assert!(problems[0].message.contains("already an example of stop"));
        assert_eq!(sets["device"], before["device"], "the file was left out");
    }
}
