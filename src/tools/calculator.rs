//! The calculator: a tiny, bounded arithmetic evaluator with Python's
//! semantics (R-TOOL).
//!
//! Why not `eval`: the model (or a mis-heard utterance) controls the
//! input, so only numbers, `+ - * / ** %`, parentheses and unary `±` are
//! understood — anything else is a clear error, never evaluated. Why
//! Python's semantics: the reference implementation evaluated with Python,
//! and users (and its tests) expect `-2**2 == -4`, `7 / 2 == 3.5` and
//! `-7 % 3 == 2`. Unlike the reference, every operation is bounded: sizes
//! are checked *before* computing, so `9**9**9` fails in microseconds.
//!
//! Integers are exact while they fit an `i128` (Python's would be exact
//! too); beyond that they continue as `f64`, and a result that would not
//! fit an `f64` is refused as too large.
//!
//! Words ("five plus five") are not read here, on purpose: the tool's
//! contract with the model is R-TOOL expressions, and a name is an error
//! the model can correct. Spoken arithmetic is turned into an expression
//! before it gets here (`tree::spoken_math`, over `nlu::numbers`).

use serde_json::{json, Value};

use super::{Tool, ToolError};

/// Longest expression accepted, in characters.
pub const MAX_INPUT_CHARS: usize = 1000;
/// Deepest nesting of parentheses and unary signs.
const MAX_DEPTH: usize = 200;

/// A value: an exact integer or a float, as in Python.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Int(i128),
    Float(f64),
}

impl Number {
    /// The value as a float (exact for integers up to 2^53).
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }
}

/// Why an expression could not be evaluated. The text is what the model
/// (or the device) reads, so it names the problem in plain words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalcError {
    #[error("the expression is empty")]
    Empty,
    #[error("the expression is too long (over {MAX_INPUT_CHARS} characters)")]
    TooLong,
    #[error("the expression is nested too deeply")]
    TooDeep,
    #[error("invalid expression: {0}")]
    Syntax(String),
    #[error("only numbers, + - * / ** %, and parentheses are allowed; {0}")]
    NotAllowed(String),
    #[error("division by zero")]
    DivisionByZero,
    #[error("modulo by zero")]
    ModuloByZero,
    #[error("zero cannot be raised to a negative power")]
    ZeroNegativePower,
    #[error("a negative number raised to a fractional power has no real result")]
    ComplexResult,
    #[error("the result is too large to compute")]
    TooLarge,
}

/// Evaluate `expr` with Python's arithmetic semantics.
pub fn evaluate(expr: &str) -> Result<Number, CalcError> {
    if expr.chars().count() > MAX_INPUT_CHARS {
        return Err(CalcError::TooLong);
    }
    let tokens = tokenize(expr)?;
    if tokens.is_empty() {
        return Err(CalcError::Empty);
    }
    let mut parser = Parser {
        tokens: &tokens,
        pos: 0,
        depth: 0,
    };
    let value = parser.expr()?;
    if let Some(tok) = parser.peek() {
        return Err(match tok {
            Tok::Open => CalcError::NotAllowed("calling a value like a function is not".into()),
            other => CalcError::Syntax(format!("unexpected {}", other.describe())),
        });
    }
    Ok(value)
}

/// The value as Python's `repr` prints it (`1024`, `0.5`, `1e+20`,
/// `0.30000000000000004`): what the model reads from the tool.
pub fn python_repr(n: Number) -> String {
    match n {
        Number::Int(i) => i.to_string(),
        Number::Float(f) => float_repr(f),
    }
}

/// The value as the device says it: integers without ".0", at most six
/// decimals, and very large or very small numbers in words
/// ("1.607 times 10 to the power of 60").
pub fn format_result(n: Number) -> String {
    match n {
        Number::Int(i) => i.to_string(),
        Number::Float(f) => {
            if f == 0.0 {
                return "0".into();
            }
            let abs = f.abs();
            if (1e-6..1e15).contains(&abs) {
                let s = format!("{f:.6}");
                let s = s.trim_end_matches('0').trim_end_matches('.');
                if s == "-0" {
                    "0".into()
                } else {
                    s.to_string()
                }
            } else {
                let s = format!("{f:.3e}");
                let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
                let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
                format!("{mantissa} times 10 to the power of {exponent}")
            }
        }
    }
}

/// Python's float repr: shortest round-trip digits, scientific notation
/// below 1e-4 and from 1e16, always a dot or an exponent.
fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, e.g. "1.2345e-7".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let body = if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                format!("{}{}.0", digits, "0".repeat(int_len - digits.len()))
            } else {
                format!("{}.{}", &digits[..int_len], &digits[int_len..])
            }
        } else {
            format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
        };
        format!("{sign}{body}")
    } else {
        let mant = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mant}e{esign}{:02}", exp.abs())
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(Number),
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Pow,
    Open,
    Close,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Num(n) => format!("number {}", python_repr(*n)),
            Tok::Plus => "'+'".into(),
            Tok::Minus => "'-'".into(),
            Tok::Star => "'*'".into(),
            Tok::Slash => "'/'".into(),
            Tok::Percent => "'%'".into(),
            Tok::Pow => "'**'".into(),
            Tok::Open => "'('".into(),
            Tok::Close => "')'".into(),
        }
    }
}

fn tokenize(expr: &str) -> Result<Vec<Tok>, CalcError> {
    let chars: Vec<char> = expr.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '0'..='9' | '.' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.'
                    // a sign directly after an exponent marker: 1e-5
                    || ((chars[i] == '+' || chars[i] == '-')
                        && matches!(chars[i - 1], 'e' | 'E')
                        && !is_prefixed(&chars[start..i])))
                {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                tokens.push(Tok::Num(parse_number(&text)?));
            }
            '+' => {
                tokens.push(Tok::Plus);
                i += 1;
            }
            '-' => {
                tokens.push(Tok::Minus);
                i += 1;
            }
            '*' => {
                if chars.get(i + 1) == Some(&'*') {
                    tokens.push(Tok::Pow);
                    i += 2;
                } else {
                    tokens.push(Tok::Star);
                    i += 1;
                }
            }
            '/' => {
                if chars.get(i + 1) == Some(&'/') {
                    return Err(CalcError::NotAllowed(
                        "floor division '//' is not (use / for division)".into(),
                    ));
                }
                tokens.push(Tok::Slash);
                i += 1;
            }
            '%' => {
                tokens.push(Tok::Percent);
                i += 1;
            }
            '(' => {
                tokens.push(Tok::Open);
                i += 1;
            }
            ')' => {
                tokens.push(Tok::Close);
                i += 1;
            }
            '^' => {
                return Err(CalcError::NotAllowed(
                    "'^' is not (use ** for powers)".into(),
                ))
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let name: String = chars[start..i].iter().take(40).collect();
                return Err(CalcError::NotAllowed(format!(
                    "names such as '{name}' are not"
                )));
            }
            other => {
                return Err(CalcError::NotAllowed(format!("'{other}' is not")));
            }
        }
    }
    Ok(tokens)
}

fn is_prefixed(s: &[char]) -> bool {
    s.len() >= 2 && s[0] == '0' && matches!(s[1], 'x' | 'X' | 'o' | 'O' | 'b' | 'B')
}

/// A numeric literal as Python reads it: decimal integers (no leading
/// zeros), `0x`/`0o`/`0b` integers, decimals and exponents, `_` between
/// digits.
fn parse_number(text: &str) -> Result<Number, CalcError> {
    let bad = || CalcError::Syntax(format!("'{}' is not a number", clip(text)));
    if text.starts_with('_') || text.ends_with('_') || text.contains("__") {
        return Err(bad());
    }
    let chars: Vec<char> = text.chars().collect();
    if is_prefixed(&chars) {
        let radix = match chars[1] {
            'x' | 'X' => 16,
            'o' | 'O' => 8,
            _ => 2,
        };
        let body: String = text[2..].trim_start_matches('_').replace('_', "");
        if body.is_empty() || !body.chars().all(|c| c.is_digit(radix)) {
            return Err(bad());
        }
        return match i128::from_str_radix(&body, radix) {
            Ok(v) => Ok(Number::Int(v)),
            Err(_) => Err(CalcError::TooLarge),
        };
    }
    // Underscores only between digits.
    for (k, c) in chars.iter().enumerate() {
        if *c == '_'
            && !(k > 0
                && chars[k - 1].is_ascii_digit()
                && chars.get(k + 1).is_some_and(|n| n.is_ascii_digit()))
        {
            return Err(bad());
        }
    }
    let clean = text.replace('_', "");
    let valid = {
        // digits [. digits] [e [sign] digits], at least one digit before e.
        let (mant, exp) = match clean.find(['e', 'E']) {
            Some(p) => (&clean[..p], Some(&clean[p + 1..])),
            None => (clean.as_str(), None),
        };
        let mant_ok = mant.chars().filter(|c| *c == '.').count() <= 1
            && mant.chars().all(|c| c.is_ascii_digit() || c == '.')
            && mant.chars().any(|c| c.is_ascii_digit());
        let exp_ok = exp.is_none_or(|e| {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
        });
        mant_ok && exp_ok
    };
    if !valid {
        return Err(bad());
    }
    let is_float = clean.contains(['.', 'e', 'E']);
    if !is_float {
        if clean.len() > 1 && clean.starts_with('0') && clean.chars().any(|c| c != '0') {
            return Err(CalcError::Syntax(format!(
                "leading zeros are not allowed in '{}'",
                clip(text)
            )));
        }
        return match clean.parse::<i128>() {
            Ok(v) => Ok(Number::Int(v)),
            Err(_) => float_literal(&clean),
        };
    }
    float_literal(&clean)
}

fn float_literal(clean: &str) -> Result<Number, CalcError> {
    // Exponent digits can be absurdly long ("1e99999999999"): the parser
    // handles that, giving inf or 0, which is then judged.
    match clean.parse::<f64>() {
        Ok(f) if f.is_finite() => Ok(Number::Float(f)),
        Ok(_) => Err(CalcError::TooLarge),
        Err(_) => Err(CalcError::Syntax(format!(
            "'{}' is not a number",
            clip(clean)
        ))),
    }
}

fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}

struct Parser<'a> {
    tokens: &'a [Tok],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.tokens.get(self.pos).cloned();
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    fn enter(&mut self) -> Result<(), CalcError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(CalcError::TooDeep)
        } else {
            Ok(())
        }
    }

    /// expr := term (('+' | '-') term)*
    fn expr(&mut self) -> Result<Number, CalcError> {
        let mut value = self.term()?;
        while let Some(op) = self.peek().cloned() {
            match op {
                Tok::Plus => {
                    self.pos += 1;
                    value = add(value, self.term()?)?;
                }
                Tok::Minus => {
                    self.pos += 1;
                    value = sub(value, self.term()?)?;
                }
                _ => break,
            }
        }
        Ok(value)
    }

    /// term := factor (('*' | '/' | '%') factor)*
    fn term(&mut self) -> Result<Number, CalcError> {
        let mut value = self.factor()?;
        while let Some(op) = self.peek().cloned() {
            match op {
                Tok::Star => {
                    self.pos += 1;
                    value = mul(value, self.factor()?)?;
                }
                Tok::Slash => {
                    self.pos += 1;
                    value = div(value, self.factor()?)?;
                }
                Tok::Percent => {
                    self.pos += 1;
                    value = modulo(value, self.factor()?)?;
                }
                _ => break,
            }
        }
        Ok(value)
    }

    /// factor := ('+' | '-') factor | power
    fn factor(&mut self) -> Result<Number, CalcError> {
        match self.peek() {
            Some(Tok::Plus) => {
                self.pos += 1;
                self.enter()?;
                let v = self.factor()?;
                self.depth -= 1;
                Ok(v)
            }
            Some(Tok::Minus) => {
                self.pos += 1;
                self.enter()?;
                let v = self.factor()?;
                self.depth -= 1;
                neg(v)
            }
            _ => self.power(),
        }
    }

    /// power := primary ['**' factor]  (right-associative, binds tighter
    /// than a unary sign on its left, looser than one on its right)
    fn power(&mut self) -> Result<Number, CalcError> {
        let base = self.primary()?;
        if self.peek() == Some(&Tok::Pow) {
            self.pos += 1;
            self.enter()?;
            let exponent = self.factor()?;
            self.depth -= 1;
            return pow(base, exponent);
        }
        Ok(base)
    }

    /// primary := number | '(' expr ')'
    fn primary(&mut self) -> Result<Number, CalcError> {
        match self.next() {
            Some(Tok::Num(n)) => Ok(n),
            Some(Tok::Open) => {
                self.enter()?;
                let v = self.expr()?;
                self.depth -= 1;
                match self.next() {
                    Some(Tok::Close) => Ok(v),
                    Some(other) => Err(CalcError::Syntax(format!(
                        "expected ')' but found {}",
                        other.describe()
                    ))),
                    None => Err(CalcError::Syntax("a '(' is never closed".into())),
                }
            }
            Some(other) => Err(CalcError::Syntax(format!(
                "unexpected {}",
                other.describe()
            ))),
            None => Err(CalcError::Syntax("the expression ends too early".into())),
        }
    }
}

fn finite(f: f64) -> Result<Number, CalcError> {
    if f.is_finite() {
        Ok(Number::Float(f))
    } else {
        Err(CalcError::TooLarge)
    }
}

fn neg(a: Number) -> Result<Number, CalcError> {
    match a {
        Number::Int(i) => Ok(i
            .checked_neg()
            .map(Number::Int)
            .unwrap_or(Number::Float(-(i as f64)))),
        Number::Float(f) => Ok(Number::Float(-f)),
    }
}

fn add(a: Number, b: Number) -> Result<Number, CalcError> {
    match (a, b) {
        (Number::Int(x), Number::Int(y)) => match x.checked_add(y) {
            Some(v) => Ok(Number::Int(v)),
            None => finite(x as f64 + y as f64),
        },
        _ => finite(a.as_f64() + b.as_f64()),
    }
}

fn sub(a: Number, b: Number) -> Result<Number, CalcError> {
    match (a, b) {
        (Number::Int(x), Number::Int(y)) => match x.checked_sub(y) {
            Some(v) => Ok(Number::Int(v)),
            None => finite(x as f64 - y as f64),
        },
        _ => finite(a.as_f64() - b.as_f64()),
    }
}

fn mul(a: Number, b: Number) -> Result<Number, CalcError> {
    match (a, b) {
        (Number::Int(x), Number::Int(y)) => match x.checked_mul(y) {
            Some(v) => Ok(Number::Int(v)),
            None => finite(x as f64 * y as f64),
        },
        _ => finite(a.as_f64() * b.as_f64()),
    }
}

/// True division, always a float (as Python 3).
fn div(a: Number, b: Number) -> Result<Number, CalcError> {
    if b.as_f64() == 0.0 {
        return Err(CalcError::DivisionByZero);
    }
    if let (Number::Int(x), Number::Int(y)) = (a, b) {
        // Exact when the quotient is a whole number that floats represent.
        if x.checked_rem(y) == Some(0) {
            if let Some(q) = x.checked_div(y) {
                return finite(q as f64);
            }
        }
    }
    finite(a.as_f64() / b.as_f64())
}

/// Python's modulo: the result takes the divisor's sign.
fn modulo(a: Number, b: Number) -> Result<Number, CalcError> {
    if b.as_f64() == 0.0 {
        return Err(CalcError::ModuloByZero);
    }
    match (a, b) {
        (Number::Int(x), Number::Int(y)) => {
            // i128::MIN % -1 overflows in Rust; the answer is 0.
            let r = x.checked_rem(y).unwrap_or(0);
            Ok(Number::Int(if r != 0 && ((r < 0) != (y < 0)) {
                r + y
            } else {
                r
            }))
        }
        _ => {
            let (x, y) = (a.as_f64(), b.as_f64());
            let mut m = x % y;
            if m != 0.0 {
                if (y < 0.0) != (m < 0.0) {
                    m += y;
                }
            } else {
                m = 0.0_f64.copysign(y);
            }
            finite(m)
        }
    }
}

/// `a ** b`, with the size of the result judged before computing it.
fn pow(a: Number, b: Number) -> Result<Number, CalcError> {
    if let (Number::Int(base), Number::Int(exp)) = (a, b) {
        if exp >= 0 {
            return int_pow(base, exp);
        }
        if base == 0 {
            return Err(CalcError::ZeroNegativePower);
        }
        // Python: int ** negative int is a float.
        return float_pow(base as f64, exp as f64);
    }
    float_pow(a.as_f64(), b.as_f64())
}

fn int_pow(base: i128, exp: i128) -> Result<Number, CalcError> {
    match base {
        0 => return Ok(Number::Int(if exp == 0 { 1 } else { 0 })),
        1 => return Ok(Number::Int(1)),
        -1 => return Ok(Number::Int(if exp % 2 == 0 { 1 } else { -1 })),
        _ => {}
    }
    // |base| >= 2: the result has about exp * log2|base| bits.
    let bits = exp as f64 * (base.unsigned_abs() as f64).log2();
    if bits > 1030.0 {
        return Err(CalcError::TooLarge);
    }
    if bits <= 128.0 {
        // checked_pow decides the edge exactly.
        if let Some(v) = u32::try_from(exp).ok().and_then(|e| base.checked_pow(e)) {
            return Ok(Number::Int(v));
        }
    }
    // Too big for an exact integer: a float, if it fits one.
    finite((base as f64).powf(exp as f64))
}

fn float_pow(base: f64, exp: f64) -> Result<Number, CalcError> {
    if base == 0.0 && exp < 0.0 {
        return Err(CalcError::ZeroNegativePower);
    }
    if base < 0.0 && exp.fract() != 0.0 {
        return Err(CalcError::ComplexResult);
    }
    finite(base.powf(exp))
}

/// The calculator as an agent tool.
pub struct CalculatorTool;

impl Tool for CalculatorTool {
    fn name(&self) -> &str {
        "calculator"
    }

    fn description(&self) -> &str {
        "Evaluate an arithmetic expression exactly, e.g. '2300 * 4' or '2 ** 10 + 5'. \
Supports + - * / ** % and parentheses (Python semantics). Use it for any arithmetic."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "expression": {
                    "type": "string",
                    "description": "The arithmetic expression, e.g. '(12 + 3) * 4'"
                }
            },
            "required": ["expression"]
        })
    }

    fn call(&self, args: &Value) -> Result<String, ToolError> {
        let expr = match args.get("expression") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(_) => {
                return Err(ToolError::BadArguments(
                    "'expression' must be a string".into(),
                ))
            }
            None => {
                return Err(ToolError::BadArguments(
                    "missing the 'expression' field".into(),
                ))
            }
        };
        evaluate(&expr)
            .map(python_repr)
            .map_err(|e| ToolError::Failed(format!("Error: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(s: &str) -> String {
        match evaluate(s) {
            Ok(n) => python_repr(n),
            Err(e) => format!("ERR {e}"),
        }
    }

    #[test]
    fn python_precedence_and_signs() {
        assert_eq!(ev("-2**2"), "-4");
        assert_eq!(ev("2**-1"), "0.5");
        assert_eq!(ev("2**3**2"), "512");
        assert_eq!(ev("(-2)**2"), "4");
        assert_eq!(ev("-7 % 3"), "2");
        assert_eq!(ev("7 % -3"), "-2");
        assert_eq!(ev("7.5 % -2"), "-0.5");
        assert_eq!(ev("7 / 2"), "3.5");
        assert_eq!(ev("6 / 3"), "2.0");
        assert_eq!(ev("--5"), "5");
        assert_eq!(ev("2*-3"), "-6");
        assert_eq!(ev("0.1 + 0.2"), "0.30000000000000004");
        assert_eq!(ev("1e20"), "1e+20");
        assert_eq!(ev("1/3"), "0.3333333333333333");
        assert_eq!(ev("1e-7"), "1e-07");
        assert_eq!(ev("1_000 * 2"), "2000");
        assert_eq!(ev("0x10 + 1"), "17");
        assert_eq!(ev("-0.0"), "-0.0");
    }

    #[test]
    fn failures_are_clear_and_fast() {
        let start = std::time::Instant::now();
        for (expr, want) in [
            ("9**9**9", "too large"),
            ("10**10000", "too large"),
            ("1/0", "division by zero"),
            ("5 % 0", "modulo by zero"),
            ("0 ** -1", "negative power"),
            ("(-8) ** 0.5", "no real result"),
            ("__import__('os')", "not"),
            ("abs(2)", "names"),
            ("2 // 3", "floor division"),
            ("2 ^ 3", "use **"),
            ("", "empty"),
            ("2 +", "ends too early"),
            ("(2", "never closed"),
            ("012", "leading zeros"),
            ("1e400", "too large"),
            ("1e308 * 10", "too large"),
        ] {
            let got = ev(expr);
            assert!(
                got.starts_with("ERR") && got.contains(want),
                "{expr}: {got}"
            );
        }
        assert!(ev(&"(".repeat(500)).contains("nested too deeply"));
        assert!(ev(&"1+".repeat(600)).contains("too long"));
        assert!(start.elapsed() < std::time::Duration::from_millis(200));
    }

    #[test]
    fn random_input_never_panics() {
        // A fixed LCG: the same 20 000 strings every run.
        let alphabet: Vec<char> = "0123456789.+-*/%()eE_xob ^a٣é\t".chars().collect();
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize
        };
        for _ in 0..20_000 {
            let len = next() % 24;
            let s: String = (0..len)
                .map(|_| alphabet[next() % alphabet.len()])
                .collect();
            if let Ok(n) = evaluate(&s) {
                assert!(n.as_f64().is_finite(), "{s:?} gave {n:?}");
                let _ = format_result(n);
            }
        }
    }

    #[test]
    fn speakable_format() {
        assert_eq!(format_result(Number::Float(4.0)), "4");
        assert_eq!(format_result(Number::Float(0.1 + 0.2)), "0.3");
        assert_eq!(format_result(Number::Float(1.0 / 3.0)), "0.333333");
        assert_eq!(format_result(Number::Int(-12)), "-12");
        assert_eq!(
            format_result(Number::Float(-1e-9)),
            "-1 times 10 to the power of -9"
        );
        assert_eq!(
            format_result(Number::Float(2f64.powi(200))),
            "1.607 times 10 to the power of 60"
        );
    }
}
