//! Spoken arithmetic → a calculator expression.
//!
//! "what's twelve times seven" → `12 * 7`; "15 percent of 80" →
//! `15 / 100 * 80`; "square root of 144" → `(144) ** 0.5`; "what is 2 to
//! the power of 10" → `2 ** 10`. The result goes to
//! [`crate::tools::calculator::evaluate`], which enforces R-TOOL's rules and
//! bounds (so `9 to the power of 9 to the power of 9` is refused fast).
//!
//! Strict on purpose: any word that is neither a number, an operator nor a
//! known filler word makes the whole utterance "not arithmetic" (`None`),
//! and the tree falls back to the router graph instead of guessing. An
//! expression needs at least one operator.

use std::sync::OnceLock;

use regex::Regex;

/// Words that carry no arithmetic meaning in a spoken question.
const FILLER: &[&str] = &[
    "what",
    "what's",
    "whats",
    "is",
    "are",
    "calculate",
    "compute",
    "please",
    "tell",
    "me",
    "how",
    "much",
    "equals",
    "equal",
    "does",
    "do",
    "the",
    "answer",
    "hey",
    "can",
    "you",
    "could",
    "work",
    "out",
    "figure",
    "it",
    "solve",
    "result",
    "value",
    "give",
    "i",
    "need",
    "know",
    "want",
    "evaluate",
    "quick",
    "maths",
    "math",
    "question",
    "of",
    "would",
    "be",
    "get",
    "if",
    "take",
    "whatever",
    "um",
    "uh",
    "okay",
    "ok",
    "so",
    "now",
    "for",
];

const UNITS: &[(&str, u64)] = &[
    ("zero", 0),
    ("oh", 0),
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("eleven", 11),
    ("twelve", 12),
    ("thirteen", 13),
    ("fourteen", 14),
    ("fifteen", 15),
    ("sixteen", 16),
    ("seventeen", 17),
    ("eighteen", 18),
    ("nineteen", 19),
    ("twenty", 20),
    ("thirty", 30),
    ("forty", 40),
    ("fifty", 50),
    ("sixty", 60),
    ("seventy", 70),
    ("eighty", 80),
    ("ninety", 90),
];

const SCALES: &[(&str, u64)] = &[
    ("thousand", 1_000),
    ("million", 1_000_000),
    ("billion", 1_000_000_000),
    ("trillion", 1_000_000_000_000),
];

/// Multi-word operators, longest first. `&` marks "and" handled by context.
const PHRASES: &[(&[&str], Piece)] = &[
    (&["raised", "to", "the", "power", "of"], Piece::Op("**")),
    (&["to", "the", "power", "of"], Piece::Op("**")),
    (&["raised", "to", "the", "power"], Piece::Op("**")),
    (&["to", "the", "power"], Piece::Op("**")),
    (&["raised", "to"], Piece::Op("**")),
    (&["square", "root", "of"], Piece::Root("0.5")),
    (&["square", "root"], Piece::Root("0.5")),
    (&["cube", "root", "of"], Piece::Root("(1 / 3)")),
    (&["cube", "root"], Piece::Root("(1 / 3)")),
    (&["percent", "of"], Piece::Op("/ 100 *")),
    (&["per", "cent", "of"], Piece::Op("/ 100 *")),
    (&["%", "of"], Piece::Op("/ 100 *")),
    (&["multiplied", "by"], Piece::Op("*")),
    (&["divided", "by"], Piece::Op("/")),
    (&["take", "away"], Piece::Op("-")),
    (&["the", "remainder", "of"], Piece::AndOp("%")),
    (&["remainder", "of"], Piece::AndOp("%")),
    (&["the", "sum", "of"], Piece::AndOp("+")),
    (&["sum", "of"], Piece::AndOp("+")),
    (&["the", "product", "of"], Piece::AndOp("*")),
    (&["product", "of"], Piece::AndOp("*")),
    (&["the", "difference", "between"], Piece::AndOp("-")),
    (&["difference", "between"], Piece::AndOp("-")),
    (&["half", "of"], Piece::Op("0.5 *")),
    (&["double"], Piece::Op("2 *")),
    (&["twice"], Piece::Op("2 *")),
    (&["add"], Piece::AndOp("+")),
    (&["multiply"], Piece::AndOp("*")),
    (&["divide"], Piece::AndOp("/")),
    (&["plus"], Piece::Op("+")),
    (&["+"], Piece::Op("+")),
    (&["minus"], Piece::Op("-")),
    (&["-"], Piece::Op("-")),
    (&["less"], Piece::Op("-")),
    (&["times"], Piece::Op("*")),
    (&["x"], Piece::Op("*")),
    (&["*"], Piece::Op("*")),
    (&["**"], Piece::Op("**")),
    (&["^"], Piece::Op("**")),
    (&["over"], Piece::Op("/")),
    (&["/"], Piece::Op("/")),
    (&["mod"], Piece::Op("%")),
    (&["modulo"], Piece::Op("%")),
    (&["squared"], Piece::Post("** 2")),
    (&["cubed"], Piece::Post("** 3")),
    (&["percent"], Piece::Post("/ 100")),
    (&["%"], Piece::Post("/ 100")),
    (&["negative"], Piece::Neg),
    (&["("], Piece::Open),
    (&[")"], Piece::Close),
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Piece {
    /// A binary operator (or a prefix that behaves like one, e.g. `2 *`).
    Op(&'static str),
    /// `square root of X` → `(X) ** e`.
    Root(&'static str),
    /// A postfix operator on the previous operand.
    Post(&'static str),
    /// Sets what a following "and" / "by" / "to" means ("the sum of A and B").
    AndOp(&'static str),
    Neg,
    Open,
    Close,
}

fn tokens(text: &str) -> Vec<String> {
    static TOKEN: OnceLock<Regex> = OnceLock::new();
    let re = TOKEN.get_or_init(|| {
        Regex::new(r"\d+(?:\.\d+)?|\.\d+|\*\*|[a-z']+|[-+*/^()%]").expect("static regex")
    });
    let text = text
        .to_lowercase()
        .replace('×', " * ")
        .replace('÷', " / ")
        .replace('−', "-");
    // "1,000" is one thousand; "3, 4" is two numbers.
    static COMMA: OnceLock<Regex> = OnceLock::new();
    let comma = COMMA.get_or_init(|| Regex::new(r"(\d),(\d{3})").expect("static regex"));
    let mut text = text;
    while comma.is_match(&text) {
        text = comma.replace_all(&text, "$1$2").into_owned();
    }
    re.find_iter(&text)
        .map(|m| m.as_str().to_string())
        .collect()
}

fn unit(word: &str) -> Option<u64> {
    UNITS.iter().find(|(w, _)| *w == word).map(|(_, v)| *v)
}

fn scale(word: &str) -> Option<u64> {
    SCALES.iter().find(|(w, _)| *w == word).map(|(_, v)| *v)
}

/// Parse a number starting at `toks[i]` (words, digits, "point", scales).
/// Returns the number's text and how many tokens it used.
fn number(toks: &[String], i: usize) -> Option<(String, usize)> {
    let first = toks.get(i)?;
    // Digits, optionally followed by a scale ("2 million").
    if first
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || c == '.')
    {
        let mut used = 1;
        let mut text = first.clone();
        while let Some(s) = toks.get(i + used).and_then(|w| scale(w)) {
            text = format!("{text} * {s}");
            used += 1;
        }
        if used > 1 {
            text = format!("({text})");
        }
        return Some((text, used));
    }
    let starts = unit(first).is_some()
        || first == "hundred"
        || scale(first).is_some()
        || (first == "a"
            && toks
                .get(i + 1)
                .is_some_and(|n| n == "hundred" || scale(n).is_some()));
    if !starts {
        return None;
    }
    let (mut total, mut current, mut used) = (0u64, 0u64, 0usize);
    let mut last_was_scale = false;
    while let Some(word) = toks.get(i + used) {
        let word = word.as_str();
        if let Some(v) = unit(word) {
            current = current.checked_add(v)?;
            last_was_scale = false;
        } else if word == "hundred" {
            current = current.max(1).checked_mul(100)?;
            last_was_scale = true;
        } else if let Some(s) = scale(word) {
            total = total.checked_add(current.max(1).checked_mul(s)?)?;
            current = 0;
            last_was_scale = true;
        } else if word == "a" && used == 0 {
            // "a hundred", "a thousand"
        } else if word == "and"
            && last_was_scale
            && toks.get(i + used + 1).is_some_and(|n| unit(n).is_some())
        {
            // "one hundred and five"
        } else {
            break;
        }
        used += 1;
    }
    let mut text = (total + current).to_string();
    // "three point one four"
    if toks.get(i + used).is_some_and(|w| w == "point") {
        let mut digits = String::new();
        let mut j = i + used + 1;
        while let Some(d) = toks.get(j).and_then(|w| unit(w)).filter(|d| *d < 10) {
            digits.push_str(&d.to_string());
            j += 1;
        }
        if !digits.is_empty() {
            text = format!("{text}.{digits}");
            used = j - i;
        }
    }
    Some((text, used))
}

/// The calculator expression an utterance asks for, or `None` when it is
/// not (only) arithmetic.
pub fn to_expression(text: &str) -> Option<String> {
    let toks = tokens(text);
    let mut out: Vec<String> = Vec::new();
    let mut operators = 0usize;
    let mut operands = 0usize;
    // Whether the next piece must be an operand (start, after an operator).
    let mut expect_operand = true;
    let mut and_op: Option<&'static str> = None;
    let mut pending_root: Vec<&'static str> = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    'outer: while i < toks.len() {
        // An operand?
        if expect_operand {
            let negative = toks[i] == "minus" || toks[i] == "-" || toks[i] == "negative";
            let at = if negative { i + 1 } else { i };
            if let Some((num, used)) = number(&toks, at) {
                let mut piece = if negative { format!("(-{num})") } else { num };
                while let Some(exp) = pending_root.pop() {
                    piece = format!("({piece}) ** {exp}");
                    operators += 1;
                }
                out.push(piece);
                operands += 1;
                expect_operand = false;
                i = at + used;
                continue;
            }
        }
        // "and", "by", "to" after "the sum of A", "multiply A", "add A".
        if !expect_operand && matches!(toks[i].as_str(), "and" | "by" | "to" | "from") {
            if let Some(op) = and_op.take() {
                out.push(op.into());
                operators += 1;
                expect_operand = true;
                i += 1;
                continue;
            }
        }
        for (words, piece) in PHRASES {
            let n = words.len();
            if i + n <= toks.len() && toks[i..i + n].iter().zip(words.iter()).all(|(a, b)| a == b) {
                match *piece {
                    Piece::Op(op) => {
                        let prefix = op.ends_with('*')
                            && op.chars().next().is_some_and(|c| c.is_ascii_digit());
                        if prefix != expect_operand {
                            return None;
                        }
                        out.push(op.into());
                        operators += 1;
                        expect_operand = true;
                    }
                    Piece::Post(op) => {
                        if expect_operand {
                            return None;
                        }
                        out.push(op.into());
                        operators += 1;
                    }
                    Piece::Root(exp) => {
                        if !expect_operand {
                            return None;
                        }
                        pending_root.push(exp);
                    }
                    Piece::AndOp(op) => {
                        if !expect_operand {
                            return None;
                        }
                        and_op = Some(op);
                    }
                    Piece::Neg => return None, // "negative" not before a number
                    Piece::Open => {
                        if !expect_operand || !pending_root.is_empty() {
                            return None;
                        }
                        depth += 1;
                        out.push("(".into());
                    }
                    Piece::Close => {
                        if expect_operand || depth == 0 {
                            return None;
                        }
                        depth -= 1;
                        out.push(")".into());
                    }
                }
                i += n;
                continue 'outer;
            }
        }
        if FILLER.contains(&toks[i].as_str()) || toks[i] == "to" || toks[i] == "by" {
            i += 1;
            continue;
        }
        return None;
    }
    if operators == 0 || operands == 0 || expect_operand || depth != 0 || !pending_root.is_empty() {
        return None;
    }
    Some(out.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::calculator::{evaluate, format_result};

    fn calc(text: &str) -> Option<String> {
        let expr = to_expression(text)?;
        evaluate(&expr).ok().map(format_result)
    }

    #[test]
    fn spoken_questions_become_expressions() {
        assert_eq!(
            to_expression("what's twelve times seven").as_deref(),
            Some("12 * 7")
        );
        assert_eq!(
            to_expression("15 percent of 80").as_deref(),
            Some("15 / 100 * 80")
        );
        assert_eq!(
            to_expression("what is 2 to the power of 10").as_deref(),
            Some("2 ** 10")
        );
        assert_eq!(
            to_expression("square root of 144").as_deref(),
            Some("(144) ** 0.5")
        );
    }

    #[test]
    fn answers_through_the_calculator() {
        let cases = [
            ("what's twelve times seven", "84"),
            ("15 percent of 80", "12"),
            ("square root of 144", "12"),
            ("what is 2 to the power of 10", "1024"),
            ("what is one hundred and five minus five", "100"),
            ("three point five plus two", "5.5"),
            ("how much is 1,000 divided by 8", "125"),
            ("what's the sum of 3 and 4", "7"),
            ("multiply six by nine", "54"),
            ("negative two squared", "4"),
            ("7 mod 3", "1"),
            (
                "twenty five thousand three hundred and twelve plus one",
                "25313",
            ),
            ("what's (2 + 3) * 4", "20"),
            ("a hundred over four", "25"),
            ("cube root of 27", "3"),
            ("half of 90", "45"),
            ("what is 2 million times 3", "6000000"),
            ("12 × 3", "36"),
        ];
        for (text, want) in cases {
            assert_eq!(
                calc(text).as_deref(),
                Some(want),
                "{text} → {:?}",
                to_expression(text)
            );
        }
    }

    #[test]
    fn not_arithmetic_is_none() {
        for text in [
            "what's the weather",
            "what time is it",
            "explain photosynthesis",
            "what's five",
            "plus",
            "twelve times",
            "add milk to my list",
            "square root of",
            "",
            "what is 2 plus the moon",
        ] {
            assert_eq!(to_expression(text), None, "{text}");
        }
    }

    #[test]
    fn huge_powers_are_refused_fast() {
        let started = std::time::Instant::now();
        let expr = to_expression("9 to the power of 9 to the power of 9").unwrap();
        assert_eq!(expr, "9 ** 9 ** 9");
        assert!(evaluate(&expr).is_err());
        assert!(started.elapsed() < std::time::Duration::from_millis(100));
    }
}
