//! Spoken arithmetic → a calculator expression.
//!
//! "what's twelve times seven" → `12 * 7`; "a quarter of two hundred" →
//! `0.25 * 200`; "15 percent of 80" → `(15 / 100) * 80`; "square root of
//! 144" → `(144 ** 0.5)`; "two to the tenth" → `2 ** 10`. Numbers are read
//! by the one spoken-number parser, [`crate::nlu::numbers`]; the result goes
//! to [`crate::tools::calculator::evaluate`], which enforces R-TOOL's rules
//! and bounds (so `9 to the power of 9 to the power of 9` is refused fast).
//!
//! Strict on purpose: any word that is neither a number, an operator nor a
//! known filler word makes the whole utterance "not arithmetic" (`None`),
//! and the tree falls back to the router graph instead of guessing. The
//! same goes for phrasings whose meaning people disagree on:
//!
//! - "80 plus 10 percent": 80.1 or 88? A percentage right after `+`/`-`
//!   (or in "add … to …") is refused; "15 percent of 80" and "80 times 10
//!   percent" are not ambiguous and are answered.
//! - "seven into three" (21 in Indian English, 3/7 in British school
//!   arithmetic): "into" is not an operator here.
//! - "the sum of two hundred and ten": the "and" is the number's, so the
//!   sum has no second operand and is refused.
//! - "two to the power of three squared", "2 to the power of double 3":
//!   refused (which power binds first is not clear from speech).
//! - "nineteen eighty four plus one": two numbers side by side, refused.
//!
//! An expression needs at least one operator ("what's five" is not a sum).

use crate::nlu::numbers::{self, Number, NumberError, NumberKind, Spoken, Token, TokenKind};
use crate::tools::calculator;

/// Longest utterance read, in bytes. Nobody says this much arithmetic, and
/// the calculator refuses expressions over 1000 characters anyway.
const MAX_TEXT_BYTES: usize = 2000;

/// Words that carry no arithmetic meaning in a spoken question, including
/// speech-to-text fillers.
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
    "would",
    "be",
    "get",
    "if",
    "whatever",
    "um",
    "umm",
    "uh",
    "uhh",
    "er",
    "erm",
    "hmm",
    "like",
    "well",
    "okay",
    "ok",
    "so",
    "now",
    "for",
    "just",
    "exactly",
    "again",
    "then",
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Piece {
    /// A binary operator.
    Bin(&'static str),
    /// "to the" before an exponent, which may be an ordinal: "two to the
    /// tenth (power)".
    ToThe,
    /// A multiplier before the operand: "double", "twice".
    Times(&'static str),
    /// A function of the next operand: "square root of".
    Wrap(Wrap),
    /// An operator on the previous operand: "squared", "percent".
    Post(Post),
    /// "the sum of A and B" and its kin; only at the start.
    Joint(Joint),
    Open,
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Wrap {
    Sqrt,
    Cbrt,
    Square,
    Cube,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Post {
    /// `x ** n`
    Power(&'static str),
    /// `x * 2`, `x / 2`
    Scale(&'static str),
    Percent,
}

/// An operation said before its operands, joined by a connector word.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Joint {
    op: &'static str,
    connectors: &'static [&'static [&'static str]],
    order: Order,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Order {
    /// A op B
    AsSaid,
    /// "subtract A from B": B - A
    Reversed,
    /// "the difference between A and B": the larger minus the smaller.
    LargerFirst,
}

const AND: &[&[&str]] = &[&["and"]];

const fn joint(
    op: &'static str,
    connectors: &'static [&'static [&'static str]],
    order: Order,
) -> Piece {
    Piece::Joint(Joint {
        op,
        connectors,
        order,
    })
}

/// Operator phrases; the longest match wins.
const PHRASES: &[(&[&str], Piece)] = &[
    (&["to", "the", "power", "of"], Piece::Bin("**")),
    (&["to", "the", "power"], Piece::Bin("**")),
    (&["raised", "to", "the", "power", "of"], Piece::Bin("**")),
    (&["raised", "to", "the", "power"], Piece::Bin("**")),
    (&["raised", "to", "the"], Piece::ToThe),
    (&["raised", "to"], Piece::Bin("**")),
    (&["to", "the"], Piece::ToThe),
    (&["**"], Piece::Bin("**")),
    (&["^"], Piece::Bin("**")),
    (&["plus"], Piece::Bin("+")),
    (&["+"], Piece::Bin("+")),
    (&["added", "to"], Piece::Bin("+")),
    (&["minus"], Piece::Bin("-")),
    (&["-"], Piece::Bin("-")),
    (&["less"], Piece::Bin("-")),
    (&["take", "away"], Piece::Bin("-")),
    (&["times"], Piece::Bin("*")),
    (&["multiplied", "by"], Piece::Bin("*")),
    (&["x"], Piece::Bin("*")),
    (&["*"], Piece::Bin("*")),
    (&["divided", "by"], Piece::Bin("/")),
    (&["over"], Piece::Bin("/")),
    (&["/"], Piece::Bin("/")),
    (&["mod"], Piece::Bin("%")),
    (&["modulo"], Piece::Bin("%")),
    (&["modulus"], Piece::Bin("%")),
    (&["square", "root", "of"], Piece::Wrap(Wrap::Sqrt)),
    (&["square", "root"], Piece::Wrap(Wrap::Sqrt)),
    (&["cube", "root", "of"], Piece::Wrap(Wrap::Cbrt)),
    (&["cube", "root"], Piece::Wrap(Wrap::Cbrt)),
    (&["square", "of"], Piece::Wrap(Wrap::Square)),
    (&["cube", "of"], Piece::Wrap(Wrap::Cube)),
    (&["double"], Piece::Times("2")),
    (&["twice"], Piece::Times("2")),
    (&["triple"], Piece::Times("3")),
    (&["treble"], Piece::Times("3")),
    (&["quadruple"], Piece::Times("4")),
    (&["squared"], Piece::Post(Post::Power("** 2"))),
    (&["cubed"], Piece::Post(Post::Power("** 3"))),
    (&["doubled"], Piece::Post(Post::Scale("* 2"))),
    (&["tripled"], Piece::Post(Post::Scale("* 3"))),
    (&["halved"], Piece::Post(Post::Scale("/ 2"))),
    (&["percent"], Piece::Post(Post::Percent)),
    (&["per", "cent"], Piece::Post(Post::Percent)),
    (&["%"], Piece::Post(Post::Percent)),
    (&["("], Piece::Open),
    (&[")"], Piece::Close),
    (&["sum", "of"], joint("+", AND, Order::AsSaid)),
    (&["total", "of"], joint("+", AND, Order::AsSaid)),
    (&["product", "of"], joint("*", AND, Order::AsSaid)),
    (
        &["difference", "between"],
        joint("-", AND, Order::LargerFirst),
    ),
    (&["difference", "of"], joint("-", AND, Order::LargerFirst)),
    (
        &["remainder", "of"],
        joint("%", &[&["divided", "by"], &["by"], &["and"]], Order::AsSaid),
    ),
    (
        &["remainder", "when"],
        joint("%", &[&["divided", "by"], &["by"]], Order::AsSaid),
    ),
    (&["add"], joint("+", &[&["and"], &["to"]], Order::AsSaid)),
    (
        &["multiply"],
        joint("*", &[&["by"], &["and"]], Order::AsSaid),
    ),
    (&["divide"], joint("/", &[&["by"]], Order::AsSaid)),
    (&["subtract"], joint("-", &[&["from"]], Order::Reversed)),
    (&["take"], joint("-", &[&["from"]], Order::Reversed)),
];

/// Whether the tokens at `i` are the words (or symbols) of `phrase`.
fn starts_with(toks: &[Token], i: usize, phrase: &[&str]) -> bool {
    toks.get(i..i + phrase.len())
        .is_some_and(|s| s.iter().zip(phrase).all(|(t, w)| t.text == *w))
}

fn longest_phrase(toks: &[Token], i: usize) -> Option<(usize, Piece)> {
    PHRASES
        .iter()
        .filter(|(words, _)| starts_with(toks, i, words))
        .max_by_key(|(words, _)| words.len())
        .map(|(words, piece)| (words.len(), *piece))
}

/// A value as a calculator literal: digits, an exact decimal ("1.5",
/// "0.25") or a parenthesised division ("(1 / 3)").
fn literal(n: Number) -> String {
    match n {
        Number::Int(v) => v.to_string(),
        Number::Ratio { num, den } => {
            decimal_text(num, den).unwrap_or_else(|| format!("({num} / {den})"))
        }
        // Debug prints the shortest round-trip digits, with an exponent for
        // very large values ("1e23"), which the calculator reads.
        Number::Float(f) => format!("{f:?}"),
    }
}

/// `num / den` as an exact decimal when it terminates (den = 2^a 5^b).
fn decimal_text(num: u64, den: u64) -> Option<String> {
    let (mut d, mut twos, mut fives) = (den, 0u32, 0u32);
    while d > 1 && d % 2 == 0 {
        d /= 2;
        twos += 1;
    }
    while d > 1 && d % 5 == 0 {
        d /= 5;
        fives += 1;
    }
    if d != 1 || den < 2 {
        return None;
    }
    let k = twos.max(fives);
    let pow = 10u128.checked_pow(k)?;
    let scaled = u128::from(num).checked_mul(pow / u128::from(den))?;
    Some(format!(
        "{}.{:0width$}",
        scaled / pow,
        scaled % pow,
        width = k as usize
    ))
}

/// `(x)` unless `x` is one literal.
fn grouped(x: &str) -> String {
    if x.contains(' ') {
        format!("({x})")
    } else {
        x.to_string()
    }
}

/// The expression being built, one element per operand or operator.
#[derive(Default)]
struct Builder {
    out: Vec<String>,
    operators: usize,
    operands: usize,
    /// The last element is a complete operand (so an operator may follow).
    have_operand: bool,
    /// The most recent binary operator.
    last_op: Option<&'static str>,
    /// The last operand is a fraction, decimal or percentage: "of"
    /// multiplies ("a quarter of 200").
    fractional: bool,
    /// A percentage was used (refused in a spoken "+"/"-", see the module).
    percent: bool,
    /// Functions waiting for their operand, outermost first.
    wraps: Vec<Wrap>,
    /// Where each open parenthesis is in `out`.
    opens: Vec<usize>,
    /// "the sum of …": the operation and where its second operand starts.
    joint: Option<(Joint, Option<usize>)>,
    /// After "to the": the exponent may be an ordinal ("to the third").
    exponent: bool,
}

impl Builder {
    fn bin(&mut self, op: &'static str) {
        self.out.push(op.into());
        self.operators += 1;
        self.last_op = Some(op);
        self.have_operand = false;
        self.fractional = false;
    }

    /// A number as an operand; returns where reading continues.
    fn operand(&mut self, toks: &[Token], sp: &Spoken) -> Option<usize> {
        if sp.kind == NumberKind::Ordinal && !self.exponent {
            return None; // "first plus two"
        }
        let digits = toks
            .get(sp.span.end.checked_sub(1)?)
            .filter(|t| sp.kind == NumberKind::Digits && t.kind == TokenKind::Integer);
        // Whole digits go through as written, so integers beyond u64 stay
        // exact in the calculator (which has no leading zeros).
        let lit = match digits {
            Some(t) => match t.text.trim_start_matches('0') {
                "" => "0".to_string(),
                d => d.to_string(),
            },
            None => literal(sp.value),
        };
        let fractional =
            matches!(sp.kind, NumberKind::Fraction | NumberKind::Decimal) || !sp.value.is_whole();
        self.push_operand(lit, sp.negative, fractional);
        let mut end = sp.span.end;
        if self.exponent && toks.get(end).is_some_and(|t| t.is_word("power")) {
            end += 1;
        }
        self.exponent = false;
        Some(end)
    }

    fn push_operand(&mut self, lit: String, negative: bool, fractional: bool) {
        let mut elem = if negative {
            format!("(-{lit})")
        } else {
            lit.clone()
        };
        let wrapped = !self.wraps.is_empty();
        let mut innermost = true;
        while let Some(w) = self.wraps.pop() {
            elem = match w {
                // The real cube root of a negative number, which `**` with a
                // fractional exponent would call complex.
                Wrap::Cbrt if innermost && negative => format!("(-({lit} ** (1 / 3)))"),
                Wrap::Cbrt => format!("({elem} ** (1 / 3))"),
                Wrap::Sqrt => format!("({elem} ** 0.5)"),
                Wrap::Square => format!("({elem} ** 2)"),
                Wrap::Cube => format!("({elem} ** 3)"),
            };
            innermost = false;
        }
        self.out.push(elem);
        self.operands += 1;
        self.have_operand = true;
        self.fractional = fractional && !wrapped;
    }

    /// Applies a phrase; `next` is the token after it.
    fn piece(&mut self, piece: Piece, toks: &[Token], next: usize) -> Option<()> {
        match piece {
            Piece::Bin(op) => {
                if !self.have_operand {
                    return None;
                }
                self.bin(op);
            }
            Piece::ToThe => {
                if !self.have_operand {
                    return None;
                }
                self.bin("**");
                self.exponent = true;
            }
            Piece::Times(m) => {
                if self.have_operand || self.last_op == Some("**") {
                    return None;
                }
                self.out.push(m.into());
                self.out.push("*".into());
                self.operators += 1;
                self.last_op = Some("*");
            }
            Piece::Wrap(w) => {
                if self.have_operand {
                    return None;
                }
                self.wraps.push(w);
                self.operators += 1;
            }
            Piece::Post(post) => {
                if !self.have_operand || self.last_op == Some("**") {
                    return None;
                }
                let last = self.out.pop()?;
                match post {
                    Post::Power(p) | Post::Scale(p) => {
                        self.out.push(format!("({last} {p})"));
                        self.operators += 1;
                        self.fractional = false;
                    }
                    Post::Percent => {
                        // "80 plus 10 percent": 80.1 or 88? Refused unless
                        // "of" follows ("plus 10 percent of 80").
                        let of_follows = toks.get(next).is_some_and(|t| t.is_word("of"));
                        if matches!(self.last_op, Some("+" | "-")) && !of_follows {
                            return None;
                        }
                        self.out.push(format!("({last} / 100)"));
                        self.fractional = true;
                        self.percent = true;
                    }
                }
            }
            Piece::Joint(j) => {
                if self.have_operand || !self.out.is_empty() || self.joint.is_some() {
                    return None;
                }
                self.joint = Some((j, None));
            }
            Piece::Open => {
                if self.have_operand || !self.wraps.is_empty() {
                    return None;
                }
                self.opens.push(self.out.len());
                self.out.push("(".into());
            }
            Piece::Close => {
                let start = self.opens.pop()?;
                if !self.have_operand {
                    return None;
                }
                // One element for the group, so a postfix applies to all of it.
                let inner = self.out.split_off(start + 1);
                self.out.pop();
                self.out.push(format!("({})", inner.join(" ")));
                self.fractional = false;
            }
        }
        Some(())
    }

    /// Reads the token(s) at `i`; returns where reading continues, or
    /// `None` when the utterance is not arithmetic.
    fn step(&mut self, toks: &[Token], i: usize) -> Option<usize> {
        let tok = toks.get(i)?;
        if tok.kind == TokenKind::Other {
            return None;
        }
        if !self.have_operand {
            match numbers::parse_at(toks, i) {
                Ok(Some(sp)) => return self.operand(toks, &sp),
                Ok(None) => {}
                Err(NumberError::TooLarge { span }) => {
                    // One token of digits: the calculator says it is too large.
                    let signed = toks.get(span.start).is_some_and(|t| {
                        t.is_word("minus")
                            || t.is_word("negative")
                            || (t.kind == TokenKind::Symbol && t.text == "-")
                    });
                    let digits = toks.get(span.start + usize::from(signed))?;
                    if span.len() != 1 + usize::from(signed)
                        || !matches!(digits.kind, TokenKind::Integer | TokenKind::Decimal)
                    {
                        return None;
                    }
                    self.push_operand(digits.text.clone(), signed, false);
                    return Some(span.end);
                }
            }
        }
        // The connector of "the sum of A and B", "subtract A from B".
        if let Some((j, None)) = self.joint {
            if self.have_operand && self.opens.is_empty() {
                if let Some(c) = j.connectors.iter().find(|c| starts_with(toks, i, c)) {
                    self.joint = Some((j, Some(self.out.len())));
                    self.operators += 1;
                    self.have_operand = false;
                    self.last_op = None;
                    self.fractional = false;
                    return Some(i + c.len());
                }
            }
        }
        if tok.is_word("of") {
            if !self.have_operand {
                return Some(i + 1); // "what's the value of …"
            }
            if self.fractional && self.last_op != Some("**") {
                self.bin("*");
                return Some(i + 1);
            }
            return None; // "five of ten"
        }
        if let Some((n, piece)) = longest_phrase(toks, i) {
            self.piece(piece, toks, i + n)?;
            return Some(i + n);
        }
        if starts_with(toks, i, &["equal", "to"]) {
            return Some(i + 2);
        }
        let filler = (tok.kind == TokenKind::Word && FILLER.contains(&tok.text.as_str()))
            || (tok.kind == TokenKind::Symbol && tok.text == "=")
            // "and what's two plus two"
            || (tok.is_word("and") && self.out.is_empty() && self.joint.is_none());
        filler.then_some(i + 1)
    }

    fn finish(self) -> Option<String> {
        if !self.have_operand
            || !self.opens.is_empty()
            || !self.wraps.is_empty()
            || self.operands == 0
            || self.operators == 0
        {
            return None;
        }
        let Some((j, split)) = self.joint else {
            return Some(self.out.join(" "));
        };
        let split = split?;
        if matches!(j.op, "+" | "-") && self.percent {
            return None;
        }
        let a = grouped(&self.out.get(..split)?.join(" "));
        let b = grouped(&self.out.get(split..)?.join(" "));
        if a.is_empty() || b.is_empty() {
            return None;
        }
        let op = j.op;
        Some(match j.order {
            Order::AsSaid => format!("{a} {op} {b}"),
            Order::Reversed => format!("{b} {op} {a}"),
            Order::LargerFirst => {
                let value = |x: &str| calculator::evaluate(x).ok().map(|n| n.as_f64());
                match (value(&a), value(&b)) {
                    (Some(x), Some(y)) if x < y => format!("{b} {op} {a}"),
                    _ => format!("{a} {op} {b}"),
                }
            }
        })
    }
}

/// "what is 10 percent off 50" as "what is 50 minus 10 percent of 50": the
/// percentage and the amount are whole numbers as said (the longest run of
/// at most four words before "percent off" that reads as one), a currency
/// word after the amount is dropped.
fn discount(text: &str) -> Option<String> {
    let lower = text.trim().trim_end_matches(['?', '.', '!']).to_lowercase();
    let (before, after) = [" percent off ", " per cent off ", "% off "]
        .iter()
        .find_map(|mark| lower.split_once(mark))?;
    let after = after.trim();
    let after = after.strip_prefix("of ").unwrap_or(after);
    let amount = [
        "dollars", "dollar", "euros", "euro", "pounds", "pound", "bucks", "quid",
    ]
    .iter()
    .find_map(|w| after.strip_suffix(w))
    .unwrap_or(after)
    .trim();
    // "a hundred" is a number; "the 80" is the number 80.
    let amount = [amount, amount.strip_prefix("the ").unwrap_or(amount)]
        .into_iter()
        .find(|a| numbers::parse_number(a).is_some())?;
    let words: Vec<&str> = before.split_whitespace().collect();
    (1..=words.len().min(4)).rev().find_map(|n| {
        let (lead, pct) = words.split_at(words.len() - n);
        let pct = pct.join(" ");
        numbers::parse_number(&pct)?;
        let lead = lead.join(" ");
        Some(
            format!("{lead} {amount} minus {pct} percent of {amount}")
                .trim()
                .to_string(),
        )
    })
}

/// The calculator expression an utterance asks for, or `None` when it is
/// not (only) arithmetic.
pub fn to_expression(text: &str) -> Option<String> {
    if text.len() > MAX_TEXT_BYTES {
        return None;
    }
    // "10 percent off 50" is a discount: 50 less 10 percent of 50.
    if let Some(rewritten) = discount(text) {
        return to_expression(&rewritten);
    }
    // Commas, question marks and full stops are how speech-to-text writes
    // pauses: not part of the question.
    let toks: Vec<Token> = numbers::tokenize(text)
        .into_iter()
        .filter(|t| t.kind != TokenKind::Punct)
        .collect();
    let mut builder = Builder::default();
    let mut i = 0;
    while i < toks.len() {
        let next = builder.step(&toks, i)?;
        if next <= i {
            return None;
        }
        i = next;
    }
    builder.finish()
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
        for (text, want) in [
            ("what's twelve times seven", "12 * 7"),
            ("15 percent of 80", "(15 / 100) * 80"),
            ("what is 2 to the power of 10", "2 ** 10"),
            ("square root of 144", "(144 ** 0.5)"),
            ("a quarter of two hundred", "0.25 * 200"),
            ("a third of ninety", "(1 / 3) * 90"),
            ("two to the tenth power", "2 ** 10"),
            ("what's the sum of 3 and 4", "3 + 4"),
            ("subtract 3 from 10", "10 - 3"),
            ("the difference between 3 and 10", "10 - 3"),
            ("minus five squared", "((-5) ** 2)"),
            ("cube root of minus 8", "(-(8 ** (1 / 3)))"),
        ] {
            assert_eq!(to_expression(text).as_deref(), Some(want), "{text}");
        }
    }

    #[test]
    fn answers_through_the_calculator() {
        let cases = [
            ("what's twelve times seven", "84"),
            ("15 percent of 80", "12"),
            ("what's 15% of 80?", "12"),
            ("15 per cent of 80", "12"),
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
            ("cube root of minus 27", "-3"),
            ("half of 90", "45"),
            ("what is 2 million times 3", "6000000"),
            ("12 × 3", "36"),
            // Issue 16's examples.
            ("nineteen plus six", "25"),
            ("a quarter of two hundred", "50"),
            ("four hundred and ten minus eighty", "330"),
            ("what is six divided by four", "1.5"),
            ("a third of ninety", "30"),
            ("three quarters of 80", "60"),
            ("two thirds of ninety", "60"),
            ("half of a hundred", "50"),
            ("twice seven", "14"),
            ("double 21", "42"),
            ("triple four", "12"),
            ("five squared", "25"),
            ("three cubed", "27"),
            ("(2 + 3) squared", "25"),
            ("2 to the power of 8", "256"),
            ("two raised to the power of three", "8"),
            ("two to the third", "8"),
            ("2 to the 10th", "1024"),
            ("the square of 12", "144"),
            ("one over three", "0.333333"),
            ("point five plus one", "1.5"),
            ("two and a half times four", "10"),
            ("one and a half plus 1/2", "2"),
            ("0.1 plus 0.2", "0.3"),
            ("80 times 10 percent", "8"),
            ("what's 10 percent off 50", "45"),
            ("twenty percent off of 80 dollars", "64"),
            ("what is 10 percent off 50", "45"),
            ("what is twenty five percent off a hundred", "75"),
            ("10 plus 15 percent of 80", "22"),
            ("50% of 50% of 80", "20"),
            ("1.5 thousand plus one", "1501"),
            ("subtract 3 from 10", "7"),
            ("take 3 from 10", "7"),
            ("the difference between 3 and 10", "7"),
            ("the remainder of 17 divided by 5", "2"),
            ("the remainder when 17 is divided by 5", "2"),
            ("the product of 2 plus 3 and 4", "20"),
            ("add 5 to 7", "12"),
            ("divide 10 by 4", "2.5"),
            ("10 take away 3", "7"),
            ("5 doubled", "10"),
            ("a dozen times three", "36"),
            ("a couple of hundred plus one", "201"),
            ("minus five plus two", "-3"),
            ("-5 + 2", "-3"),
            ("ten minus minus five", "15"),
            ("um what's like uh five plus, uh, five equals?", "10"),
            ("what is 5 plus 5 equal to", "10"),
            ("2 + 2 =", "4"),
            ("and what's two plus two", "4"),
            ("what's the value of 3 times 3", "9"),
            ("what's 007 plus 1", "8"),
            (
                "what's 100000000000000000000 plus 1",
                "100000000000000000001",
            ),
            ("a trillion times a trillion", "1000000000000000000000000"),
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
            "what's 15 percent",
            "plus",
            "twelve times",
            "add milk to my list",
            "square root of",
            "",
            "what is 2 plus the moon",
            "two plus two, explain",
            "what's x squared",
            "x plus 2",
        ] {
            assert_eq!(to_expression(text), None, "{text}");
        }
    }

    #[test]
    fn ambiguous_phrasings_are_refused() {
        for text in [
            // 80.1 or 88?
            "80 plus 10 percent",
            "100 minus 10%",
            "add 10 percent to 80",
            // 21 or 3/7?
            "seven into three",
            // The "and" belongs to the number: no second operand.
            "the sum of two hundred and ten",
            // Which power first?
            "two to the power of three squared",
            "2 to the power of double 3",
            "2 to the power of half of 4",
            // Year-like or digit-by-digit speech.
            "nineteen eighty four plus one",
            "one two three plus four",
            // Ordinals are not operands.
            "first plus second",
            // "five and five", "five by five": no operator.
            "five and five",
            "six by nine",
            "five of ten",
            "three point twenty plus one",
            "two third plus one",
            // Vague amounts.
            "a few plus two",
        ] {
            assert_eq!(to_expression(text), None, "{text}");
        }
    }

    #[test]
    fn bad_input_is_refused_fast() {
        let started = std::time::Instant::now();
        let long = "one plus ".repeat(1200);
        for text in [
            long.as_str(),
            &"9".repeat(10_000),
            "😀 plus 😀",
            "2 plus 2 😀",
            "?!.,;",
            "the the the",
            "cinq plus deux",
            "zwei plus zwei",
            "五 加 五",
            "٣ + ٤",
            "6:30 plus 1",
        ] {
            assert_eq!(to_expression(text), None, "{:.40}", text);
        }
        // Under the byte cap but long: an expression, which the calculator bounds.
        let many = "1 + ".repeat(400) + "1";
        assert!(to_expression(&many).is_some());
        assert!(started.elapsed() < std::time::Duration::from_millis(500));
    }

    #[test]
    fn huge_numbers_are_the_calculators_to_refuse() {
        let started = std::time::Instant::now();
        let expr = to_expression("9 to the power of 9 to the power of 9").unwrap();
        assert_eq!(expr, "9 ** 9 ** 9");
        assert!(evaluate(&expr).is_err());
        let digits = "9".repeat(400);
        let expr = to_expression(&format!("{digits} plus 1")).unwrap();
        assert_eq!(
            evaluate(&expr),
            Err(calculator::CalcError::TooLarge),
            "{expr:.20}"
        );
        assert!(started.elapsed() < std::time::Duration::from_millis(100));
    }

    #[test]
    fn literals_are_exact() {
        assert_eq!(literal(Number::Ratio { num: 7, den: 2 }), "3.5");
        assert_eq!(literal(Number::Ratio { num: 157, den: 50 }), "3.14");
        assert_eq!(literal(Number::Ratio { num: 1, den: 3 }), "(1 / 3)");
        assert_eq!(
            literal(Number::Ratio {
                num: 1,
                den: 1 << 20
            }),
            "0.00000095367431640625"
        );
        // 40 decimals do not fit the exact path: a division instead.
        assert_eq!(
            literal(Number::Ratio {
                num: 1,
                den: 1 << 40
            }),
            "(1 / 1099511627776)"
        );
        assert_eq!(literal(Number::Float(1.5e23)), "1.5e23");
    }
}
