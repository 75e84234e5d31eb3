//! Documents → text, one at a time, never more than one document in memory.
//!
//! txt and md are read as text: UTF-8 (a BOM dropped), UTF-16 with its BOM,
//! or else Latin-1 when the bytes are not UTF-8 but look like text; junk
//! with a text extension (NUL bytes, control characters) is refused, not
//! indexed as mojibake. pdf goes through poppler's `pdftotext`, bounded in
//! memory, time and output ([`super::pdf`] says why it and not a crate);
//! its pages are kept, joined by a form-feed line, so chunks know their
//! page. The size limit is checked from the file's metadata before a byte
//! is read, so a 1 GB file costs nothing.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::pdf::PdfLimits;

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
    #[error("no text layer; OCR is not supported (a scanned PDF? run OCR on it first, e.g. ocrmypdf, and ingest the result)")]
    NoTextLayer,
    /// A program the reader needs is missing or unusable (the message has the fix).
    #[error("{0}")]
    Tool(String),
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
    /// The text; a PDF's pages are separated by a line holding only a
    /// form feed ([`PAGE_BREAK`]).
    pub text: String,
    pub bytes: u64,
    /// How the bytes were decoded when not UTF-8 ("latin-1", "utf-16le"…).
    pub encoding: Option<&'static str>,
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

/// The line that separates two pages of a PDF's text.
pub const PAGE_BREAK: &str = "\u{c}";

/// Read one document: size check, bytes, hash, text.
pub fn load(path: &Path, kind: Kind, max_mb: u64, pdf: &PdfLimits) -> Result<Loaded, LoadError> {
    check_size(path, max_mb)?;
    let (text, bytes, hash, encoding) = match kind {
        Kind::Txt | Kind::Md => {
            let raw = std::fs::read(path).map_err(|e| LoadError::Io(e.to_string()))?;
            let hash = hex::encode(Sha256::digest(&raw));
            let (text, encoding) = decode(&raw)?;
            (normalise(&text), raw.len() as u64, hash, encoding)
        }
        Kind::Pdf => {
            // The child process reads the file; only its hash is streamed here.
            let (bytes, hash) = fingerprint(path)?;
            let pages = super::pdf::pages(path, pdf)?;
            let text = pages
                .iter()
                .map(|p| normalise(p))
                .collect::<Vec<_>>()
                .join(&format!("{PAGE_BREAK}\n"));
            (text, bytes, hash, None)
        }
    };
    if text.replace(PAGE_BREAK, "").trim().is_empty() {
        return Err(match kind {
            Kind::Pdf => LoadError::NoTextLayer,
            _ => LoadError::Empty,
        });
    }
    Ok(Loaded {
        path: path.to_path_buf(),
        kind,
        text,
        bytes,
        hash,
        encoding,
    })
}

/// UTF-8 text (a BOM is dropped) with few control characters; anything
/// else is junk under a text name.
pub fn decode_text(bytes: &[u8]) -> Result<String, LoadError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if bytes.contains(&0) {
        return Err(LoadError::NotText("it contains NUL bytes".into()));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| LoadError::NotText(format!("invalid UTF-8 at byte {}", e.valid_up_to())))?;
    check_controls(text)?;
    Ok(text.to_string())
}

/// Text in the encodings a device's documents come in: UTF-8, UTF-16 with
/// a BOM (Windows' "Unicode"), else Latin-1 when the bytes are not UTF-8
/// but hold no NUL and few control characters. Returns the text and the
/// encoding when it was not UTF-8.
pub fn decode(bytes: &[u8]) -> Result<(String, Option<&'static str>), LoadError> {
    let utf16 = |rest: &[u8], le: bool, name: &'static str| {
        if rest.len() % 2 != 0 {
            return Err(LoadError::NotText(format!(
                "{name} with an odd number of bytes (truncated?)"
            )));
        }
        let units = rest.chunks_exact(2).map(|c| {
            if le {
                u16::from_le_bytes([c[0], c[1]])
            } else {
                u16::from_be_bytes([c[0], c[1]])
            }
        });
        let text: String = char::decode_utf16(units)
            .collect::<Result<_, _>>()
            .map_err(|_| LoadError::NotText(format!("invalid {name}")))?;
        if text.contains('\0') {
            return Err(LoadError::NotText("it contains NUL characters".into()));
        }
        check_controls(&text)?;
        Ok((text, Some(name)))
    };
    if let Some(rest) = bytes.strip_prefix(b"\xFF\xFE") {
        return utf16(rest, true, "utf-16le");
    }
    if let Some(rest) = bytes.strip_prefix(b"\xFE\xFF") {
        return utf16(rest, false, "utf-16be");
    }
    match decode_text(bytes) {
        Ok(text) => Ok((text, None)),
        Err(LoadError::NotText(why)) if why.starts_with("invalid UTF-8") => {
            // Latin-1: every byte is a character. C1 controls (0x80–0x9F)
            // count as controls, so binary still fails the check below.
            let text: String = bytes.iter().map(|&b| b as char).collect();
            check_controls(&text).map_err(|_| LoadError::NotText(why))?;
            Ok((text, Some("latin-1")))
        }
        Err(e) => Err(e),
    }
}

fn check_controls(text: &str) -> Result<(), LoadError> {
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
    Ok(())
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
    fn utf16_and_latin1_are_decoded_binary_is_not() {
        let mut le = vec![0xFF, 0xFE];
        le.extend("Café au lait".encode_utf16().flat_map(|u| u.to_le_bytes()));
        assert_eq!(
            decode(&le).unwrap(),
            ("Café au lait".to_string(), Some("utf-16le"))
        );
        let mut be = vec![0xFE, 0xFF];
        be.extend("Grüße".encode_utf16().flat_map(|u| u.to_be_bytes()));
        assert_eq!(decode(&be).unwrap().0, "Grüße");
        assert_eq!(
            decode(b"Caf\xe9 cr\xe8me br\xfbl\xe9e").unwrap(),
            ("Café crème brûlée".to_string(), Some("latin-1"))
        );
        assert_eq!(decode(b"plain").unwrap(), ("plain".to_string(), None));
        // Binary renamed .txt: NULs, or high bytes that are mostly C1 controls.
        assert!(matches!(
            decode(b"\x7fELF\x02\x01\x00\x00"),
            Err(LoadError::NotText(_))
        ));
        let noise: Vec<u8> = (0..400u32).map(|i| 0x80 + (i % 32) as u8).collect();
        assert!(matches!(decode(&noise), Err(LoadError::NotText(_))));
        assert!(matches!(
            decode(&[0xFF, 0xFE, 0x41]),
            Err(LoadError::NotText(_))
        ));
    }
}
