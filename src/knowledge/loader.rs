//! Documents → text, one at a time, never more than one document in memory.
//!
//! txt and md are read as UTF-8 text (junk with a text extension is
//! refused, not indexed as mojibake); pdf goes through `pdf-extract`, a
//! pure-Rust extractor over `lopdf`: no C library to cross-compile for the
//! Pi, it decodes font encodings and ToUnicode maps (lopdf's own
//! `extract_text` does not), and it is maintained. It can panic on damaged
//! files, so it runs under `catch_unwind` and a panic becomes a per-file
//! error. The size limit is checked from the file's metadata before a byte
//! is read, so a 200 MB file costs nothing.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The kinds of files the knowledge base reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Txt,
    Md,
    Pdf,
}

impl Kind {
    /// By extension; `None` for anything else (skipped when walking a folder).
    pub fn of(path: &Path) -> Option<Kind> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "txt" | "text" => Some(Kind::Txt),
            "md" | "markdown" => Some(Kind::Md),
            "pdf" => Some(Kind::Pdf),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Txt => "txt",
            Kind::Md => "md",
            Kind::Pdf => "pdf",
        }
    }
}

/// Why one document could not be read. Each message names the problem and
/// the fix; the batch goes on with the next file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read it: {0}")]
    Io(String),
    #[error("too large ({size_mb} MB; the limit is {limit_mb} MB): split it, or raise knowledge.max_file_mb")]
    TooLarge { size_mb: u64, limit_mb: u64 },
    #[error("empty file")]
    Empty,
    #[error("not a text file ({0}); save it as UTF-8 text or give it its real extension")]
    NotText(String),
    #[error("the PDF has no text layer (a scan?); run OCR on it first (e.g. ocrmypdf) and ingest the result")]
    NoTextLayer,
    #[error("the PDF is encrypted; decrypt it first (e.g. qpdf --decrypt in.pdf out.pdf)")]
    Encrypted,
    #[error("the PDF is damaged or truncated ({0}); re-export or re-download it")]
    Damaged(String),
}

/// A document read into memory.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub kind: Kind,
    pub text: String,
    pub bytes: u64,
    /// sha256 of the file's bytes, hex.
    pub hash: String,
}

/// The file's size and sha256, streamed (no whole-file buffer): decides
/// "unchanged, skip" before any extraction.
pub fn fingerprint(path: &Path) -> Result<(u64, String), LoadError> {
    let mut file = std::fs::File::open(path).map_err(|e| LoadError::Io(e.to_string()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| LoadError::Io(e.to_string()))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((total, hex::encode(hasher.finalize())))
}

/// Check the size limit from metadata alone.
pub fn check_size(path: &Path, max_mb: u64) -> Result<u64, LoadError> {
    let size = std::fs::metadata(path)
        .map_err(|e| LoadError::Io(e.to_string()))?
        .len();
    let limit = max_mb.saturating_mul(1024 * 1024);
    if size > limit {
        return Err(LoadError::TooLarge {
            size_mb: size.div_ceil(1024 * 1024),
            limit_mb: max_mb,
        });
    }
    if size == 0 {
        return Err(LoadError::Empty);
    }
    Ok(size)
}

/// Read one document: size check, bytes, hash, text.
pub fn load(path: &Path, kind: Kind, max_mb: u64) -> Result<Loaded, LoadError> {
    check_size(path, max_mb)?;
    let bytes = std::fs::read(path).map_err(|e| LoadError::Io(e.to_string()))?;
    let hash = hex::encode(Sha256::digest(&bytes));
    let text = match kind {
        Kind::Txt | Kind::Md => decode_text(&bytes)?,
        Kind::Pdf => pdf_text(&bytes)?,
    };
    let text = normalise(&text);
    if text.trim().is_empty() {
        return Err(match kind {
            Kind::Pdf => LoadError::NoTextLayer,
            _ => LoadError::Empty,
        });
    }
    Ok(Loaded {
        path: path.to_path_buf(),
        kind,
        text,
        bytes: bytes.len() as u64,
        hash,
    })
}

/// UTF-8 (a BOM is dropped) with few control characters; anything else is
/// junk under a text name.
pub fn decode_text(bytes: &[u8]) -> Result<String, LoadError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if bytes.contains(&0) {
        return Err(LoadError::NotText("it contains NUL bytes".into()));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| LoadError::NotText(format!("invalid UTF-8 at byte {}", e.valid_up_to())))?;
    let controls = text
        .chars()
        .filter(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t' | '\u{c}'))
        .count();
    let total = text.chars().count().max(1);
    if controls * 100 > total {
        return Err(LoadError::NotText(format!(
            "{controls} control characters in {total}"
        )));
    }
    Ok(text.to_string())
}

/// Text of a PDF through pdf-extract, its panics contained.
pub fn pdf_text(bytes: &[u8]) -> Result<String, LoadError> {
    if !bytes.starts_with(b"%PDF") {
        return Err(LoadError::Damaged("no %PDF header".into()));
    }
    let looks_encrypted = contains(bytes, b"/Encrypt");
    let result = std::panic::catch_unwind(|| pdf_extract::extract_text_from_mem(bytes));
    match result {
        Err(_) => Err(if looks_encrypted {
            LoadError::Encrypted
        } else {
            LoadError::Damaged("the PDF reader could not parse it".into())
        }),
        Ok(Err(e)) => Err(if looks_encrypted {
            LoadError::Encrypted
        } else {
            LoadError::Damaged(one_line(&e.to_string()))
        }),
        Ok(Ok(text)) if text.trim().is_empty() => Err(if looks_encrypted {
            LoadError::Encrypted
        } else {
            LoadError::NoTextLayer
        }),
        Ok(Ok(text)) => Ok(text),
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Unix newlines, no trailing spaces, at most one blank line in a row, no
/// form feeds (PDF page breaks become paragraph breaks).
pub fn normalise(text: &str) -> String {
    let text = text.replace("\r\n", "\n").replace(['\r', '\u{c}'], "\n");
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank += 1;
            if blank == 1 && !out.is_empty() {
                out.push('\n');
            }
            continue;
        }
        blank = 0;
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The files to ingest under the given paths: files as given (any
/// extension: an unsupported one is reported), folders walked recursively
/// for txt/md/pdf, sorted, hidden entries skipped.
pub fn collect(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<(PathBuf, String)>) {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        if path.is_dir() {
            let before = files.len();
            walk(path, &mut files, &mut problems);
            if files.len() == before {
                problems.push((
                    path.clone(),
                    "no txt, md or pdf files in this folder".to_string(),
                ));
            }
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            problems.push((path.clone(), "no such file or folder".to_string()));
        }
    }
    (files, problems)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>, problems: &mut Vec<(PathBuf, String)>) {
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.path()).collect(),
        Err(e) => {
            problems.push((dir.to_path_buf(), format!("cannot list it: {e}")));
            return;
        }
    };
    entries.sort();
    for path in entries {
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        // Symlinked folders are not followed (a link loop would never end).
        let linked_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink())
            && path.is_dir();
        if linked_dir {
            continue;
        }
        if path.is_dir() {
            walk(&path, files, problems);
        } else if Kind::of(&path).is_some() {
            files.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junk_and_controls_are_not_text() {
        assert!(matches!(
            decode_text(b"\x00\x01abc"),
            Err(LoadError::NotText(_))
        ));
        assert!(matches!(
            decode_text(&[0xff, 0xfe, 0x41]),
            Err(LoadError::NotText(_))
        ));
        let noisy: Vec<u8> = (0..200)
            .map(|i| if i % 5 == 0 { 7 } else { b'a' })
            .collect();
        assert!(matches!(decode_text(&noisy), Err(LoadError::NotText(_))));
        assert_eq!(decode_text(b"\xEF\xBB\xBFhello").unwrap(), "hello");
    }

    #[test]
    fn normalise_collapses_blank_runs() {
        assert_eq!(normalise("a  \r\n\r\n\r\nb\u{c}c\n"), "a\n\nb\nc\n");
    }

    #[test]
    fn non_pdf_bytes_are_damaged_not_a_panic() {
        assert!(matches!(pdf_text(b"hello"), Err(LoadError::Damaged(_))));
        assert!(matches!(
            pdf_text(b"%PDF-1.4\n1 0 obj << /Type /Catalog"),
            Err(LoadError::Damaged(_))
        ));
    }
}
