//! The `condition` node's expression language: small on purpose.
//!
//! ```text
//! expr   := or
//! or     := and (("||" | "or") and)*
//! and    := not (("&&" | "and") not)*
//! not    := ("!" | "not") not | cmp
//! cmp    := value (("==" | "!=" | "<" | "<=" | ">" | ">=" | "contains" | "matches") value)?
//! value  := 'str' | "str" | number | true | false | null | path | "(" expr ")"
//! path   := text | phase | intent | confidence | state.KEY… | device.KEY
//! ```
//!
//! `matches` takes a regex string literal (case-insensitive), compiled when
//! the tree loads so a bad pattern is a load error naming the node.
//! `contains` is a case-insensitive substring test. Truthiness: null, false,
//! 0, "", "0", "false", "off", "no" are false.

use regex::Regex;
use serde_json::Value;

/// A parsed expression.
#[derive(Debug, Clone)]
pub enum Expr {
    Lit(Value),
    Path(Vec<String>),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(Box<Expr>, Op, Box<Expr>),
    Matches(Box<Expr>, Regex),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Contains,
}

/// Where paths get their values during a walk.
pub trait Scope {
    fn lookup(&self, path: &[String]) -> Value;
}

const ROOTS: &[&str] = &["text", "phase", "intent", "confidence", "state", "device"];

/// Why a `condition` expression does not parse. The tree loader (and the
/// walk, for a tree built without validation) reports it with the node's
/// id; each message is one line saying what to change in the expression.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExprError {
    #[error("the expression is empty")]
    Empty,
    #[error("a string literal is not closed")]
    UnclosedString,
    #[error("a '(' is not closed")]
    UnclosedParen,
    #[error("the expression ends too early")]
    EndsEarly,
    #[error("'{0}' is not a number")]
    NotANumber(String),
    #[error("unexpected character '{0}'")]
    UnexpectedChar(char),
    #[error("unexpected '{0}'")]
    UnexpectedSymbol(&'static str),
    /// Tokens left over; `rest` is the first one as the lexer saw it.
    #[error("unexpected {rest} after a complete expression")]
    Trailing { rest: String },
    #[error("unknown name '{0}' (use text, phase, intent, confidence, state.KEY or device.KEY)")]
    UnknownName(String),
    #[error("'{0}' needs a key, e.g. {0}.dnd")]
    NeedsKey(String),
    #[error("'{0}' is not a valid name")]
    BadName(String),
    #[error("`matches` needs a string literal pattern")]
    MatchesNeedsLiteral,
    /// `reason` is the regex crate's message on one line.
    #[error("bad regex '{pattern}': {reason}")]
    BadRegex { pattern: String, reason: String },
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Str(String),
    Num(f64),
    Ident(String),
    Sym(&'static str),
}

fn lex(src: &str) -> Result<Vec<Tok>, ExprError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '\'' || c == '"' {
            let quote = c;
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(ExprError::UnclosedString),
                    // `\'` is a quote; any other escape is kept for regexes (`\b`).
                    Some('\\') if chars.get(i + 1) == Some(&quote) => {
                        s.push(quote);
                        i += 2;
                    }
                    Some(&ch) if ch == quote => {
                        i += 1;
                        break;
                    }
                    Some(&ch) => {
                        s.push(ch);
                        i += 1;
                    }
                }
            }
            out.push(Tok::Str(s));
            continue;
        }
        if c.is_ascii_digit() || (c == '-' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let start = i;
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            let n = s.parse().map_err(|_| ExprError::NotANumber(s.clone()))?;
            out.push(Tok::Num(n));
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || matches!(chars[i], '_' | '.')) {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
            continue;
        }
        let two: String = chars[i..chars.len().min(i + 2)].iter().collect();
        let sym = ["==", "!=", "<=", ">=", "&&", "||"]
            .into_iter()
            .find(|s| *s == two)
            .or_else(|| {
                ["<", ">", "!", "(", ")"]
                    .into_iter()
                    .find(|s| s.starts_with(c))
            });
        match sym {
            Some(s) => {
                i += s.len();
                out.push(Tok::Sym(s));
            }
            None => return Err(ExprError::UnexpectedChar(c)),
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn eat_sym(&mut self, syms: &[&str]) -> Option<&'static str> {
        match self.peek() {
            Some(Tok::Sym(s)) if syms.contains(s) => {
                let s = *s;
                self.pos += 1;
                Some(s)
            }
            _ => None,
        }
    }

    fn eat_word(&mut self, word: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Ident(w)) if w == word) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.and()?;
        while self.eat_sym(&["||"]).is_some() || self.eat_word("or") {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.not()?;
        while self.eat_sym(&["&&"]).is_some() || self.eat_word("and") {
            left = Expr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr, ExprError> {
        if self.eat_sym(&["!"]).is_some() || self.eat_word("not") {
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.cmp()
    }

    fn cmp(&mut self) -> Result<Expr, ExprError> {
        let left = self.value()?;
        if self.eat_word("matches") {
            return match self.value()? {
                Expr::Lit(Value::String(pattern)) => {
                    let re = crate::small_regex::new(&format!("(?i){pattern}")).map_err(|e| {
                        ExprError::BadRegex {
                            reason: first_line(&e.to_string()),
                            pattern: pattern.clone(),
                        }
                    })?;
                    Ok(Expr::Matches(Box::new(left), re))
                }
                _ => Err(ExprError::MatchesNeedsLiteral),
            };
        }
        let op = if let Some(s) = self.eat_sym(&["==", "!=", "<=", ">=", "<", ">"]) {
            match s {
                "==" => Op::Eq,
                "!=" => Op::Ne,
                "<=" => Op::Le,
                ">=" => Op::Ge,
                "<" => Op::Lt,
                _ => Op::Gt,
            }
        } else if self.eat_word("contains") {
            Op::Contains
        } else {
            return Ok(left);
        };
        Ok(Expr::Cmp(Box::new(left), op, Box::new(self.value()?)))
    }

    fn value(&mut self) -> Result<Expr, ExprError> {
        let tok = self
            .toks
            .get(self.pos)
            .cloned()
            .ok_or(ExprError::EndsEarly)?;
        self.pos += 1;
        match tok {
            Tok::Str(s) => Ok(Expr::Lit(Value::String(s))),
            Tok::Num(n) => Ok(Expr::Lit(serde_json::json!(n))),
            Tok::Sym("(") => {
                let inner = self.or()?;
                if self.eat_sym(&[")"]).is_none() {
                    return Err(ExprError::UnclosedParen);
                }
                Ok(inner)
            }
            Tok::Sym(s) => Err(ExprError::UnexpectedSymbol(s)),
            Tok::Ident(word) => match word.as_str() {
                "true" => Ok(Expr::Lit(Value::Bool(true))),
                "false" => Ok(Expr::Lit(Value::Bool(false))),
                "null" => Ok(Expr::Lit(Value::Null)),
                _ => {
                    let parts: Vec<String> = word.split('.').map(str::to_string).collect();
                    if !ROOTS.contains(&parts[0].as_str()) {
                        return Err(ExprError::UnknownName(word));
                    }
                    if matches!(parts[0].as_str(), "state" | "device") && parts.len() < 2 {
                        return Err(ExprError::NeedsKey(word));
                    }
                    if parts.iter().any(String::is_empty) {
                        return Err(ExprError::BadName(word));
                    }
                    Ok(Expr::Path(parts))
                }
            },
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parse an expression; the error is one line saying what is wrong.
pub fn parse(src: &str) -> Result<Expr, ExprError> {
    let toks = lex(src)?;
    if toks.is_empty() {
        return Err(ExprError::Empty);
    }
    let mut p = Parser { toks, pos: 0 };
    let expr = p.or()?;
    if p.pos != p.toks.len() {
        return Err(ExprError::Trailing {
            rest: format!("{:?}", p.toks[p.pos]),
        });
    }
    Ok(expr)
}

/// [`parse`], remembered by the expression's text: a tree's conditions
/// are read on every walk — each turn, and the dry runs at a pause before
/// it — and compiling their `matches` patterns each time cost ~12 ms per
/// walk of the shipped tree (its keyword conditions are long alternations),
/// on the way to every answer (issue 21). The text is the key, so a tree
/// loaded again, or another tree, shares what it can and is never stale.
pub fn parse_cached(src: &str) -> Result<std::sync::Arc<Expr>, ExprError> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    type Parsed = Result<Arc<Expr>, ExprError>;
    static CACHE: OnceLock<Mutex<HashMap<String, Parsed>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(parsed) = cache.lock().ok().and_then(|c| c.get(src).cloned()) {
        return parsed;
    }
    let parsed = parse(src).map(Arc::new);
    if let Ok(mut c) = cache.lock() {
        // Trees are small; a process that loads many distinct ones starts
        // the cache over rather than grow without bound.
        if c.len() >= MAX_CACHED_EXPRESSIONS {
            c.clear();
        }
        c.insert(src.to_string(), parsed.clone());
    }
    parsed
}

/// Distinct expressions [`parse_cached`] keeps (the shipped tree has a
/// dozen).
const MAX_CACHED_EXPRESSIONS: usize = 1024;

/// Whether a stored value counts as "on".
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !matches!(
            s.trim().to_ascii_lowercase().as_str(),
            "" | "0" | "false" | "off" | "no"
        ),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn as_num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn equal(a: &Value, b: &Value) -> bool {
    if a == b {
        return true;
    }
    match (as_num(a), as_num(b)) {
        (Some(x), Some(y)) if !a.is_string() || !b.is_string() => (x - y).abs() < 1e-9,
        _ => match (a, b) {
            (Value::String(x), Value::String(y)) => x.eq_ignore_ascii_case(y),
            _ => false,
        },
    }
}

/// Evaluate to a JSON value (comparisons give booleans).
pub fn eval(expr: &Expr, scope: &dyn Scope) -> Value {
    match expr {
        Expr::Lit(v) => v.clone(),
        Expr::Path(p) => scope.lookup(p),
        Expr::Not(e) => Value::Bool(!truthy(&eval(e, scope))),
        Expr::And(a, b) => Value::Bool(truthy(&eval(a, scope)) && truthy(&eval(b, scope))),
        Expr::Or(a, b) => Value::Bool(truthy(&eval(a, scope)) || truthy(&eval(b, scope))),
        Expr::Matches(e, re) => Value::Bool(re.is_match(&as_text(&eval(e, scope)))),
        Expr::Cmp(a, op, b) => {
            let (x, y) = (eval(a, scope), eval(b, scope));
            let result = match op {
                Op::Eq => equal(&x, &y),
                Op::Ne => !equal(&x, &y),
                Op::Contains => match &x {
                    Value::Array(items) => items.iter().any(|i| equal(i, &y)),
                    _ => as_text(&x)
                        .to_lowercase()
                        .contains(&as_text(&y).to_lowercase()),
                },
                _ => match (as_num(&x), as_num(&y)) {
                    (Some(l), Some(r)) => match op {
                        Op::Lt => l < r,
                        Op::Le => l <= r,
                        Op::Gt => l > r,
                        _ => l >= r,
                    },
                    _ => false,
                },
            };
            Value::Bool(result)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct S;
    impl Scope for S {
        fn lookup(&self, path: &[String]) -> Value {
            match path.join(".").as_str() {
                "text" => json!("Delete the MILK item"),
                "phase" => json!("confirm_delete"),
                "confidence" => json!(0.8),
                "state.count" => json!(3),
                "device.dnd" => json!("on"),
                _ => Value::Null,
            }
        }
    }

    fn t(src: &str) -> bool {
        truthy(&eval(&parse(src).unwrap(), &S))
    }

    struct Said(&'static str);
    impl Scope for Said {
        fn lookup(&self, path: &[String]) -> Value {
            match path.join(".").as_str() {
                "text" => json!(self.0),
                _ => Value::Null,
            }
        }
    }

    #[test]
    fn a_cached_expression_is_parsed_once_and_reads_as_parsed() {
        let src = "text matches '\\b(calendar|diary|agenda)\\b' and not (text contains 'email')";
        let first = parse_cached(src).unwrap();
        let again = parse_cached(src).unwrap();
        assert!(std::sync::Arc::ptr_eq(&first, &again), "parsed twice");
        let fresh = parse(src).unwrap();
        let mut read = Vec::new();
        for text in ["What's in my Calendar?", "email my diary", "hello"] {
            let cached = truthy(&eval(&again, &Said(text)));
            assert_eq!(cached, truthy(&eval(&fresh, &Said(text))), "{text}");
            read.push(cached);
        }
        assert_eq!(read, [true, false, false]);
        // A bad pattern stays the same error every time.
        let bad = "text matches '(unclosed'";
        assert_eq!(parse_cached(bad).unwrap_err(), parse(bad).unwrap_err());
        assert_eq!(parse_cached(bad).unwrap_err(), parse(bad).unwrap_err());
    }

    #[test]
    fn evaluates_the_grammar() {
        assert!(t("phase == 'confirm_delete'"));
        assert!(t("phase != 'idle' && confidence >= 0.75"));
        assert!(!t("confidence > 0.9 or state.missing"));
        assert!(t("text contains 'milk'"));
        assert!(t("text matches '^delete\\b'"));
        assert!(t("not (state.count < 2)"));
        assert!(t("state.count == 3 and device.dnd"));
        assert!(t("!state.missing"));
        assert!(t("text matches '^delete\\s+the'"));
        assert!(t("'it\\'s' == \"it's\""));
        assert!(t("state.missing == null"));
    }

    #[test]
    fn errors_are_one_line() {
        for bad in [
            "",
            "phase ==",
            "foo == 1",
            "text matches 3",
            "text matches '('",
            "(phase",
            "state",
            "a $ b",
            "phase 'x'",
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(!err.contains('\n') && !err.is_empty(), "{bad}: {err}");
        }
    }
}
