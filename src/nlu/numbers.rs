//! Numbers as people say them: the one spoken-number parser, a leaf that
//! `tree/` (spoken arithmetic) and `tools/` may both use, and that the
//! duration and clock-time parsers build on.
//!
//! Two layers, so later parsers can work on positions rather than strings:
//!
//! - [`tokenize`]: text → [`Token`]s with byte spans: lowercased words,
//!   digits (`1,000` → `1000`, `3.5`, `3/4`, `21st`), operator symbols and
//!   punctuation. Hyphens inside words split them ("twenty-one" → two words).
//! - [`parse_at`]: the number that starts at a token, as a [`Spoken`] — its
//!   exact [`Number`], its [`NumberKind`] (how it was said), a `negative`
//!   flag and the token span it used. [`parse_number`] and [`find_numbers`]
//!   are conveniences over the two.
//!
//! The grammar is strict on purpose ("refuse rather than guess"): "nineteen
//! eighty four" is 19 followed by 84, never 1984 or 103 — [`parse_pair`]
//! reads such side-by-side groups for years and clock times, where the
//! caller knows that is what was meant. "twenty thirty", "one one", "two
//! third" and "point twenty" stop where the grammar stops, so a caller that
//! needs the whole utterance to be a number sees leftover tokens and refuses.
//!
//! Values are exact where they can be (`u64` integers, fractions of `u64`s;
//! "3.14" is 157/50), `f64` beyond that, and a value that does not fit an
//! `f64` is [`NumberError::TooLarge`]. No input panics or wraps, and the
//! work is linear in the text's length.

use std::ops::Range;

// ------------------------------------------------------------------ tokens

/// What a [`Token`] is, as the tokenizer saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// Letters with inner apostrophes, lowercased: "twenty", "what's".
    Word,
    /// Whole digits; `text` has group commas removed ("1,000" → "1000") and
    /// keeps leading zeros ("05", for clock times).
    Integer,
    /// Digits with a decimal point: "3.5"; ".5" becomes "0.5".
    Decimal,
    /// Digits over digits with a nonzero denominator: "3/4" (and "½" as
    /// "1/2").
    Ratio,
    /// Digits with their proper ordinal suffix; `text` is the digits ("21").
    Ordinal,
    /// An operator character: `+ - * ** / ^ % ( ) = :` (`×`, `÷`, `−`, `–`
    /// are normalised to `*`, `/`, `-`).
    Symbol,
    /// Sentence punctuation (`, . ? ! ; "` and quotes): a boundary, never
    /// part of a number.
    Punct,
    /// Anything else (emoji, other scripts' digits): never part of a number.
    Other,
}

/// One token of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// Normalised text (see [`TokenKind`]).
    pub text: String,
    pub kind: TokenKind,
    /// Byte range in the original text, for callers that cut the text.
    pub span: Range<usize>,
}

impl Token {
    /// Whether this is the word `w` (lowercase).
    pub fn is_word(&self, w: &str) -> bool {
        self.kind == TokenKind::Word && self.text == w
    }
}

const PUNCT: &[char] = &[
    ',', '.', '?', '!', ';', '"', '\'', '…', '“', '”', '‘', '’', '¿', '¡', '«', '»',
];

/// Split `text` into tokens (see [`TokenKind`]); whitespace separates.
pub fn tokenize(text: &str) -> Vec<Token> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let byte_at = |k: usize| chars.get(k).map_or(text.len(), |(b, _)| *b);
    let ch = |k: usize| chars.get(k).map(|(_, c)| *c);
    let mut out = Vec::new();
    let mut k = 0;
    while let Some(c) = ch(k) {
        let start = k;
        let push = |out: &mut Vec<Token>, text: String, kind, end: usize| {
            out.push(Token {
                text,
                kind,
                span: byte_at(start)..byte_at(end),
            })
        };
        if c.is_whitespace() {
            k += 1;
        } else if c.is_ascii_digit() || (c == '.' && ch(k + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let (text, kind, end) = scan_number(&chars, k);
            push(&mut out, text, kind, end);
            k = end;
        } else if c.is_alphabetic() {
            let mut end = k + 1;
            while let Some(n) = ch(end) {
                let apostrophe =
                    matches!(n, '\'' | '’') && ch(end + 1).is_some_and(char::is_alphabetic);
                if !(n.is_alphabetic() || apostrophe) {
                    break;
                }
                end += 1;
            }
            let word: String = chars[k..end].iter().map(|(_, c)| *c).collect();
            let word = word.to_lowercase().replace('’', "'");
            push(&mut out, word, TokenKind::Word, end);
            k = end;
        } else if matches!(c, '-' | '–')
            && k > 0
            && ch(k - 1).is_some_and(char::is_alphabetic)
            && ch(k + 1).is_some_and(char::is_alphabetic)
        {
            // "twenty-one": the hyphen joins words, it is not a minus.
            k += 1;
        } else if let Some(frac) = vulgar_fraction(c) {
            push(&mut out, frac.into(), TokenKind::Ratio, k + 1);
            k += 1;
        } else if let Some(sym) = symbol(c) {
            if c == '*' && ch(k + 1) == Some('*') {
                push(&mut out, "**".into(), TokenKind::Symbol, k + 2);
                k += 2;
            } else {
                push(&mut out, sym.into(), TokenKind::Symbol, k + 1);
                k += 1;
            }
        } else {
            let kind = if PUNCT.contains(&c) {
                TokenKind::Punct
            } else {
                TokenKind::Other
            };
            push(&mut out, c.to_string(), kind, k + 1);
            k += 1;
        }
    }
    out
}

/// "½" as "1/2": some speech-to-text output writes these.
fn vulgar_fraction(c: char) -> Option<&'static str> {
    Some(match c {
        '½' => "1/2",
        '⅓' => "1/3",
        '⅔' => "2/3",
        '¼' => "1/4",
        '¾' => "3/4",
        _ => return None,
    })
}

fn symbol(c: char) -> Option<&'static str> {
    Some(match c {
        '+' => "+",
        '-' | '−' | '–' => "-",
        '*' | '×' => "*",
        '/' | '÷' => "/",
        '^' => "^",
        '%' => "%",
        '(' => "(",
        ')' => ")",
        '=' => "=",
        ':' => ":",
        _ => return None,
    })
}

/// A number written in digits from `chars[k]` (a digit, or a '.' before
/// one): its normalised text, kind and end index.
fn scan_number(chars: &[(usize, char)], k: usize) -> (String, TokenKind, usize) {
    let ch = |i: usize| chars.get(i).map(|(_, c)| *c);
    let run = |from: usize| {
        let mut n = 0;
        while ch(from + n).is_some_and(|c| c.is_ascii_digit()) {
            n += 1;
        }
        n
    };
    let take = |from: usize, n: usize| -> String {
        chars[from..from + n].iter().map(|(_, c)| *c).collect()
    };
    if ch(k) == Some('.') {
        let n = run(k + 1);
        return (
            format!("0.{}", take(k + 1, n)),
            TokenKind::Decimal,
            k + 1 + n,
        );
    }
    let lead = run(k);
    let mut text = take(k, lead);
    let mut j = k + lead;
    let mut grouped = false;
    // "1,000,000": groups of exactly three after a lead of one to three.
    if lead <= 3 {
        while ch(j) == Some(',') && run(j + 1) == 3 {
            text.push_str(&take(j + 1, 3));
            j += 4;
            grouped = true;
        }
    }
    if ch(j) == Some('.') && run(j + 1) > 0 {
        let n = run(j + 1);
        text.push('.');
        text.push_str(&take(j + 1, n));
        return (text, TokenKind::Decimal, j + 1 + n);
    }
    let after_slash = k > 0 && ch(k - 1) == Some('/');
    if !grouped && !after_slash && ch(j) == Some('/') {
        let n = run(j + 1);
        let den = if n > 0 { take(j + 1, n) } else { String::new() };
        let nonzero = den.chars().any(|c| c != '0');
        // "3/4" but not a date such as "3/4/2024".
        if nonzero && ch(j + 1 + n) != Some('/') {
            return (format!("{text}/{den}"), TokenKind::Ratio, j + 1 + n);
        }
    }
    let suffix: String = chars
        .get(j..j + 2)
        .map(|s| s.iter().map(|(_, c)| c.to_ascii_lowercase()).collect())
        .unwrap_or_default();
    if suffix.len() == 2
        && !ch(j + 2).is_some_and(char::is_alphanumeric)
        && suffix == ordinal_suffix(&text)
    {
        return (text, TokenKind::Ordinal, j + 2);
    }
    (text, TokenKind::Integer, j)
}

/// The suffix English writes after these digits: 1st, 12th, 22nd, 103rd.
fn ordinal_suffix(digits: &str) -> &'static str {
    let b = digits.as_bytes();
    let last = b.last().copied().unwrap_or(b'0');
    let tens = if b.len() >= 2 { b[b.len() - 2] } else { b'0' };
    match (tens, last) {
        (b'1', _) => "th",
        (_, b'1') => "st",
        (_, b'2') => "nd",
        (_, b'3') => "rd",
        _ => "th",
    }
}

/// The byte range in the original text of the tokens `span` covers.
pub fn byte_span(tokens: &[Token], span: &Range<usize>) -> Range<usize> {
    match (
        tokens.get(span.start),
        span.end.checked_sub(1).and_then(|e| tokens.get(e)),
    ) {
        (Some(a), Some(b)) if span.end > span.start => a.span.start..b.span.end,
        _ => 0..0,
    }
}

// ------------------------------------------------------------------ values

/// A spoken number's value. Exact where it can be, so "two and three
/// quarters" stays 11/4 and "1.5 thousand" is exactly 1500.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// A whole number.
    Int(u64),
    /// A fraction in lowest terms, `den > 1`: "3.5" is 7/2.
    Ratio { num: u64, den: u64 },
    /// Finite, but too long for exact `u64` arithmetic (25 digits, or 30
    /// decimals).
    Float(f64),
}

impl Number {
    /// The value as a float.
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(v) => v as f64,
            Number::Ratio { num, den } => num as f64 / den as f64,
            Number::Float(f) => f,
        }
    }

    /// The value when it is an exact whole number.
    pub fn as_u64(self) -> Option<u64> {
        match self {
            Number::Int(v) => Some(v),
            _ => None,
        }
    }

    /// Whether the value is whole (exactly, or as a float).
    pub fn is_whole(self) -> bool {
        match self {
            Number::Int(_) => true,
            Number::Ratio { .. } => false,
            Number::Float(f) => f.fract() == 0.0,
        }
    }

    fn parts(self) -> Option<(u128, u128)> {
        match self {
            Number::Int(v) => Some((v.into(), 1)),
            Number::Ratio { num, den } => Some((num.into(), den.into())),
            Number::Float(_) => None,
        }
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// `num / den` reduced; `den` must be nonzero.
fn ratio(num: u128, den: u128) -> Number {
    let g = gcd(num, den).max(1);
    let (n, d) = (num / g, den / g);
    match (u64::try_from(n), u64::try_from(d)) {
        (Ok(n), Ok(1)) => Number::Int(n),
        (Ok(num), Ok(den)) => Number::Ratio { num, den },
        _ => Number::Float(n as f64 / d as f64),
    }
}

fn mul(a: Number, b: Number) -> Number {
    match (a.parts(), b.parts()) {
        // Each side fits a u64, so the products fit a u128.
        (Some((an, ad)), Some((bn, bd))) => ratio(an * bn, ad * bd),
        _ => Number::Float(a.as_f64() * b.as_f64()),
    }
}

fn add(a: Number, b: Number) -> Number {
    if let (Some((an, ad)), Some((bn, bd))) = (a.parts(), b.parts()) {
        if let Some(n) = (an * bd).checked_add(bn * ad) {
            return ratio(n, ad * bd);
        }
    }
    Number::Float(a.as_f64() + b.as_f64())
}

/// Digits with an optional fraction part ("3", "3.14"), exactly when the
/// digits allow. `None` when the value does not fit an `f64`.
fn decimal_value(int: &str, frac: &str) -> Option<Number> {
    let all = format!("{int}{frac}");
    if frac.len() <= 19 {
        if let Ok(n) = all.parse::<u128>() {
            return Some(ratio(n, 10u128.pow(frac.len() as u32)));
        }
    }
    let int = if int.is_empty() { "0" } else { int };
    let text = if frac.is_empty() {
        int.to_string()
    } else {
        format!("{int}.{frac}")
    };
    let f: f64 = text.parse().ok()?;
    f.is_finite().then_some(Number::Float(f))
}

// ------------------------------------------------------------------ spoken

/// How a number was said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberKind {
    /// A whole number in words or words and digits: "twenty one", "four
    /// hundred and ten", "a dozen", "2 million", "one and a half million".
    Cardinal,
    /// "first", "twenty-third", "hundredth", "21st".
    Ordinal,
    /// "half", "a third", "two and three quarters", "3/4", "1 1/2".
    Fraction,
    /// With "point": "three point one four", "point five".
    Decimal,
    /// One token of digits as written: "42", "1,000", "3.5".
    Digits,
}

/// A number found at a position in the tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct Spoken {
    /// The unsigned value (see `negative`).
    pub value: Number,
    pub kind: NumberKind,
    /// Preceded by "minus", "negative" or "-". The value stays unsigned:
    /// whether a minus was a sign or an operator ("ten minus five") is the
    /// caller's decision, so callers only ask for a number where one may
    /// start.
    pub negative: bool,
    /// The tokens used, sign included: indices into the slice given to
    /// [`parse_at`] (see [`byte_span`] for the text).
    pub span: Range<usize>,
}

impl Spoken {
    /// The value with its sign.
    pub fn signed_f64(&self) -> f64 {
        let v = self.value.as_f64();
        if self.negative {
            -v
        } else {
            v
        }
    }
}

/// Why a number could not be read although one is there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumberError {
    /// Digits beyond what an `f64` holds: the caller says so rather than
    /// answering with infinity or a wrapped value.
    #[error("the number is too large")]
    TooLarge {
        /// The tokens of the number.
        span: Range<usize>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// 1–9
    Unit,
    /// 10–19
    Teen,
    /// 20, 30 … 90
    Tens,
    Hundred,
    /// thousand, million, billion, trillion
    Scale,
}

fn cardinal_word(w: &str) -> Option<(Class, u64)> {
    use Class::*;
    Some(match w {
        "one" => (Unit, 1),
        "two" => (Unit, 2),
        "three" => (Unit, 3),
        "four" => (Unit, 4),
        "five" => (Unit, 5),
        "six" => (Unit, 6),
        "seven" => (Unit, 7),
        "eight" => (Unit, 8),
        "nine" => (Unit, 9),
        "ten" => (Teen, 10),
        "eleven" => (Teen, 11),
        "twelve" => (Teen, 12),
        "thirteen" => (Teen, 13),
        "fourteen" => (Teen, 14),
        "fifteen" => (Teen, 15),
        "sixteen" => (Teen, 16),
        "seventeen" => (Teen, 17),
        "eighteen" => (Teen, 18),
        "nineteen" => (Teen, 19),
        "twenty" => (Tens, 20),
        "thirty" => (Tens, 30),
        "forty" => (Tens, 40),
        "fifty" => (Tens, 50),
        "sixty" => (Tens, 60),
        "seventy" => (Tens, 70),
        "eighty" => (Tens, 80),
        "ninety" => (Tens, 90),
        "hundred" => (Hundred, 100),
        "thousand" => (Scale, 1_000),
        "million" => (Scale, 1_000_000),
        "billion" => (Scale, 1_000_000_000),
        "trillion" => (Scale, 1_000_000_000_000),
        _ => return None,
    })
}

fn ordinal_word(w: &str) -> Option<(Class, u64)> {
    use Class::*;
    Some(match w {
        "first" => (Unit, 1),
        "second" => (Unit, 2),
        "third" => (Unit, 3),
        "fourth" => (Unit, 4),
        "fifth" => (Unit, 5),
        "sixth" => (Unit, 6),
        "seventh" => (Unit, 7),
        "eighth" => (Unit, 8),
        "ninth" => (Unit, 9),
        "tenth" => (Teen, 10),
        "eleventh" => (Teen, 11),
        "twelfth" => (Teen, 12),
        "thirteenth" => (Teen, 13),
        "fourteenth" => (Teen, 14),
        "fifteenth" => (Teen, 15),
        "sixteenth" => (Teen, 16),
        "seventeenth" => (Teen, 17),
        "eighteenth" => (Teen, 18),
        "nineteenth" => (Teen, 19),
        "twentieth" => (Tens, 20),
        "thirtieth" => (Tens, 30),
        "fortieth" => (Tens, 40),
        "fiftieth" => (Tens, 50),
        "sixtieth" => (Tens, 60),
        "seventieth" => (Tens, 70),
        "eightieth" => (Tens, 80),
        "ninetieth" => (Tens, 90),
        "hundredth" => (Hundred, 100),
        "thousandth" => (Scale, 1_000),
        "millionth" => (Scale, 1_000_000),
        "billionth" => (Scale, 1_000_000_000),
        "trillionth" => (Scale, 1_000_000_000_000),
        _ => return None,
    })
}

/// A fraction's denominator word and whether it is plural: "half", "thirds",
/// "quarter", "fifths", "hundredth". "first" and "second" are not ("one
/// second" is a duration).
fn denominator(w: &str) -> Option<(u64, bool)> {
    match w {
        "half" => return Some((2, false)),
        "halves" => return Some((2, true)),
        "quarter" => return Some((4, false)),
        "quarters" => return Some((4, true)),
        "first" | "second" => return None,
        _ => {}
    }
    if let Some((_, v)) = ordinal_word(w) {
        return Some((v, false));
    }
    let singular = w.strip_suffix('s')?;
    if matches!(singular, "first" | "second") {
        return None;
    }
    ordinal_word(singular).map(|(_, v)| (v, true))
}

fn word(t: &[Token], i: usize) -> Option<&str> {
    t.get(i)
        .filter(|t| t.kind == TokenKind::Word)
        .map(|t| t.text.as_str())
}

fn is_sign(t: &Token) -> bool {
    t.is_word("minus") || t.is_word("negative") || (t.kind == TokenKind::Symbol && t.text == "-")
}

/// A whole number in words.
struct Whole {
    value: u64,
    end: usize,
    ordinal: bool,
    /// No "hundred", scale or "and": may take "and a half" or "dozen".
    simple: bool,
    /// Exactly the word "one": may take a singular denominator.
    single_one: bool,
}

/// A whole number in words from `i`: units, teens, tens, "hundred" with or
/// without "and", decreasing scales; the last word may be an ordinal.
fn whole(t: &[Token], i: usize) -> Option<Whole> {
    let mut total = 0u64;
    let mut group = 0u64;
    let mut last: Option<Class> = None;
    let mut min_scale = u64::MAX;
    let mut simple = true;
    let mut j = i;
    match word(t, i)? {
        "a" => match word(t, i + 1).and_then(cardinal_word) {
            Some((Class::Hundred | Class::Scale, _)) => {
                group = 1;
                last = Some(Class::Unit);
                j += 1;
            }
            _ => return None,
        },
        // "the hundredth time"
        w if matches!(ordinal_word(w), Some((Class::Hundred | Class::Scale, _))) => {
            return ordinal_word(w).map(|(_, v)| Whole {
                value: v,
                end: i + 1,
                ordinal: true,
                simple: false,
                single_one: false,
            })
        }
        "zero" | "nought" | "naught" => {
            return Some(Whole {
                value: 0,
                end: i + 1,
                ordinal: false,
                simple: true,
                single_one: false,
            })
        }
        _ => {}
    }
    while let Some(w) = word(t, j) {
        if w == "and" {
            // "four hundred and ten", "a thousand and first"
            let next = word(t, j + 1).and_then(|n| cardinal_word(n).or_else(|| ordinal_word(n)));
            if matches!(last, Some(Class::Hundred | Class::Scale))
                && matches!(next, Some((Class::Unit | Class::Teen | Class::Tens, _)))
            {
                simple = false;
                j += 1;
                continue;
            }
            break;
        }
        let (class, v, ordinal) = match cardinal_word(w) {
            Some((c, v)) => (c, v, false),
            None => match ordinal_word(w) {
                Some((c, v)) => (c, v, true),
                None => break,
            },
        };
        let fits = match class {
            Class::Unit => matches!(
                last,
                None | Some(Class::Tens | Class::Hundred | Class::Scale)
            ),
            Class::Teen | Class::Tens => {
                matches!(last, None | Some(Class::Hundred | Class::Scale))
            }
            // "five hundred", "one thousand two hundred"; "twenty five
            // hundred" only as the first group.
            Class::Hundred => {
                last.is_some()
                    && last != Some(Class::Hundred)
                    && ((1..10).contains(&group)
                        || ((10..100).contains(&group) && min_scale == u64::MAX))
            }
            Class::Scale => {
                last.is_some() && last != Some(Class::Scale) && group > 0 && v < min_scale
            }
        };
        // "one hundredth" is a fraction (1/100); the caller reads it.
        let fraction_instead =
            ordinal && matches!(class, Class::Hundred | Class::Scale) && group == 1 && total == 0;
        if !fits || fraction_instead {
            break;
        }
        match class {
            Class::Unit | Class::Teen | Class::Tens => group += v,
            Class::Hundred => group *= 100,
            Class::Scale => {
                total = total.checked_add(group.checked_mul(v)?)?;
                group = 0;
                min_scale = v;
            }
        }
        if matches!(class, Class::Hundred | Class::Scale) {
            simple = false;
        }
        last = Some(class);
        j += 1;
        if ordinal {
            break;
        }
    }
    if last.is_none() || (j == i + 1 && word(t, i) == Some("a")) {
        return None;
    }
    let ordinal = j > i && word(t, j - 1).and_then(ordinal_word).is_some();
    Some(Whole {
        value: total.checked_add(group)?,
        end: j,
        ordinal,
        simple,
        single_one: j == i + 1 && word(t, i) == Some("one"),
    })
}

/// Digits said one by one after "point": "one four" → 14/100.
fn point_digits(t: &[Token], i: usize) -> Option<(Number, usize)> {
    let mut digits = String::new();
    let mut j = i;
    while let Some(w) = word(t, j) {
        let d = match w {
            "zero" | "oh" | "nought" | "naught" => 0,
            _ => match cardinal_word(w) {
                Some((Class::Unit, v)) => v,
                _ => break,
            },
        };
        digits.push(char::from(b'0' + d as u8));
        j += 1;
    }
    if digits.is_empty() {
        return None;
    }
    decimal_value("", &digits).map(|v| (v, j))
}

/// A proper fraction after "and": "a half", "one quarter", "three
/// quarters", "3/4".
fn proper_fraction(t: &[Token], i: usize) -> Option<(Number, usize)> {
    if let Some(tok) = t.get(i).filter(|t| t.kind == TokenKind::Ratio) {
        let v = ratio_token(tok)?;
        return (v.as_f64() < 1.0).then_some((v, i + 1));
    }
    if matches!(word(t, i), Some("a" | "an" | "one")) {
        if let Some((den, false)) = word(t, i + 1).and_then(denominator) {
            return Some((ratio(1, den.into()), i + 2));
        }
    }
    let w = whole(t, i).filter(|w| w.simple && !w.ordinal)?;
    match word(t, w.end).and_then(denominator) {
        Some((den, true)) if w.value < den => Some((ratio(w.value.into(), den.into()), w.end + 1)),
        _ => None,
    }
}

fn ratio_token(tok: &Token) -> Option<Number> {
    let (n, d) = tok.text.split_once('/')?;
    match (n.parse::<u64>(), d.parse::<u64>()) {
        (Ok(n), Ok(d)) if d > 0 => Some(ratio(n.into(), d.into())),
        _ => {
            let (n, d): (f64, f64) = (n.parse().ok()?, d.parse().ok()?);
            Some(Number::Float(n / d))
        }
    }
}

/// A multiplier after a fraction or decimal: "million", "dozen".
fn scale_after(t: &[Token], i: usize) -> Option<(u64, usize)> {
    match word(t, i)? {
        "dozen" => Some((12, i + 1)),
        w => match cardinal_word(w) {
            Some((Class::Scale, v)) => Some((v, i + 1)),
            _ => None,
        },
    }
}

type Parsed = (Number, NumberKind, usize);

/// `value` times a following scale ("one and a half million"), or as is.
fn scaled(t: &[Token], value: Number, kind: NumberKind, end: usize) -> Parsed {
    match scale_after(t, end) {
        Some((m, e)) => {
            let v = mul(value, Number::Int(m));
            let kind = if v.is_whole() {
                NumberKind::Cardinal
            } else {
                kind
            };
            (v, kind, e)
        }
        None => (value, kind, end),
    }
}

/// The number at `i`, sign excluded.
fn unsigned(t: &[Token], i: usize) -> Result<Option<Parsed>, NumberError> {
    let Some(tok) = t.get(i) else {
        return Ok(None);
    };
    let too_large = || NumberError::TooLarge { span: i..i + 1 };
    Ok(match tok.kind {
        TokenKind::Ratio => {
            let v = ratio_token(tok).ok_or_else(too_large)?;
            Some((v, NumberKind::Fraction, i + 1))
        }
        TokenKind::Ordinal => {
            let v = tok.text.parse::<u64>().map_err(|_| too_large())?;
            Some((Number::Int(v), NumberKind::Ordinal, i + 1))
        }
        TokenKind::Integer | TokenKind::Decimal => {
            let (int, frac) = tok.text.split_once('.').unwrap_or((&tok.text, ""));
            let v = decimal_value(int, frac).ok_or_else(too_large)?;
            Some(after_digits(t, v, tok.kind == TokenKind::Integer, i + 1))
        }
        TokenKind::Word => words(t, i),
        _ => None,
    })
}

/// What may follow a number in digits: "1 1/2", "2 and a half", "3
/// quarters", "2 dozen", "2 million", "1.5 thousand", "2 hundred thousand".
fn after_digits(t: &[Token], v: Number, integer: bool, e: usize) -> Parsed {
    if integer {
        if let Some(f) = t
            .get(e)
            .filter(|t| t.kind == TokenKind::Ratio)
            .and_then(ratio_token)
            .filter(|f| f.as_f64() < 1.0)
        {
            return (add(v, f), NumberKind::Fraction, e + 1);
        }
        if word(t, e) == Some("and") {
            if let Some((f, e2)) = proper_fraction(t, e + 1) {
                return scaled(t, add(v, f), NumberKind::Fraction, e2);
            }
        }
        if let Some((den, true)) = word(t, e).and_then(denominator) {
            return (mul(v, ratio(1, den.into())), NumberKind::Fraction, e + 1);
        }
        if word(t, e) == Some("dozen") {
            return (mul(v, Number::Int(12)), NumberKind::Cardinal, e + 1);
        }
    }
    let mut m = 1u64;
    let mut j = e;
    if word(t, j) == Some("hundred") {
        m = 100;
        j += 1;
    }
    if let Some((Class::Scale, s)) = word(t, j).and_then(cardinal_word) {
        m *= s;
        j += 1;
    }
    if j == e {
        return (v, NumberKind::Digits, e);
    }
    let v = mul(v, Number::Int(m));
    let kind = if v.is_whole() {
        NumberKind::Cardinal
    } else {
        NumberKind::Decimal
    };
    (v, kind, j)
}

/// A number in words from `i`.
fn words(t: &[Token], i: usize) -> Option<Parsed> {
    let first = word(t, i)?;
    match first {
        "a" | "an" => match word(t, i + 1) {
            Some("couple") if first == "a" => {
                let end = if word(t, i + 2) == Some("of") {
                    i + 3
                } else {
                    i + 2
                };
                // "a couple (of) hundred"
                let (v, _, end) = after_digits(t, Number::Int(2), false, end);
                return Some((v, NumberKind::Cardinal, end));
            }
            Some("dozen") if first == "a" => {
                return Some((Number::Int(12), NumberKind::Cardinal, i + 2))
            }
            Some(w) => {
                if let Some((den, false)) = denominator(w) {
                    return Some(scaled(t, ratio(1, den.into()), NumberKind::Fraction, i + 2));
                }
            }
            None => return None,
        },
        "half" => {
            // "half a million", "half a dozen"
            if word(t, i + 1) == Some("a") {
                if let Some((m, e)) = scale_after(t, i + 2)
                    .or_else(|| (word(t, i + 2) == Some("hundred")).then_some((100, i + 3)))
                {
                    let v = mul(ratio(1, 2), Number::Int(m));
                    return Some((v, NumberKind::Cardinal, e));
                }
            }
            return Some((ratio(1, 2), NumberKind::Fraction, i + 1));
        }
        "quarter" => return Some(scaled(t, ratio(1, 4), NumberKind::Fraction, i + 1)),
        "point" => {
            let (v, e) = point_digits(t, i + 1)?;
            return Some(scaled(t, v, NumberKind::Decimal, e));
        }
        _ => {}
    }
    let w = whole(t, i)?;
    let value = Number::Int(w.value);
    if w.ordinal {
        return Some((value, NumberKind::Ordinal, w.end));
    }
    let e = w.end;
    if word(t, e) == Some("point") {
        if let Some((frac, e2)) = point_digits(t, e + 1) {
            return Some(scaled(t, add(value, frac), NumberKind::Decimal, e2));
        }
    }
    match word(t, e).and_then(denominator) {
        Some((den, true)) => {
            let v = mul(value, ratio(1, den.into()));
            return Some(scaled(t, v, NumberKind::Fraction, e + 1));
        }
        Some((den, false)) if w.single_one => {
            return Some(scaled(t, ratio(1, den.into()), NumberKind::Fraction, e + 1));
        }
        _ => {}
    }
    if w.simple && word(t, e) == Some("and") {
        if let Some((f, e2)) = proper_fraction(t, e + 1) {
            return Some(scaled(t, add(value, f), NumberKind::Fraction, e2));
        }
    }
    if w.simple && word(t, e) == Some("dozen") {
        return Some((mul(value, Number::Int(12)), NumberKind::Cardinal, e + 1));
    }
    Some((value, NumberKind::Cardinal, e))
}

/// The number that starts at `tokens[i]`, if one does.
///
/// A leading "minus", "negative" or "-" sets [`Spoken::negative`]; call
/// this only where a number may start (not after an operand, where a minus
/// is subtraction). `Ok(None)`: no number here. `Err(TooLarge)`: digits
/// beyond an `f64`.
pub fn parse_at(tokens: &[Token], i: usize) -> Result<Option<Spoken>, NumberError> {
    let Some(first) = tokens.get(i) else {
        return Ok(None);
    };
    let negative = is_sign(first);
    let start = if negative { i + 1 } else { i };
    let parsed = unsigned(tokens, start)
        .map_err(|NumberError::TooLarge { span }| NumberError::TooLarge { span: i..span.end })?;
    let Some((value, kind, end)) = parsed else {
        return Ok(None);
    };
    if !value.as_f64().is_finite() {
        return Err(NumberError::TooLarge { span: i..end });
    }
    Ok(Some(Spoken {
        value,
        kind,
        negative,
        span: i..end,
    }))
}

/// The text as one number, sign included ("minus three point five" →
/// -3.5), or `None` when it is not exactly one number (punctuation aside).
pub fn parse_number(text: &str) -> Option<f64> {
    let tokens: Vec<Token> = tokenize(text)
        .into_iter()
        .filter(|t| t.kind != TokenKind::Punct)
        .collect();
    let spoken = parse_at(&tokens, 0).ok()??;
    (spoken.span.end == tokens.len()).then(|| spoken.signed_f64())
}

/// A number found in a text, with where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub spoken: Spoken,
    /// Byte range in the text.
    pub bytes: Range<usize>,
}

/// Every number in the text, left to right. A minus right after a number
/// is read as subtraction, not a sign; numbers too large for an `f64` are
/// left out.
pub fn find_numbers(text: &str) -> Vec<Found> {
    let tokens = tokenize(text);
    let mut out: Vec<Found> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let after_number = out.last().is_some_and(|f| f.spoken.span.end == i);
        if after_number && is_sign(&tokens[i]) && !tokens[i].is_word("negative") {
            i += 1;
            continue;
        }
        match parse_at(&tokens, i) {
            Ok(Some(spoken)) => {
                i = spoken.span.end.max(i + 1);
                out.push(Found {
                    bytes: byte_span(&tokens, &spoken.span),
                    spoken,
                });
            }
            Ok(None) => i += 1,
            Err(NumberError::TooLarge { span }) => i = span.end.max(i + 1),
        }
    }
    out
}

/// Two groups said side by side, as in clock times and years: "six thirty"
/// (6, 30), "twelve oh five" (12, 5), "nineteen eighty four" (19, 84),
/// "nineteen hundred" (19, 0).
///
/// Not a cardinal, so [`parse_at`] never reads it: only a caller that knows
/// a time or a year is meant should.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    /// 1–99.
    pub high: u32,
    /// 0–99.
    pub low: u32,
    /// Token indices.
    pub span: Range<usize>,
}

/// 1–99 in words: "six", "nineteen", "eighty four".
fn two_digits(t: &[Token], i: usize) -> Option<(u32, usize)> {
    match word(t, i).and_then(cardinal_word)? {
        (Class::Unit | Class::Teen, v) => Some((v as u32, i + 1)),
        (Class::Tens, v) => match word(t, i + 1).and_then(cardinal_word) {
            Some((Class::Unit, u)) => Some(((v + u) as u32, i + 2)),
            _ => Some((v as u32, i + 1)),
        },
        _ => None,
    }
}

/// The [`Pair`] at `tokens[i]`, if one is there.
pub fn parse_pair(tokens: &[Token], i: usize) -> Option<Pair> {
    let (high, e) = two_digits(tokens, i)?;
    let (low, end) = match word(tokens, e)? {
        "oh" | "o" | "zero" => match word(tokens, e + 1).and_then(cardinal_word) {
            Some((Class::Unit, v)) => (v as u32, e + 2),
            _ => return None,
        },
        "hundred" => (0, e + 1),
        _ => two_digits(tokens, e).filter(|(v, _)| *v >= 10)?,
    };
    Some(Pair {
        high,
        low,
        span: i..end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one number the whole text is, as (value, kind).
    fn one(text: &str) -> Option<(f64, NumberKind)> {
        let tokens: Vec<Token> = tokenize(text)
            .into_iter()
            .filter(|t| t.kind != TokenKind::Punct)
            .collect();
        let s = parse_at(&tokens, 0).ok()??;
        (s.span.end == tokens.len()).then(|| (s.signed_f64(), s.kind))
    }

    fn value(text: &str) -> Option<Number> {
        parse_at(&tokenize(text), 0).ok()?.map(|s| s.value)
    }

    #[test]
    fn tokens_have_kinds_spans_and_normal_text() {
        let text = "What’s 1,000.5 + 3/4 of the 21st, twenty-one ×2 😀";
        let toks = tokenize(text);
        let got: Vec<(&str, TokenKind)> = toks.iter().map(|t| (t.text.as_str(), t.kind)).collect();
        use TokenKind::*;
        assert_eq!(
            got,
            vec![
                ("what's", Word),
                ("1000.5", Decimal),
                ("+", Symbol),
                ("3/4", Ratio),
                ("of", Word),
                ("the", Word),
                ("21", Ordinal),
                (",", Punct),
                ("twenty", Word),
                ("one", Word),
                ("*", Symbol),
                ("2", Integer),
                ("😀", Other),
            ]
        );
        for t in &toks {
            assert!(text.get(t.span.clone()).is_some(), "{t:?}");
        }
        assert_eq!(&text[toks[1].span.clone()], "1,000.5");
        assert_eq!(&text[toks[6].span.clone()], "21st");
    }

    #[test]
    fn tokenizer_edge_cases() {
        let kinds = |s: &str| -> Vec<(String, TokenKind)> {
            tokenize(s).into_iter().map(|t| (t.text, t.kind)).collect()
        };
        use TokenKind::*;
        // Not a group of three: two numbers.
        assert_eq!(
            kinds("3,4"),
            vec![
                ("3".into(), Integer),
                (",".into(), Punct),
                ("4".into(), Integer)
            ]
        );
        // A date is not a fraction; 1/0 is not one either.
        assert!(kinds("3/4/2024").iter().all(|(_, k)| *k != Ratio));
        assert_eq!(kinds("1/0")[0], ("1".into(), Integer));
        assert_eq!(kinds(".5"), vec![("0.5".into(), Decimal)]);
        assert_eq!(kinds("2**3")[1], ("**".into(), Symbol));
        assert_eq!(kinds("5 - 3")[1], ("-".into(), Symbol));
        assert_eq!(
            kinds("10am"),
            vec![("10".into(), Integer), ("am".into(), Word)]
        );
        // Wrong suffix: not an ordinal.
        assert_eq!(kinds("21th")[0], ("21".into(), Integer));
        assert_eq!(kinds("12th")[0], ("12".into(), Ordinal));
        assert_eq!(kinds("6:05")[2], ("05".into(), Integer));
        assert_eq!(kinds("2.")[1], (".".into(), Punct));
    }

    #[test]
    fn cardinals() {
        for (text, want) in [
            ("zero", 0.0),
            ("seven", 7.0),
            ("nineteen", 19.0),
            ("twenty-one", 21.0),
            ("twenty one", 21.0),
            ("ninety nine", 99.0),
            ("a hundred", 100.0),
            ("one hundred", 100.0),
            ("four hundred and ten", 410.0),
            ("four hundred ten", 410.0),
            ("a thousand and one", 1001.0),
            ("twenty five thousand three hundred and twelve", 25312.0),
            ("one hundred and five thousand", 105_000.0),
            ("fifteen hundred", 1500.0),
            ("two million three hundred thousand", 2_300_000.0),
            ("nine hundred ninety nine trillion", 999e12),
            ("a dozen", 12.0),
            ("two dozen", 24.0),
            ("half a dozen", 6.0),
            ("a couple", 2.0),
            ("a couple of", 2.0),
            ("a couple hundred", 200.0),
            ("a couple of thousand", 2000.0),
            ("half a million", 500_000.0),
            ("one and a half million", 1_500_000.0),
            ("2 million", 2e6),
            ("1.5 thousand", 1500.0),
            ("2 hundred thousand", 200_000.0),
            ("two point five billion", 2.5e9),
        ] {
            assert_eq!(one(text).map(|v| v.0), Some(want), "{text}");
        }
        assert_eq!(
            one("four hundred and ten"),
            Some((410.0, NumberKind::Cardinal))
        );
        assert_eq!(value("1.5 thousand"), Some(Number::Int(1500)));
    }

    #[test]
    fn digits() {
        assert_eq!(one("42"), Some((42.0, NumberKind::Digits)));
        assert_eq!(one("1,000,000"), Some((1e6, NumberKind::Digits)));
        assert_eq!(one("3.5"), Some((3.5, NumberKind::Digits)));
        assert_eq!(value("3.14"), Some(Number::Ratio { num: 157, den: 50 }));
        assert_eq!(value("0.1"), Some(Number::Ratio { num: 1, den: 10 }));
        // Beyond u64: a float, still finite.
        assert_eq!(
            value("123456789012345678901234"),
            Some(Number::Float(1.2345678901234568e23))
        );
    }

    #[test]
    fn decimals_with_point() {
        assert_eq!(
            one("two point seven five"),
            Some((2.75, NumberKind::Decimal))
        );
        assert_eq!(one("point five"), Some((0.5, NumberKind::Decimal)));
        assert_eq!(one("zero point oh five"), Some((0.05, NumberKind::Decimal)));
        assert_eq!(
            value("three point one four"),
            Some(Number::Ratio { num: 157, den: 50 })
        );
        // Thirty digits: a float, not a panic.
        let long = format!("one point {}", "three ".repeat(30));
        assert!((one(&long).unwrap().0 - 1.3333333).abs() < 1e-6);
        // "point twenty" is not how decimals are said.
        assert_eq!(one("three point twenty"), None);
    }

    #[test]
    fn ordinals() {
        for (text, want) in [
            ("first", 1.0),
            ("second", 2.0),
            ("third", 3.0),
            ("twelfth", 12.0),
            ("twenty-third", 23.0),
            ("twentieth", 20.0),
            ("hundredth", 100.0),
            ("one hundred and first", 101.0),
            ("two hundredth", 200.0),
            ("two thousand and twenty fourth", 2024.0),
            ("21st", 21.0),
            ("3rd", 3.0),
        ] {
            assert_eq!(one(text), Some((want, NumberKind::Ordinal)), "{text}");
        }
    }

    #[test]
    fn fractions() {
        let r = |num, den| Some(Number::Ratio { num, den });
        for (text, want) in [
            ("half", r(1, 2)),
            ("a half", r(1, 2)),
            ("one half", r(1, 2)),
            ("one and a half", r(3, 2)),
            ("two and a half", r(5, 2)),
            ("two and three quarters", r(11, 4)),
            ("a third", r(1, 3)),
            ("one third", r(1, 3)),
            ("two thirds", r(2, 3)),
            ("three quarters", r(3, 4)),
            ("a quarter", r(1, 4)),
            ("quarter", r(1, 4)),
            ("three fifths", r(3, 5)),
            ("an eighth", r(1, 8)),
            ("a hundredth", r(1, 100)),
            ("one hundredth", r(1, 100)),
            ("seven hundredths", r(7, 100)),
            ("3/4", r(3, 4)),
            ("6/4", r(3, 2)),
            ("1 1/2", r(3, 2)),
            ("2 and a half", r(5, 2)),
            ("3 quarters", r(3, 4)),
            ("1½", r(3, 2)),
            ("¾", r(3, 4)),
        ] {
            assert_eq!(value(text), want, "{text}");
            assert_eq!(one(text).map(|v| v.1), Some(NumberKind::Fraction), "{text}");
        }
        assert_eq!(value("two halves"), Some(Number::Int(1)));
        assert_eq!(value("a quarter million"), Some(Number::Int(250_000)));
    }

    #[test]
    fn signs_are_a_flag() {
        let toks = tokenize("minus five");
        let s = parse_at(&toks, 0).unwrap().unwrap();
        assert!(s.negative);
        assert_eq!((s.value, s.span.clone()), (Number::Int(5), 0..2));
        assert_eq!(parse_number("negative three point five"), Some(-3.5));
        assert_eq!(parse_number("-2"), Some(-2.0));
        assert_eq!(parse_number("minus"), None);
        // After a number, a minus is subtraction.
        let found: Vec<f64> = find_numbers("ten minus five, and negative two")
            .iter()
            .map(|f| f.spoken.signed_f64())
            .collect();
        assert_eq!(found, vec![10.0, 5.0, -2.0]);
    }

    #[test]
    fn the_grammar_stops_rather_than_guesses() {
        for text in [
            // Year-like and digit-by-digit speech: not one cardinal.
            "nineteen eighty four",
            "twenty twenty four",
            "one two three",
            "six thirty",
            "twenty thirty",
            "five six",
            // Not fractions as said.
            "two third",
            "one second",
            "a second",
            "one hundred and a half",
            "two million and a half",
            "one and three halves",
            // Not numbers.
            "a",
            "a few",
            "couple",
            "oh",
            "hundred",
            "and",
            "point",
            "thousand million",
            "one thousand twenty hundred",
        ] {
            assert_eq!(one(text), None, "{text}");
        }
        // Where they stop.
        let stop = |text: &str| parse_at(&tokenize(text), 0).unwrap().map(|s| s.span.end);
        assert_eq!(stop("nineteen eighty four"), Some(1));
        assert_eq!(stop("one second"), Some(1));
        assert_eq!(stop("twenty seconds"), Some(1));
        assert_eq!(stop("four hundred and ten minus eighty"), Some(4));
        assert_eq!(stop("the sum"), None);
    }

    #[test]
    fn pairs_for_years_and_clock_times() {
        let pair = |text: &str| {
            let p = parse_pair(&tokenize(text), 0)?;
            Some((p.high, p.low, p.span.end))
        };
        assert_eq!(pair("nineteen eighty four"), Some((19, 84, 3)));
        assert_eq!(pair("twenty twenty four"), Some((20, 24, 3)));
        assert_eq!(pair("six thirty pm"), Some((6, 30, 2)));
        assert_eq!(pair("twelve oh five"), Some((12, 5, 3)));
        assert_eq!(pair("nineteen hundred"), Some((19, 0, 2)));
        assert_eq!(pair("six"), None);
        assert_eq!(pair("one two"), None);
        assert_eq!(pair("six oh"), None);
    }

    #[test]
    fn building_blocks_for_durations_and_times() {
        // "an hour and a half": the duration parser reads "a half" itself.
        let toks = tokenize("an hour and a half");
        assert_eq!(parse_at(&toks, 0).unwrap(), None);
        assert_eq!(
            parse_at(&toks, 3).unwrap().map(|s| s.value),
            Some(Number::Ratio { num: 1, den: 2 })
        );
        // "half past six", "quarter to seven": the fraction, then the word.
        let toks = tokenize("half past six");
        assert_eq!(parse_at(&toks, 0).unwrap().map(|s| s.span), Some(0..1));
        let toks = tokenize("a quarter to seven");
        assert_eq!(parse_at(&toks, 0).unwrap().map(|s| s.span), Some(0..2));
        // "two and a half hours", "ninety minutes".
        let found = find_numbers("two and a half hours or ninety minutes");
        let got: Vec<(f64, &str)> = found
            .iter()
            .map(|f| {
                (
                    f.spoken.value.as_f64(),
                    &"two and a half hours or ninety minutes"[f.bytes.clone()],
                )
            })
            .collect();
        assert_eq!(got, vec![(2.5, "two and a half"), (90.0, "ninety")]);
    }

    #[test]
    fn too_large_is_an_error_not_a_panic() {
        let digits = "9".repeat(400);
        let toks = tokenize(&digits);
        assert_eq!(
            parse_at(&toks, 0),
            Err(NumberError::TooLarge { span: 0..1 })
        );
        let toks = tokenize(&format!("minus {digits} million"));
        assert_eq!(
            parse_at(&toks, 0),
            Err(NumberError::TooLarge { span: 0..2 })
        );
        assert_eq!(parse_number(&digits), None);
        assert!(find_numbers(&format!("{digits} and 5"))
            .iter()
            .all(|f| f.spoken.value == Number::Int(5)));
        // 1e300 in digits still fits an f64 and is kept.
        assert_eq!(parse_number(&format!("1{}", "0".repeat(300))), Some(1e300));
        let huge = format!("{} trillion", "9".repeat(290));
        assert!(parse_number(&huge).is_some_and(f64::is_finite));
        let too = format!("{} trillion", "9".repeat(300));
        assert!(parse_number(&too).is_none());
    }

    #[test]
    fn adversarial_input_is_bounded_and_quiet() {
        let started = std::time::Instant::now();
        let inputs = [
            String::new(),
            " ".repeat(100),
            "?!.,;:".repeat(50),
            "😀🙃👍🏽".into(),
            "the the the".into(),
            "cinq plus deux".into(),
            "fünfzig".into(),
            "五十加五".into(),
            "٣ + ٤".into(),
            "one ".repeat(2500),
            "twenty ".repeat(1500),
            "point ".repeat(2000),
            "a hundred and ".repeat(700),
            format!("one point {}", "one ".repeat(2400)),
            "9".repeat(10_000),
            "1,000".repeat(2000),
            "x".repeat(10_000),
            "-".repeat(10_000),
            "½ ⅓ ¼".into(),
        ];
        for text in &inputs {
            let _ = find_numbers(text);
            let _ = parse_number(text);
        }
        assert!(find_numbers("").is_empty());
        assert!(find_numbers("the the the").is_empty());
        assert!(find_numbers("😀🙃👍🏽 ?!").is_empty());
        assert!(find_numbers("cinq plus deux").is_empty());
        assert_eq!(parse_number("the the the"), None);
        assert_eq!(find_numbers(&"one ".repeat(2500)).len(), 2500);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn parse_number_needs_the_whole_text() {
        assert_eq!(parse_number("twenty one."), Some(21.0));
        assert_eq!(parse_number("twenty one apples"), None);
        assert_eq!(parse_number(""), None);
    }
}
