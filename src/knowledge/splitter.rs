//! Text → chunks, by section or by paragraph (the two strategies the
//! analysis picks from).
//!
//! Both keep the heading a chunk sits under (`section`, as a path like
//! `Chapter 3 Care > 3.2 Filters`) so an exact "section 3.2" question can
//! find it. `Section` never lets a chunk cross a heading (manuals,
//! references); `Paragraph` packs paragraphs up to the target size across
//! headings (essays, notes without structure). A paragraph longer than
//! 1.5× the target is cut at sentence ends.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// How a document is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    Section,
    Paragraph,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Section => "section",
            Strategy::Paragraph => "paragraph",
        }
    }
    pub fn parse(s: &str) -> Option<Strategy> {
        match s.trim().to_ascii_lowercase().as_str() {
            "section" | "sections" | "by section" | "thematic" => Some(Strategy::Section),
            "paragraph" | "paragraphs" | "by paragraph" | "episodic" => Some(Strategy::Paragraph),
            _ => None,
        }
    }
}

/// One piece of a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    pub section: Option<String>,
    pub text: String,
    /// The page the chunk starts on (1-based): the number of page-break
    /// lines ([`super::loader::PAGE_BREAK`]) before it, plus one. The
    /// ingest keeps it for PDFs only.
    pub page: u32,
}

static MD_HEADING: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(#{1,6})\s+(.+?)\s*#*\s*$").expect("static regex"));
static NUMBERED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\d{1,3}(?:\.\d{1,3}){0,4})\.?\s+\p{Lu}[^.!?]{0,80}$").expect("static regex")
});
static NAMED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(chapter|section|part|article|appendix)\s+([0-9]+(?:\.[0-9]+)*|[ivxlc]+|[a-z])\b.{0,80}$")
        .expect("static regex")
});

/// Which kinds of line may head a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Headings {
    /// Every kind: markdown marks, underlined titles, numbered and named
    /// lines, ALL-CAPS lines (man pages, plain-text manuals, and PDFs
    /// whose headings are bold at body size, as groff sets a man page).
    #[default]
    Any,
    /// A PDF whose headings were found by type size
    /// ([`super::pdf_headings`]): its ALL-CAPS lines at body size are the
    /// words of its code and tables — `BZ_OK`, `CARD32 N_ALIASES`,
    /// `LEAK SUMMARY:` in bzip2's, shared-mime-info's and Valgrind's
    /// DocBook manuals — not sections, and read as sections they cut its
    /// numbered chapters ("BZ_OK > 3.3.2. BZ2_bzCompress").
    Typeset,
}

/// Size-marked headings a PDF needs before its ALL-CAPS lines stop being
/// read as headings ([`Headings::Typeset`]).
const TYPESET_MIN: usize = 3;

impl Headings {
    /// For a PDF's text (the size pass has marked its headings with `#`
    /// at the margin, and its own `#` lines are indented out of reach,
    /// [`super::pdf_headings::literal_marks_as_text`]): `Typeset` when
    /// [`TYPESET_MIN`] or more were marked.
    pub fn of_pdf(text: &str) -> Headings {
        let marked = text
            .lines()
            .filter(|l| MD_HEADING.is_match(l) && indent_of(l) == 0)
            .take(TYPESET_MIN)
            .count();
        if marked >= TYPESET_MIN {
            Headings::Typeset
        } else {
            Headings::Any
        }
    }
}

/// A heading line: its depth (1 = top) and its text, if the line is one.
pub fn heading(line: &str) -> Option<(usize, String)> {
    heading_as(line, Headings::Any)
}

/// [`heading`], with only the kinds of line `style` allows.
fn heading_as(line: &str, style: Headings) -> Option<(usize, String)> {
    let line = line.trim();
    if line.is_empty() || line.len() > 100 {
        return None;
    }
    if let Some(c) = MD_HEADING.captures(line) {
        return Some((c[1].len(), c[2].trim().to_string()));
    }
    if let Some(c) = NAMED.captures(line) {
        let depth = match c[1].to_ascii_lowercase().as_str() {
            "part" => 1,
            "chapter" | "appendix" => 1,
            _ => 1 + c[2].matches('.').count() + 1,
        };
        return Some((depth, line.to_string()));
    }
    if let Some(c) = NUMBERED.captures(line) {
        return Some((1 + c[1].matches('.').count(), line.to_string()));
    }
    if style == Headings::Any && all_caps(line) {
        return Some((1, line.trim_end_matches(':').to_string()));
    }
    None
}

/// An ALL-CAPS line as man pages and plain-text manuals title their
/// sections ("OPTIONS", "EXIT STATUS", "SAFETY INSTRUCTIONS:"): mostly
/// capital letters, no lower-case one, a few words, no sentence end and
/// none of the characters of code or option lines.
fn all_caps(line: &str) -> bool {
    let words = line.split_whitespace().count();
    let letters = line.chars().filter(|c| c.is_alphabetic()).count();
    let visible = line.chars().filter(|c| !c.is_whitespace()).count();
    (3..=60).contains(&line.chars().count())
        && (1..=6).contains(&words)
        && letters >= 3
        && letters * 10 >= visible * 7
        && !line.chars().any(|c| c.is_lowercase())
        && !line.starts_with('-')
        && !line.ends_with(['.', ',', ';'])
        && !line.contains([
            '=', '(', ')', '[', ']', '{', '}', '<', '>', '/', '\\', '|', '$', '"',
        ])
}

/// How many heading lines a text has (the heuristic strategy picks
/// `Section` from two up).
pub fn count_headings(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let running = running_lines(&lines);
    let listed: Vec<bool> = not_headings(&lines)
        .into_iter()
        .zip(running)
        .map(|(a, b)| a || b)
        .collect();
    lines
        .iter()
        .zip(listed)
        .zip(underlines(&lines))
        .filter(|((l, listed), under)| match under {
            Underline::Title(_) => true,
            Underline::Rule => false,
            Underline::No => !listed && heading(l).is_some(),
        })
        .count()
}

static ITEM_NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(\d{1,3}(?:\.\d{1,3}){0,4})[.)]?\s+\S").expect("static regex"));

/// A numbered line's number as its parts ("2.3 Fit" → [2, 3]).
fn item_number(line: &str) -> Option<Vec<u32>> {
    let c = ITEM_NUMBER.captures(line.trim())?;
    c[1].split('.').map(|n| n.parse().ok()).collect()
}

/// Whether `b` is the number right after `a` ("4" → "5", "2.1" → "2.2").
fn follows(a: &[u32], b: &[u32]) -> bool {
    a.len() == b.len()
        && a[..a.len() - 1] == b[..b.len() - 1]
        && a.last().map(|n| n + 1) == b.last().copied()
}

/// Lines further apart than this are not items of one list: a numbered
/// section has a body longer than an item's wrapped text.
const ITEM_SPAN: usize = 3;

/// A markdown heading is indented at most this far (CommonMark).
const MD_INDENT: usize = 3;

/// Leading white space in columns (a tab counts 8).
fn indent_of(line: &str) -> usize {
    line.chars()
        .take_while(|c| c.is_whitespace())
        .map(|c| if c == '\t' { 8 } else { 1 })
        .sum()
}

/// A numbered line indented this far (columns) is a list item: plain-text
/// manuals and rendered man pages set headings at the margin and lists
/// inside the body's indentation.
const ITEM_INDENT: usize = 3;

/// Which lines look like headings but are not: a `#` line deep inside
/// a body's indentation, and the items of a numbered list: a
/// numbered line with its neighbour number within [`ITEM_SPAN`] lines
/// and no blank line between ("1. Name of the file" / "2. Number of
/// streams" in a man page's table, a table of contents), or one indented
/// [`ITEM_INDENT`] columns or more (a man page's numbered notes). A
/// numbered section has its body between it and the next number.
fn not_headings(lines: &[&str]) -> Vec<bool> {
    let numbers: Vec<Option<Vec<u32>>> = lines.iter().map(|l| item_number(l)).collect();
    let mut listed = vec![false; lines.len()];
    for (i, line) in lines.iter().enumerate() {
        // A `#` deep in a body is text that wrapped ("If\n   # is 0, …" in
        // zstd(1)), not a markdown heading (those sit at the margin).
        if indent_of(line) > MD_INDENT && line.trim_start().starts_with('#') {
            listed[i] = true;
        }
    }
    for (i, n) in numbers.iter().enumerate() {
        let Some(n) = n else { continue };
        if indent_of(lines[i]) >= ITEM_INDENT {
            listed[i] = true;
        }
        for j in i + 1..lines.len().min(i + 1 + ITEM_SPAN) {
            if lines[j].trim().is_empty() {
                break;
            }
            if let Some(m) = &numbers[j] {
                if follows(n, m) {
                    listed[i] = true;
                    listed[j] = true;
                }
                break;
            }
        }
    }
    listed
}

/// Lines read at a page's top or bottom: a running header or footer
/// sits among the first or last [`EDGE_LINES`] lines of a page.
const EDGE_LINES: usize = 4;

/// Which lines are a PDF's running headers and footers: a line (digits
/// ignored, so "-2-" and "-3-" are one) standing at the top or bottom of
/// at least three pages and of half of them, wherever it stands (once
/// known, a footer is a footer mid-page too). Such a line is not a heading
/// even when it is ALL-CAPS: groff's man pages end every page on "BSD",
/// groff's manuals start every page on "USING AUTOMAKE IN THE GROFF
/// PROJECT", and read as headings they made the section of every chunk
/// after a page break ("ssh.pdf, BSD" for 53 of ssh(1)'s 96 chunks). The
/// words stay in the text (every word is kept); only the section path
/// ignores them. A text without page breaks has none.
fn running_lines(lines: &[&str]) -> Vec<bool> {
    let mut out = vec![false; lines.len()];
    let key = |l: &str| -> String {
        l.trim()
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .collect::<String>()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Each page's edge lines: indices of its first and last non-empty ones.
    let mut pages: Vec<Vec<usize>> = Vec::new();
    let mut page: Vec<usize> = Vec::new();
    let close = |page: &mut Vec<usize>, pages: &mut Vec<Vec<usize>>| {
        let mut edge: Vec<usize> = page.iter().take(EDGE_LINES).copied().collect();
        edge.extend(page.iter().rev().take(EDGE_LINES));
        edge.sort_unstable();
        edge.dedup();
        pages.push(edge);
        page.clear();
    };
    for (i, line) in lines.iter().enumerate() {
        if *line == super::loader::PAGE_BREAK {
            close(&mut page, &mut pages);
        } else if !line.trim().is_empty() {
            page.push(i);
        }
    }
    close(&mut page, &mut pages);
    if pages.len() < 3 {
        return out;
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    for edge in &pages {
        let mut keys: Vec<String> = edge.iter().map(|&i| key(lines[i])).collect();
        keys.sort();
        keys.dedup();
        for k in keys.into_iter().filter(|k| !k.is_empty()) {
            *seen.entry(k).or_insert(0) += 1;
        }
    }
    let enough = |n: usize| n >= 3 && n * 2 >= pages.len();
    // Every line with that text, at a page's edge or not: poppler's
    // reading order can put a footer's first word mid-page (ssh(1)'s
    // "BSD" on its first page, between two options).
    for (i, line) in lines.iter().enumerate() {
        if seen.get(&key(line)).is_some_and(|&n| enough(n)) {
            out[i] = true;
        }
    }
    out
}

/// What an underline makes of a line (markdown's setext headings,
/// reStructuredText's titles: Python's and many manuals' plain text).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Underline {
    No,
    /// The title line, at this depth (`=` 1, `-` 2, others 3).
    Title(usize),
    /// The underline (or RST overline) itself: no words, not text.
    Rule,
}

/// A line of one punctuation mark repeated, three or more.
fn rule_char(line: &str) -> Option<char> {
    let t = line.trim();
    let first = t.chars().next()?;
    (t.chars().count() >= 3 && "=-~^*+#_:".contains(first) && t.chars().all(|c| c == first))
        .then_some(first)
}

/// The underlined titles of a text: a short line that starts a block
/// (after a blank line, an overline or the start), at the margin, with
/// an underline at least half its length right under it.
fn underlines(lines: &[&str]) -> Vec<Underline> {
    let mut out = vec![Underline::No; lines.len()];
    for i in 1..lines.len() {
        let Some(mark) = rule_char(lines[i]) else {
            continue;
        };
        let title = lines[i - 1].trim();
        let starts_block =
            i < 2 || lines[i - 2].trim().is_empty() || rule_char(lines[i - 2]).is_some();
        let fits = !title.is_empty()
            && title.chars().count() <= 80
            && title.chars().any(char::is_alphanumeric)
            && indent_of(lines[i - 1]) <= MD_INDENT
            && rule_char(title).is_none()
            && lines[i].trim().chars().count() * 2 >= title.chars().count();
        if !fits || !starts_block || out[i - 1] != Underline::No {
            continue;
        }
        let depth = match mark {
            '=' => 1,
            '-' => 2,
            _ => 3,
        };
        out[i - 1] = Underline::Title(depth);
        out[i] = Underline::Rule;
        if i >= 2 && rule_char(lines[i - 2]) == Some(mark) {
            out[i - 2] = Underline::Rule;
        }
    }
    out
}

/// A paragraph with the section path it sits under.
struct Para {
    section: Option<String>,
    text: String,
    page: u32,
    /// Starts a new section (a chunk must not cross it under `Section`).
    starts_section: bool,
}

fn paragraphs(text: &str, style: Headings) -> Vec<Para> {
    let mut out = Vec::new();
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut current = String::new();
    let mut new_section = false;
    let mut page: u32 = 1;
    // The page the paragraph in `current` started on.
    let mut para_page: u32 = 1;
    let label = |path: &Vec<(usize, String)>| {
        (!path.is_empty()).then(|| {
            path.iter()
                .map(|(_, t)| t.as_str())
                .collect::<Vec<_>>()
                .join(" > ")
        })
    };
    let flush = |current: &mut String,
                 out: &mut Vec<Para>,
                 path: &Vec<(usize, String)>,
                 new_section: &mut bool,
                 page: u32| {
        let t = current.trim();
        if !t.is_empty() {
            out.push(Para {
                section: label(path),
                text: t.to_string(),
                page,
                starts_section: *new_section,
            });
            *new_section = false;
        }
        current.clear();
    };
    // Whether `current` holds more than a heading line.
    let mut has_body = false;
    // The heading on the line just before (its depth and text), so a
    // heading that wrapped onto a second line is read as one.
    let mut wrapped_heading: Option<(usize, String)> = None;
    let lines: Vec<&str> = text.lines().collect();
    let running = running_lines(&lines);
    let listed = not_headings(&lines)
        .into_iter()
        .zip(running)
        .map(|(a, b)| a || b);
    let under = underlines(&lines);
    for ((line, listed), under) in lines.iter().copied().zip(listed).zip(under) {
        if line == super::loader::PAGE_BREAK {
            // A page break ends a paragraph (so a chunk's page is where its
            // text starts); the packing below joins them again.
            if has_body {
                flush(&mut current, &mut out, &path, &mut new_section, para_page);
            }
            page += 1;
            continue;
        }
        if current.is_empty() {
            para_page = page;
        }
        if under == Underline::Rule {
            continue;
        }
        let found = match under {
            Underline::Title(depth) => Some((depth, line.trim().to_string())),
            _ => heading_as(line, style).filter(|_| !listed),
        };
        if let Some((depth, title)) = found {
            let shown = line.trim().trim_start_matches('#').trim();
            if has_body {
                flush(&mut current, &mut out, &path, &mut new_section, para_page);
            } else if let Some(last) = wrapped_heading.take().filter(|(d, t)| {
                *d == depth && line.trim_start().starts_with('#') && t.len() + title.len() < 100
            }) {
                // The next line of a heading that wrapped (a PDF title set
                // large over two lines): one heading, both lines' words.
                let joined = format!("{} {title}", last.1);
                path.retain(|(d, _)| *d < depth);
                path.push((depth, joined.clone()));
                wrapped_heading = Some((depth, joined));
                if current.ends_with('\n') {
                    current.pop();
                }
                current.push(' ');
                current.push_str(shown);
                current.push('\n');
                continue;
            }
            // A heading with nothing under it before the next one stays in
            // the text (a title over its first section, an author line):
            // every word of the document is kept.
            path.retain(|(d, _)| *d < depth);
            path.push((depth, title.clone()));
            new_section = true;
            has_body = false;
            wrapped_heading = Some((depth, title));
            // The heading line opens the section's first paragraph, so the
            // chunk's text (and its embedding) names its subject.
            current.push_str(shown);
            current.push('\n');
            continue;
        }
        wrapped_heading = None;
        if line.trim().is_empty() {
            // A heading alone is not a paragraph: keep it with the next one.
            if has_body {
                flush(&mut current, &mut out, &path, &mut new_section, para_page);
            }
            continue;
        }
        current.push_str(line.trim());
        current.push('\n');
        has_body = true;
    }
    flush(&mut current, &mut out, &path, &mut new_section, para_page);
    out
}

/// Cut a long paragraph at sentence ends into pieces of about `target`.
fn cut_long(text: &str, target: usize) -> Vec<String> {
    if text.chars().count() <= target * 3 / 2 {
        return vec![text.to_string()];
    }
    let mut out = Vec::new();
    let mut current = String::new();
    let mut sentence = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        sentence.push(c);
        let end =
            matches!(c, '.' | '!' | '?' | ';') && chars.peek().is_none_or(|n| n.is_whitespace());
        if end || sentence.chars().count() >= target {
            if current.chars().count() + sentence.chars().count() > target && !current.is_empty() {
                out.push(current.trim().to_string());
                current.clear();
            }
            current.push_str(&sentence);
            sentence.clear();
        }
    }
    current.push_str(&sentence);
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

/// Split a document's text into chunks of about `target` characters.
pub fn split(text: &str, strategy: Strategy, target: usize) -> Vec<Piece> {
    split_as(text, strategy, target, Headings::Any)
}

/// [`split`], reading as headings only the kinds of line `style` allows.
pub fn split_as(text: &str, strategy: Strategy, target: usize, style: Headings) -> Vec<Piece> {
    let target = target.max(200);
    let mut pieces: Vec<Piece> = Vec::new();
    let mut current: Option<Piece> = None;
    for para in paragraphs(text, style) {
        for part in cut_long(&para.text, target) {
            let boundary = strategy == Strategy::Section && para.starts_section;
            let fits = current
                .as_ref()
                .is_some_and(|c| c.text.chars().count() + part.chars().count() < target);
            match current.as_mut() {
                Some(c) if fits && !boundary => {
                    c.text.push_str("\n\n");
                    c.text.push_str(&part);
                }
                _ => {
                    if let Some(done) = current.take() {
                        pieces.push(done);
                    }
                    current = Some(Piece {
                        section: para.section.clone(),
                        text: part,
                        page: para.page,
                    });
                }
            }
        }
    }
    if let Some(done) = current.take() {
        pieces.push(done);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "# Manual\n\nIntro text here.\n\n## 1 Setup\n\nPlug it in.\n\nTurn it on.\n\n## 2 Care\n\n### 2.1 Filters\n\nRinse the filter monthly.\n\nChapter 3 Storage\n\nKeep it dry.\n";

    #[test]
    fn headings_are_recognised() {
        assert_eq!(heading("## 2 Care"), Some((2, "2 Care".into())));
        assert_eq!(
            heading("4.2 Replacing the filter"),
            Some((2, "4.2 Replacing the filter".into()))
        );
        assert_eq!(heading("Chapter 3 Storage").map(|h| h.0), Some(1));
        assert_eq!(heading("Section 4.2 Filters").map(|h| h.0), Some(3));
        assert_eq!(heading("It costs 3 Euros. Then more."), None);
        assert_eq!(heading("2024 was a year."), None);
        // Man pages and plain-text manuals: ALL-CAPS lines are sections.
        assert_eq!(heading("OPTIONS"), Some((1, "OPTIONS".into())));
        assert_eq!(heading("EXIT STATUS"), Some((1, "EXIT STATUS".into())));
        assert_eq!(heading("SAFETY NOTES:"), Some((1, "SAFETY NOTES".into())));
        assert_eq!(heading("JOURNALCTL(1)   journalctl   JOURNALCTL(1)"), None);
        assert_eq!(heading("NO."), None);
        assert_eq!(heading("FOO=BAR"), None);
        assert_eq!(heading("--USER"), None);
        assert_eq!(
            heading("THIS IS A VERY LONG SHOUTED SENTENCE OF MANY WORDS"),
            None
        );
        assert_eq!(count_headings(DOC), 5);
    }

    #[test]
    fn underlined_titles_are_headings() {
        let doc = "APT\n===\n\nIntro to apt.\n\nDebugging\n---------\n\nUse the options.\n\
                   Last line of a paragraph\n---\n\n=====\nTitle\n=====\n\nBody.\n\n\
                   Name   Value\n-----  -----\nx      1\n\n---\n";
        let lines: Vec<&str> = doc.lines().collect();
        let u = underlines(&lines);
        assert_eq!(u[0], Underline::Title(1));
        assert_eq!(u[1], Underline::Rule);
        assert_eq!(u[5], Underline::Title(2));
        assert_eq!(u[9], Underline::No, "a paragraph's last line stays text");
        assert_eq!(u[10], Underline::No);
        assert_eq!(
            (u[12], u[13], u[14]),
            (Underline::Rule, Underline::Title(1), Underline::Rule)
        );
        assert!(
            u[18..].iter().all(|k| *k == Underline::No),
            "a table's rule, a lone break"
        );
        assert_eq!(count_headings(doc), 3);
        let pieces = split(doc, Strategy::Section, 800);
        let debugging = pieces
            .iter()
            .find(|p| p.text.contains("Use the options."))
            .unwrap();
        assert_eq!(debugging.section.as_deref(), Some("APT > Debugging"));
        assert!(debugging.text.starts_with("Debugging\n"), "{debugging:?}");
        let all: String = pieces.iter().map(|p| p.text.as_str()).collect();
        assert!(!all.contains("==="), "the underlines are not text: {all}");
        assert!(all.contains("Last line of a paragraph\n---"));
    }

    #[test]
    fn a_numbered_list_is_not_a_run_of_headings() {
        // xz(1)'s robot-mode columns and a table of contents: items.
        let doc = "ROBOT MODE\nThe columns of the file lines:\n1. Name of the file\n\
                   2. Number of streams in the file\n3. Compression ratio, for example, 0.123.\n\
                   The ratio goes on here and\nwraps over a line.\n4. Total size of stream padding\n\
                   The columns of the stream lines:\n\nContents\n1 Introduction\n2 Users and Groups\n";
        let lines: Vec<&str> = doc.lines().collect();
        let listed = not_headings(&lines);
        let items: Vec<&str> = lines
            .iter()
            .zip(&listed)
            .filter(|(_, l)| **l)
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(
            items,
            [
                "1. Name of the file",
                "2. Number of streams in the file",
                "3. Compression ratio, for example, 0.123.",
                "4. Total size of stream padding",
                "1 Introduction",
                "2 Users and Groups"
            ]
        );
        assert_eq!(count_headings(doc), 1, "only ROBOT MODE");
        let pieces = split(doc, Strategy::Section, 800);
        assert!(
            pieces
                .iter()
                .all(|p| p.section.as_deref() == Some("ROBOT MODE")),
            "{pieces:?}"
        );
        // Numbered sections with a body between them stay headings.
        let doc = "1. Setup\nPlug it in.\nThen wait for the light.\nIt turns green.\n\
                   2. Care\nRinse the filter.\n\n2.1 Filters\nMonthly.\n";
        assert_eq!(count_headings(doc), 3);
        assert!(!not_headings(&doc.lines().collect::<Vec<_>>()).contains(&true));
        assert!(follows(&[2, 1], &[2, 2]) && !follows(&[2], &[2, 1]) && !follows(&[1], &[3]));
        // A man page's numbered notes sit inside the body's indentation.
        let doc = "NOTES\n\n        1. Discoverable Partitions Specification\n\
                   https://example.org/dps\n\n        2. Journal Export Format\n\
                   https://example.org/jef\n\nSEE ALSO\n";
        assert_eq!(count_headings(doc), 2, "NOTES and SEE ALSO only");
        let doc = "OPTIONS\n       -T#, --threads=#: Compress using # threads. If\n       # is 0, detect the cores.\n# Real heading\n";
        assert_eq!(count_headings(doc), 2, "OPTIONS and the markdown heading");
    }

    #[test]
    fn a_heading_with_nothing_under_it_keeps_its_words() {
        // A title page: title, author, then the first section.
        let doc = "# Users and Groups\n\n## Joey Hess\n\n## 1 Introduction\n\nAccounts are listed here.\n";
        let pieces = split(doc, Strategy::Section, 800);
        let all: String = pieces.iter().map(|p| p.text.as_str()).collect();
        for word in [
            "Users",
            "Groups",
            "Joey",
            "Hess",
            "Introduction",
            "Accounts",
        ] {
            assert!(all.contains(word), "{word} lost: {all:?}");
        }
        let last = pieces.last().expect("a piece");
        assert_eq!(
            last.section.as_deref(),
            Some("Users and Groups > 1 Introduction")
        );
    }

    #[test]
    fn a_marked_heading_that_wrapped_is_one_heading() {
        let doc = "# Users and Groups in the Debian\n# System\n\nThis document describes accounts.\n\n## Root\n\nThe superuser.\n";
        let pieces = split(doc, Strategy::Section, 800);
        assert_eq!(
            pieces[0].section.as_deref(),
            Some("Users and Groups in the Debian System")
        );
        assert!(
            pieces[0]
                .text
                .starts_with("Users and Groups in the Debian System\nThis document"),
            "{:?}",
            pieces[0].text
        );
        assert_eq!(
            pieces[1].section.as_deref(),
            Some("Users and Groups in the Debian System > Root")
        );
        // Plain-text headings on adjacent lines (a table of contents) are
        // not joined: each stays a heading of its own, words kept.
        let toc = "CONTENTS\nOPTIONS\n\n-v  verbose.\n";
        let pieces = split(toc, Strategy::Section, 800);
        assert_eq!(pieces[0].section.as_deref(), Some("OPTIONS"));
        assert!(pieces[0].text.starts_with("CONTENTS\nOPTIONS\n"));
    }

    #[test]
    fn by_section_never_crosses_a_heading_and_keeps_the_path() {
        let pieces = split(DOC, Strategy::Section, 800);
        let sections: Vec<_> = pieces
            .iter()
            .map(|p| p.section.clone().unwrap_or_default())
            .collect();
        assert_eq!(
            sections,
            vec![
                "Manual",
                "Manual > 1 Setup",
                "Manual > 2 Care > 2.1 Filters",
                "Chapter 3 Storage"
            ]
        );
        assert!(pieces[1].text.contains("Plug it in.") && pieces[1].text.contains("Turn it on."));
        // "2 Care" has nothing of its own: its line opens its first
        // subsection's text.
        assert!(pieces[2].text.starts_with("2 Care\n2.1 Filters\n"));
    }

    #[test]
    fn a_typeset_pdf_s_all_caps_lines_are_text() {
        // bzip2's DocBook manual: numbered headings marked by size, its
        // return codes in capitals at body size.
        let doc = "# 3. Programming with libbzip2\n\nThe library.\n\n## 3.2. Error handling\n\nThe return codes are:\n\nBZ_OK\n\nThe request succeeded.\n\nBZ_PARAM_ERROR\n\nA parameter was wrong.\n\n## 3.3. Low-level interface\n\nCompress a buffer.\n";
        assert_eq!(Headings::of_pdf(doc), Headings::Typeset);
        let sections = |style| -> Vec<String> {
            split_as(doc, Strategy::Section, 200, style)
                .into_iter()
                .filter_map(|p| p.section)
                .collect()
        };
        let typeset = sections(Headings::Typeset);
        assert!(
            typeset
                .iter()
                .all(|s| s.starts_with("3. Programming with libbzip2") && !s.contains("BZ_")),
            "{typeset:?}"
        );
        assert!(typeset
            .iter()
            .any(|s| s == "3. Programming with libbzip2 > 3.3. Low-level interface"));
        let all: String = split_as(doc, Strategy::Section, 200, Headings::Typeset)
            .into_iter()
            .map(|p| p.text)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            all.contains("BZ_OK") && all.contains("BZ_PARAM_ERROR"),
            "{all}"
        );
        // Read as any text, the capitals are sections and cut the chapter.
        assert!(sections(Headings::Any).iter().any(|s| s == "BZ_OK"));
        // Two size marks are not enough to say the PDF is typeset: a man
        // page set by groff has its sections in bold capitals at body size.
        let man =
            "# ssh-keygen\n\nNAME\n\nssh-keygen - key tool\n\nDESCRIPTION\n\nIt makes keys.\n";
        assert_eq!(Headings::of_pdf(man), Headings::Any);
        // Indented `#` lines (a PDF's own, moved in) are not counted.
        let comments = "    # one\n    # two\n    # three\nOPTIONS\n";
        assert_eq!(Headings::of_pdf(comments), Headings::Any);
    }

    #[test]
    fn a_running_header_or_footer_is_not_a_heading() {
        // groff's ssh(1) as PDF: "SSH (1) … SSH (1)" over every page, "BSD"
        // and the date under it; one real section runs across the pages
        // (the first page's header, before NAME, has no section).
        let body = "-p port\nPort to connect to on the remote host.\n\n".repeat(3);
        let page = |n: usize, first: &str| {
            format!("SSH (1)\nBSD General Commands Manual\nSSH (1)\n{first}{body}BSD\nNovember 28, 2022\n{n}\n")
        };
        let text = [
            page(
                1,
                "NAME\nssh - remote login\nDESCRIPTION\n-C\n\nBSD\n\nRequests compression.\n",
            ),
            page(2, ""),
            page(3, ""),
            page(4, "ENVIRONMENT\n"),
        ]
        .join("\u{c}\n");
        let sections: Vec<String> = split(&text, Strategy::Section, 200)
            .iter()
            .map(|p| p.section.clone().unwrap_or_default())
            .collect();
        assert!(
            sections
                .iter()
                .all(|s| ["", "NAME", "DESCRIPTION", "ENVIRONMENT"].contains(&s.as_str())),
            "{sections:?}"
        );
        assert!(sections.iter().filter(|s| *s == "DESCRIPTION").count() >= 3);
        assert_eq!(count_headings(&text), 3);
        // Its words stay.
        assert!(split(&text, Strategy::Section, 200)
            .iter()
            .any(|p| p.text.contains("BSD")));
        // Without pages (or with two) an ALL-CAPS line is a heading again.
        let plain = "BSD\nsome text\n\nBSD\nmore text\n";
        assert_eq!(count_headings(plain), 2);
    }

    #[test]
    fn pages_are_counted_across_breaks_and_man_sections_kept() {
        let text = "NAME\n    tool - does things\n\nOPTIONS\n    -a  all of them\n\u{c}\n    -b  both\n\n    -c  the third,\n    continued\n\u{c}\n    on the next page\n";
        let pieces = split(text, Strategy::Section, 200);
        let got: Vec<_> = pieces
            .iter()
            .map(|p| (p.section.clone().unwrap_or_default(), p.page))
            .collect();
        assert_eq!(
            got,
            vec![("NAME".to_string(), 1), ("OPTIONS".to_string(), 1)]
        );
        let long = "word ".repeat(30);
        let text = format!("{long}one\n\n{long}two\n\u{c}\n{long}three starts here\n\u{c}\nand ends on page three\n\n{long}four\n");
        let small = split(&text, Strategy::Paragraph, 200);
        let pages: Vec<u32> = small.iter().map(|p| p.page).collect();
        assert_eq!(pages, vec![1, 1, 2, 3], "{small:?}");
        let three = small
            .iter()
            .find(|p| p.text.contains("three starts"))
            .unwrap();
        assert_eq!(three.page, 2);
        // A chunk is cited by the page it starts on.
        assert!(three.text.contains("ends on page three"));
        let four = small.iter().find(|p| p.text.contains("four")).unwrap();
        assert_eq!(four.page, 3);
        assert!(small.iter().all(|p| !p.text.contains('\u{c}')));
    }

    #[test]
    fn by_paragraph_packs_across_headings() {
        let pieces = split(DOC, Strategy::Paragraph, 800);
        assert_eq!(pieces.len(), 1);
        assert!(pieces[0].text.contains("Keep it dry."));
    }

    #[test]
    fn long_paragraphs_are_cut_at_sentences() {
        let long = "This is one sentence of moderate length. ".repeat(60);
        let pieces = split(&long, Strategy::Paragraph, 300);
        assert!(pieces.len() >= 7, "{}", pieces.len());
        for p in &pieces {
            assert!(p.text.chars().count() <= 450, "{}", p.text.len());
            assert!(p.text.ends_with('.'));
        }
    }
}
