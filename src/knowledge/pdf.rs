//! PDF → text, page by page, through poppler's `pdftotext` run as a
//! program (as earshot runs espeak-ng).
//!
//! Chosen by measurement against `pdftotext` itself on PDFs from six
//! producers (scripts/make-test-pdfs.sh; notes/kb.md has the table): the
//! pure-Rust `pdf-extract` kept 1.5–4 % of the words of ghostscript PDFs
//! (enscript | ps2pdf) and 87 % of groff → ps2pdf, so it cannot be the
//! reader. poppler is a Debian package on the Pi too (`poppler-utils`),
//! GPL, so it is run, never linked.
//!
//! A PDF is hostile input, so the child runs bounded: an address-space
//! limit (`memory_mb`), a wall-clock limit (`timeout`) after which it is
//! killed, and at most `max_text_mb` of text read from it; a decompression
//! bomb or a recursion bomb becomes one line, never a stalled ingest.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::loader::LoadError;

/// The program, as `knowledge.pdf_program` names it by default.
pub const PROGRAM: &str = "pdftotext";

/// How `pdftotext` may run for one file.
#[derive(Debug, Clone)]
pub struct PdfLimits {
    pub program: String,
    pub timeout: Duration,
    pub memory_mb: u64,
    pub max_text_mb: u64,
}

impl Default for PdfLimits {
    fn default() -> Self {
        Self {
            program: PROGRAM.into(),
            timeout: Duration::from_secs(120),
            memory_mb: 1024,
            max_text_mb: 64,
        }
    }
}

/// Whether the program runs (for `doctor` and the ingest's one-line note):
/// its version line, or the fix.
pub fn check(program: &str) -> Result<String, String> {
    match Command::new(program)
        .arg("-v")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
    {
        Ok(out) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
            Ok(text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or(program)
                .trim()
                .to_string())
        }
        Err(e) => Err(missing(program, &e)),
    }
}

fn missing(program: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "'{program}' is not installed, so PDFs cannot be read; install poppler-utils (apt-get install poppler-utils, or scripts/knowledge-tools.sh)"
        ),
        _ => format!("cannot run '{program}': {e}"),
    }
}

/// Whether the first KiB holds the `%PDF-` marker (the spec allows junk
/// before it).
pub fn looks_like_pdf(path: &Path) -> Result<bool, LoadError> {
    let mut head = [0u8; 1024];
    let mut file = std::fs::File::open(path).map_err(|e| LoadError::Io(e.to_string()))?;
    let mut n = 0;
    while n < head.len() {
        match file.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(LoadError::Io(e.to_string())),
        }
    }
    Ok(head[..n].windows(5).any(|w| w == b"%PDF-"))
}

/// The most layout output read for headings by type size: ~50 KB a page
/// (pdftotext writes every word's box), so ~1000 pages; a larger document
/// keeps its text and its other headings, and ingest stays in bounded
/// memory.
const BBOX_MAX_BYTES: u64 = 48 * 1024 * 1024;

/// The text of each page, in reading order (poppler's default mode, not
/// `-layout`, so columns are read one after the other). Lines set in a
/// larger font than the body are marked as headings (`# Title`,
/// `## Section`) so citations name them; see [`super::pdf_headings`].
pub fn pages(path: &Path, limits: &PdfLimits) -> Result<Vec<String>, LoadError> {
    if !looks_like_pdf(path)? {
        return Err(LoadError::Damaged("no %PDF header".into()));
    }
    let cap = limits.max_text_mb.saturating_mul(1024 * 1024);
    let (out, err) = run_bounded(limits, &[], path, cap)?;
    let text = String::from_utf8_lossy(&out);
    if text
        .trim_matches(|c: char| c.is_whitespace() || c == '\u{c}')
        .is_empty()
    {
        // No text, and poppler complained: a damaged file, not a scan.
        if let Some(line) = err.lines().map(str::trim).find(|l| l.contains("Error")) {
            return Err(LoadError::Damaged(line.to_string()));
        }
    }
    let mut pages: Vec<String> = text.split('\u{c}').map(str::to_string).collect();
    // pdftotext ends every page, the last one too, with a form feed.
    if pages.len() > 1 && pages.last().is_some_and(|p| p.trim().is_empty()) {
        pages.pop();
    }
    super::pdf_headings::literal_marks_as_text(&mut pages);
    // Font sizes, from a second bounded run: any failure leaves the text
    // as it is (headings are a help to citations, not a condition).
    match run_bounded(limits, &["-bbox-layout"], path, BBOX_MAX_BYTES) {
        Ok((xhtml, _)) => {
            // Valid UTF-8 (as asked for) is taken as it is, not copied.
            let xhtml = String::from_utf8(xhtml)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
            let sized = super::pdf_headings::find(&xhtml);
            super::pdf_headings::mark(&mut pages, &sized);
        }
        Err(e) => tracing::debug!(path = %path.display(), error = %e, "no font sizes for headings"),
    }
    Ok(pages)
}

/// Run the reader on `path` with `args`, bounded (memory, wall time, at
/// most `cap` bytes of output): its output and the start of its stderr,
/// or the one-line reason it failed.
fn run_bounded(
    limits: &PdfLimits,
    args: &[&str],
    path: &Path,
    cap: u64,
) -> Result<(Vec<u8>, String), LoadError> {
    let mut command = Command::new(&limits.program);
    command
        .args(args)
        .args(["-enc", "UTF-8", "-eol", "unix"])
        .arg(path)
        .arg("-")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    limit_memory(&mut command, limits.memory_mb);
    let mut child = command
        .spawn()
        .map_err(|e| LoadError::Tool(missing(&limits.program, &e)))?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| LoadError::Io("no output pipe".into()))?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let over = (&mut stdout)
            .take(cap.saturating_add(1))
            .read_to_end(&mut buf)
            .is_ok()
            && buf.len() as u64 > cap;
        // Past the cap the pipe is closed: the child dies of SIGPIPE.
        (buf, over)
    });
    let mut stderr = child
        .stderr
        .take()
        .ok_or_else(|| LoadError::Io("no error pipe".into()))?;
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stderr).take(4096).read_to_end(&mut buf);
        // Drain the rest so the child never blocks on a full pipe.
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        String::from_utf8_lossy(&buf).into_owned()
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(e) => return Err(LoadError::Io(e.to_string())),
        }
        if started.elapsed() > limits.timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let (out, over) = reader
        .join()
        .map_err(|_| LoadError::Io("reading the PDF text failed".into()))?;
    let err = err_reader.join().unwrap_or_default();
    if over {
        return Err(LoadError::Damaged(format!(
            "it holds more than {} MB of text (a PDF bomb?); split it",
            cap / (1024 * 1024)
        )));
    }
    let Some(status) = status else {
        return Err(LoadError::Damaged(format!(
            "reading it took longer than {} s (a PDF bomb?); raise knowledge.pdf_timeout_s if it is a genuine huge file",
            limits.timeout.as_secs()
        )));
    };
    if !status.success() {
        let first = err
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .to_string();
        if err.contains("Incorrect password") {
            return Err(LoadError::Encrypted);
        }
        if status.code().is_none() {
            // Killed by a signal: the address-space limit (abort on a
            // failed allocation) or a crash.
            return Err(LoadError::Damaged(format!(
                "the PDF reader stopped ({status}); it may need more than {} MB (a PDF bomb?)",
                limits.memory_mb
            )));
        }
        let first = if first.is_empty() {
            format!("{} exited with {status}", limits.program)
        } else {
            first
        };
        return Err(LoadError::Damaged(first));
    }
    Ok((out, err))
}

/// Limit the child's address space (bytes) so a decompression bomb fails
/// its allocation instead of taking the device's memory.
fn limit_memory(command: &mut Command, memory_mb: u64) {
    use std::os::unix::process::CommandExt;
    let bytes = memory_mb.saturating_mul(1024 * 1024) as libc::rlim_t;
    // SAFETY: setrlimit is async-signal-safe and only touches the child.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_is_one_line_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let pdf = dir.path().join("a.pdf");
        std::fs::write(&pdf, b"%PDF-1.4\n").unwrap();
        let limits = PdfLimits {
            program: "/nonexistent/pdftotext".into(),
            ..Default::default()
        };
        let err = pages(&pdf, &limits).unwrap_err().to_string();
        assert!(err.contains("poppler-utils"), "{err}");
        assert!(!err.contains('\n'));
        assert!(check("/nonexistent/pdftotext").is_err());
    }

    #[test]
    fn no_header_is_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.pdf");
        std::fs::write(&f, b"hello, not a pdf").unwrap();
        assert!(matches!(
            pages(&f, &PdfLimits::default()),
            Err(LoadError::Damaged(_))
        ));
    }
}
