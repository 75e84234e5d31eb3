//! How people ask to remember and to forget, parsed once for every caller:
//! the intent tree's memory actions, the Wyoming intent service and the
//! memory module itself ("remember that …" stored with no LLM).

use std::sync::OnceLock;

use regex::Regex;

fn lead(cell: &'static OnceLock<Regex>, alternatives: &str) -> &'static Regex {
    cell.get_or_init(|| {
        crate::small_regex::new(&format!(
            r"(?i)^\s*(?:(?:please|hey|okay|ok|can you|could you)[\s,]+)*(?:{alternatives})(?:\b|$)[\s,:]*"
        ))
        .expect("static regex")
    })
}

fn strip<'a>(re: &Regex, text: &'a str) -> &'a str {
    match re.find(text) {
        Some(m) => text[m.end()..].trim(),
        None => text.trim(),
    }
}

/// `text` without its leading "remember (that)", "please note", "keep in
/// mind that", "don't forget that"…; the rest as said.
pub fn strip_remember(text: &str) -> &str {
    static RE: OnceLock<Regex> = OnceLock::new();
    strip(
        lead(
            &RE,
            r"remember that|remember this|remember|don't forget that|do not forget that|don't forget|keep in mind that|keep in mind|make a note that|note that|note|for future reference",
        ),
        text,
    )
}

/// `text` without its leading "forget (that|about)", "delete the memory
/// that", "stop remembering"…; the rest as said.
pub fn strip_forget(text: &str) -> &str {
    static RE: OnceLock<Regex> = OnceLock::new();
    strip(
        lead(
            &RE,
            r"forget what i said about|forget the fact that|forget that|forget about|forget|delete the memory that|delete the memory about|delete the memory|remove the memory that|remove the memory about|remove the memory|stop remembering that|stop remembering|erase the memory that|erase the memory about",
        ),
        text,
    )
}

/// "Remember that my sister is called Ana." → "my sister is called Ana"
/// (the fact, without the request or the closing punctuation).
pub fn fact_to_remember(text: &str) -> String {
    strip_remember(text.trim().trim_end_matches(['.', '!', '?'])).to_string()
}

/// "please forget that I like jazz" → "I like jazz".
pub fn memory_to_forget(text: &str) -> String {
    strip_forget(text.trim().trim_end_matches(['.', '!', '?'])).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_stripped_and_the_fact_kept() {
        assert_eq!(strip_remember("Remember that I like jazz"), "I like jazz");
        assert_eq!(
            strip_remember("please remember: dentist at 5"),
            "dentist at 5"
        );
        assert_eq!(
            strip_remember("could you keep in mind that I'm vegan"),
            "I'm vegan"
        );
        assert_eq!(strip_remember("I like jazz"), "I like jazz");
        assert_eq!(
            strip_remember("notebooks are on the shelf"),
            "notebooks are on the shelf"
        );
        assert_eq!(
            fact_to_remember("Remember that my sister is called Ana."),
            "my sister is called Ana"
        );
        assert_eq!(strip_forget("forget that I like jazz"), "I like jazz");
        assert_eq!(strip_forget("Forget about my dentist"), "my dentist");
        assert_eq!(
            memory_to_forget("please forget that I like jazz"),
            "I like jazz"
        );
        assert_eq!(
            memory_to_forget("delete the memory about the car."),
            "the car"
        );
        assert_eq!(strip_forget("forgetful people"), "forgetful people");
    }
}
