//! Headings of a PDF found by font size (issue 19, point 4).
//!
//! A PDF's plain text says nothing about type sizes, and the headings of
//! documents from word processors and browsers are rarely ALL-CAPS or
//! numbered: they are just larger. `pdftotext -bbox-layout` gives every
//! word's box; a line whose words are clearly taller than the body text
//! (the height that carries most of the characters) is a heading, and
//! the larger its type, the higher it sits (`#` for the largest size,
//! `##` for the next, `###` for the rest). The lines are marked in the
//! plain text as markdown headings, which the splitter already reads.
//!
//! Each line is measured by its words' median height, so a footnote mark
//! or a superscript that stretches one line's box does not make it a
//! heading (seen in groff's man pages: "[1]" raised the line box 25 %).

use std::collections::HashMap;

/// How much taller than the body a line's words must be to head a section.
const MIN_RATIO: f32 = 1.15;
/// A heading is short.
const MAX_WORDS: usize = 12;
const MAX_CHARS: usize = 100;
/// Above this share of all lines, "larger than the body" is not a sign of
/// a heading (no clear body size: slides, forms), so nothing is marked.
const MAX_SHARE: f32 = 0.34;

/// A line set larger than the body: its page (from 0), its words joined
/// by single spaces, and its depth (1 = the largest size).
#[derive(Debug, Clone, PartialEq)]
pub struct SizedHeading {
    pub page: usize,
    pub text: String,
    pub depth: usize,
}

/// One line of the bbox output: page, median word height, text.
struct Line {
    page: usize,
    height: f32,
    text: String,
}

/// The headings in `xhtml`, the output of `pdftotext -bbox-layout`.
pub fn find(xhtml: &str) -> Vec<SizedHeading> {
    let lines = lines(xhtml);
    // The body's height: the one (to 0.1 pt) that carries most characters.
    let mut by_height: HashMap<i32, usize> = HashMap::new();
    for line in &lines {
        *by_height.entry(tenths(line.height)).or_default() += line.text.chars().count();
    }
    let Some((&body, _)) = by_height.iter().max_by_key(|(h, n)| (**n, -**h)) else {
        return Vec::new();
    };
    let body = body as f32 / 10.0;
    if body <= 0.0 {
        return Vec::new();
    }
    let candidates: Vec<&Line> = lines
        .iter()
        .filter(|l| l.height >= body * MIN_RATIO && heading_like(&l.text))
        .collect();
    if candidates.is_empty() || candidates.len() as f32 > lines.len() as f32 * MAX_SHARE {
        return Vec::new();
    }
    // Sizes to the half point, largest first: the depth is the rank.
    let mut sizes: Vec<i32> = candidates.iter().map(|l| halves(l.height)).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes.dedup();
    candidates
        .into_iter()
        .map(|l| SizedHeading {
            page: l.page,
            text: l.text.clone(),
            depth: sizes
                .iter()
                .position(|&s| s == halves(l.height))
                .map_or(3, |i| (i + 1).min(3)),
        })
        .collect()
}

/// How far a PDF's own `#` line is moved in: past a markdown heading's
/// three columns (CommonMark), so the splitter reads it as text.
const LITERAL_INDENT: &str = "    ";

/// Make the PDF's own lines that begin with `#` plain text before
/// [`mark`] adds the real headings' marks. Shell comments and root
/// prompts in a manual's examples ("# and then in another shell, run:"
/// in Valgrind's, "# ssh-keygen -M generate …" in ssh-keygen(1)) would
/// otherwise read as markdown headings. Only white space is added; every
/// word stays.
pub fn literal_marks_as_text(pages: &mut [String]) {
    for page in pages.iter_mut() {
        if !page.lines().any(|l| l.trim_start().starts_with('#')) {
            continue;
        }
        let mut out = String::with_capacity(page.len() + 64);
        for line in page.split_inclusive('\n') {
            if line.trim_start().starts_with('#') {
                out.push_str(LITERAL_INDENT);
            }
            out.push_str(line);
        }
        *page = out;
    }
}

/// Mark the `headings` in the plain text of `pages` (one string per page,
/// as `pdftotext` wrote them): each line whose words are a heading's on
/// the same page becomes `#… text`, in order, once per heading.
pub fn mark(pages: &mut [String], headings: &[SizedHeading]) {
    for (index, page) in pages.iter_mut().enumerate() {
        let mut wanted: Vec<&SizedHeading> = headings.iter().filter(|h| h.page == index).collect();
        if wanted.is_empty() {
            continue;
        }
        let mut out = String::with_capacity(page.len() + 16 * wanted.len());
        for line in page.split_inclusive('\n') {
            let words = collapse(line);
            let hit = wanted
                .iter()
                .position(|h| !words.is_empty() && h.text == words);
            match hit {
                Some(i) => {
                    let h = wanted.remove(i);
                    out.push_str(&"#".repeat(h.depth));
                    out.push(' ');
                    out.push_str(line.trim_start());
                    if !line.ends_with('\n') {
                        out.push('\n');
                    }
                }
                None => out.push_str(line),
            }
        }
        *page = out;
    }
}

/// Short, with a letter, not a clause that goes on, and not code: a
/// monospace line (an example command under EXAMPLES, `xz -dk bar.xz`)
/// can be set in a font whose boxes are taller than the body's, so a
/// line that starts with a lower-case word or an option dash, or holds
/// the characters of a command line, is not a heading.
fn heading_like(text: &str) -> bool {
    let words = text.split_whitespace().count();
    let first_letter_lower = text
        .chars()
        .find(|c| c.is_alphabetic())
        .is_some_and(char::is_lowercase);
    (1..=MAX_WORDS).contains(&words)
        && text.chars().count() <= MAX_CHARS
        && text.chars().any(char::is_alphabetic)
        && !text.ends_with([',', ';'])
        && !first_letter_lower
        && !text.starts_with(['-', '\u{2212}', '$', '#', '>'])
        && !text.contains(['=', '|', '<', '>', '$', '{', '}', '\\', ';', '*', '`'])
}

fn tenths(h: f32) -> i32 {
    (h * 10.0).round() as i32
}

fn halves(h: f32) -> i32 {
    (h * 2.0).round() as i32
}

fn collapse(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The lines of the bbox output, in order. The format is poppler's: one
/// element per line, `<page …>`, `<line …>`, `<word xMin=… yMin=… xMax=…
/// yMax=…>text</word>`; anything else is skipped.
fn lines(xhtml: &str) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    let mut page: Option<usize> = None;
    let mut heights: Vec<f32> = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut flush = |page: Option<usize>, heights: &mut Vec<f32>, words: &mut Vec<String>| {
        if let (Some(page), false) = (page, words.is_empty()) {
            heights.sort_unstable_by(f32::total_cmp);
            out.push(Line {
                page,
                height: heights[heights.len() / 2],
                text: words.join(" "),
            });
        }
        heights.clear();
        words.clear();
    };
    for raw in xhtml.lines() {
        let t = raw.trim_start();
        if t.starts_with("<page") {
            flush(page, &mut heights, &mut words);
            page = Some(page.map_or(0, |p| p + 1));
        } else if t.starts_with("<line") || t.starts_with("</line") {
            flush(page, &mut heights, &mut words);
        } else if let Some(rest) = t.strip_prefix("<word") {
            let (Some(y0), Some(y1)) = (attr(rest, "yMin"), attr(rest, "yMax")) else {
                continue;
            };
            let Some(text) = rest
                .split_once('>')
                .and_then(|(_, r)| r.rsplit_once("</word>"))
                .map(|(w, _)| unescape(w))
            else {
                continue;
            };
            let h = y1 - y0;
            if h.is_finite() && h > 0.0 && !text.trim().is_empty() {
                heights.push(h);
                words.push(text.trim().to_string());
            }
        }
    }
    flush(page, &mut heights, &mut words);
    out
}

/// The number in `name="…"`.
fn attr(tag: &str, name: &str) -> Option<f32> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let len = tag[start..].find('"')?;
    tag[start..start + len].parse().ok()
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(h: f32, text: &str) -> String {
        format!(
            "<word xMin=\"72.0\" yMin=\"100.000000\" xMax=\"90.0\" yMax=\"{:.6}\">{text}</word>\n",
            100.0 + h
        )
    }

    fn line(h: f32, text: &str) -> String {
        let mut s = "<line xMin=\"72\" yMin=\"100\" xMax=\"300\" yMax=\"120\">\n".to_string();
        for w in text.split_whitespace() {
            s.push_str(&word(h, w));
        }
        s.push_str("</line>\n");
        s
    }

    fn doc(pages: &[Vec<(f32, &str)>]) -> String {
        let mut s = "<doc>\n".to_string();
        for p in pages {
            s.push_str("<page width=\"612\" height=\"792\">\n<flow>\n<block>\n");
            for (h, t) in p {
                s.push_str(&line(*h, t));
            }
            s.push_str("</block>\n</flow>\n</page>\n");
        }
        s.push_str("</doc>\n");
        s
    }

    const BODY: &str = "The filter is rinsed under warm water every month and dried";

    #[test]
    fn larger_lines_are_headings_ranked_by_size() {
        let xhtml = doc(&[
            [(20.0, "Boiler Manual"), (15.0, "Pressure &amp; Care")]
                .into_iter()
                .chain([(11.0, BODY); 8])
                .collect(),
            [(15.0, "Repairs")]
                .into_iter()
                .chain([(11.0, BODY); 8])
                .collect(),
        ]);
        let found = find(&xhtml);
        let got: Vec<(usize, &str, usize)> = found
            .iter()
            .map(|h| (h.page, h.text.as_str(), h.depth))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, "Boiler Manual", 1),
                (0, "Pressure & Care", 2),
                (1, "Repairs", 2)
            ]
        );
        let mut pages = vec![
            format!("Boiler Manual\n\nPressure & Care\n{BODY}\n"),
            format!("Repairs\n{BODY}\n"),
        ];
        mark(&mut pages, &found);
        assert!(
            pages[0].starts_with("# Boiler Manual\n\n## Pressure & Care\n"),
            "{}",
            pages[0]
        );
        assert!(pages[1].starts_with("## Repairs\n"), "{}", pages[1]);
        // The splitter reads them as a path.
        let text = pages.join("\n");
        let pieces = crate::knowledge::splitter::split(
            &text,
            crate::knowledge::splitter::Strategy::Section,
            700,
        );
        assert!(
            pieces
                .iter()
                .any(|p| p.section.as_deref() == Some("Boiler Manual > Repairs")),
            "{:?}",
            pieces.iter().map(|p| &p.section).collect::<Vec<_>>()
        );
    }

    #[test]
    fn one_raised_mark_or_a_long_large_sentence_is_not_a_heading() {
        // A body line with one tall word (a superscript): median is body.
        let mut xhtml = String::from("<doc>\n<page>\n");
        xhtml.push_str("<line>\n");
        xhtml.push_str(&word(11.0, "see"));
        xhtml.push_str(&word(11.0, "the"));
        xhtml.push_str(&word(16.0, "[1]"));
        xhtml.push_str("</line>\n");
        for _ in 0..6 {
            xhtml.push_str(&line(11.0, BODY));
        }
        xhtml.push_str(&line(
            16.0,
            "a large sentence that runs on, much longer than any heading would ever be written",
        ));
        xhtml.push_str("</page>\n</doc>\n");
        assert!(find(&xhtml).is_empty(), "{:?}", find(&xhtml));
    }

    #[test]
    fn a_command_in_taller_type_is_not_a_heading() {
        let mut xhtml = String::from("<doc>\n<page>\n");
        for _ in 0..8 {
            xhtml.push_str(&line(11.0, BODY));
        }
        for code in [
            "xz \u{2212}dk bar.xz",
            "tar cf \u{2212} baz | xz \u{2212}4e > baz.tar.xz",
            "XZ_OPT=\u{2212}2v tar caf foo.tar.xz foo",
            "\u{2212}\u{2212}robot",
        ] {
            xhtml.push_str(&line(13.0, code));
        }
        xhtml.push_str(&line(13.0, "EXAMPLES"));
        xhtml.push_str("</page>\n</doc>\n");
        let found: Vec<String> = find(&xhtml).into_iter().map(|h| h.text).collect();
        assert_eq!(found, vec!["EXAMPLES".to_string()]);
    }

    #[test]
    fn a_pdf_s_own_hash_lines_stay_text() {
        // Valgrind's manual: a shell comment in an example, and a size-
        // marked heading on the same page.
        let xhtml = doc(&[[(15.0, "Connecting GDB")]
            .into_iter()
            .chain([(11.0, BODY); 8])
            .collect()]);
        let mut pages = vec![format!(
            "Connecting GDB\n{BODY}\n\nvalgrind --vgdb=yes prog\n# and then in another shell, run:\nvgdb --port=1234\n\n{BODY}\n"
        )];
        literal_marks_as_text(&mut pages);
        mark(&mut pages, &find(&xhtml));
        assert!(pages[0].starts_with("# Connecting GDB\n"), "{}", pages[0]);
        assert!(
            pages[0].contains("\n    # and then in another shell, run:\n"),
            "{}",
            pages[0]
        );
        let pieces = crate::knowledge::splitter::split(
            &pages[0],
            crate::knowledge::splitter::Strategy::Section,
            200,
        );
        assert!(
            pieces
                .iter()
                .all(|p| p.section.as_deref() == Some("Connecting GDB")),
            "{:?}",
            pieces.iter().map(|p| &p.section).collect::<Vec<_>>()
        );
        assert!(pieces
            .iter()
            .any(|p| p.text.contains("# and then in another shell, run:")));
    }

    #[test]
    fn a_page_of_all_large_type_or_garbage_marks_nothing() {
        // Every other line large: no clear body, nothing marked.
        let mut pages = Vec::new();
        for _ in 0..3 {
            pages.push(vec![(18.0, "Slide title"), (11.0, BODY)]);
        }
        assert!(find(&doc(&pages)).is_empty());
        assert!(find("").is_empty());
        assert!(find("<page>\n<line>\n<word yMin=\"x\" yMax=\"NaN\">a</word>\n").is_empty());
        let mut untouched = vec!["text\n".to_string()];
        mark(&mut untouched, &[]);
        assert_eq!(untouched, vec!["text\n".to_string()]);
    }
}
