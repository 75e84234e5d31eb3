//! Name tables: settings that are really a choice among named backends or
//! modes.
//!
//! Every backend family (STT and TTS engines, audio inputs and outputs,
//! the button, tools) and every string setting that is really a choice
//! (dispatch mode, STT order, route scorer, job kind) has one table of
//! [`Entry`]s. The config parses against it at load (an unknown name is a
//! one-line error listing the table), and `earshot devices`, `config show`
//! and `doctor` print from the same table, so a name added once shows up
//! everywhere. [`choice!`](crate::choice!) generates an enum, its table
//! and its string conversions in one place.
//!
//! A leaf: imports nothing from the crate.

use std::fmt;

/// One name in a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Entry {
    /// The name the config spells (`piper`, `local-first`, `gpio`).
    pub name: &'static str,
    /// Other spellings accepted on input (never printed by `config show`).
    pub aliases: &'static [&'static str],
    /// How a value of this kind is written, when it carries arguments
    /// (`gpio:/dev/gpiochip0:17`); the bare name otherwise.
    pub form: &'static str,
    /// One line for people: what choosing it means.
    pub summary: &'static str,
}

impl Entry {
    /// Whether `text` names this entry (ASCII case-insensitive, trimmed).
    pub fn matches(&self, text: &str) -> bool {
        let text = text.trim();
        text.eq_ignore_ascii_case(self.name)
            || self.aliases.iter().any(|a| text.eq_ignore_ascii_case(a))
    }
}

/// A family of names as the readers print it.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Family {
    /// Short name of the family (`stt`, `tts`, `button`).
    pub family: &'static str,
    /// The config key that picks from it.
    pub key: &'static str,
    pub entries: &'static [Entry],
}

/// The table's forms as a sentence: `a, b or c`.
pub fn one_of(entries: &[Entry]) -> String {
    let forms: Vec<&str> = entries.iter().map(|e| e.form).collect();
    match forms.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// A name that is not in its table. Its message is the one line the config
/// error shows after the key and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownChoice {
    /// What was being chosen (`engine`, `mode`, `route scorer`).
    pub what: &'static str,
    pub given: String,
    pub entries: &'static [Entry],
}

impl fmt::Display for UnknownChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown {} '{}'; use {}",
            self.what,
            self.given,
            one_of(self.entries)
        )
    }
}

impl std::error::Error for UnknownChoice {}

/// Look `text` up in `entries`.
pub fn find(
    entries: &'static [Entry],
    what: &'static str,
    text: &str,
) -> Result<usize, UnknownChoice> {
    entries
        .iter()
        .position(|e| e.matches(text))
        .ok_or_else(|| UnknownChoice {
            what,
            given: text.trim().to_string(),
            entries,
        })
}

/// An enum whose variants are the entries of one name table, read and
/// written as its names (TOML, JSON, `FromStr`, `Display`).
///
/// ```
/// earshot::choice! {
///     /// How loud.
///     pub enum Loudness("loudness") {
///         Soft = "soft" | "quiet": "barely there",
///         Loud = "loud": "the whole kitchen hears",
///     }
/// }
/// assert_eq!("quiet".parse::<Loudness>().unwrap(), Loudness::Soft);
/// assert_eq!(Loudness::Loud.to_string(), "loud");
/// let err = "meh".parse::<Loudness>().unwrap_err().to_string();
/// assert_eq!(err, "unknown loudness 'meh'; use soft or loud");
/// ```
#[macro_export]
macro_rules! choice {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal $(| $alias:literal)* : $summary:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every variant, in table order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The name table (what the config accepts).
            pub const TABLE: &'static [$crate::choice::Entry] = &[$(
                $crate::choice::Entry {
                    name: $text,
                    aliases: &[$($alias),*],
                    form: $text,
                    summary: $summary,
                }
            ),+];

            /// The name the config spells.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// One line for people.
            pub fn summary(self) -> &'static str {
                match self { $($name::$variant => $summary),+ }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::choice::UnknownChoice;
            fn from_str(text: &str) -> ::std::result::Result<Self, Self::Err> {
                $crate::choice::find(Self::TABLE, $what, text).map(|i| Self::ALL[i])
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::choice::UnknownChoice;
            fn try_from(text: String) -> ::std::result::Result<Self, Self::Error> {
                text.parse()
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.name().to_string()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::choice! {
        enum Colour("colour") {
            Red = "red" | "rouge": "warm",
            Blue = "blue": "cold",
            Green = "green": "grassy",
        }
    }

    #[test]
    fn names_aliases_and_case_parse_to_the_variant() {
        assert_eq!("red".parse::<Colour>().unwrap(), Colour::Red);
        assert_eq!(" Rouge ".parse::<Colour>().unwrap(), Colour::Red);
        assert_eq!("BLUE".parse::<Colour>().unwrap(), Colour::Blue);
        assert_eq!(Colour::Green.to_string(), "green");
        assert_eq!(Colour::Blue.summary(), "cold");
    }

    #[test]
    fn an_unknown_name_lists_the_table() {
        let err = "purple".parse::<Colour>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown colour 'purple'; use red, blue or green"
        );
    }

    #[test]
    fn serde_round_trips_through_the_name() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct S {
            c: Colour,
            list: Vec<Colour>,
        }
        let s: S = toml::from_str("c = \"rouge\"\nlist = [\"blue\", \"green\"]\n").unwrap();
        assert_eq!(s.c, Colour::Red);
        assert_eq!(s.list, vec![Colour::Blue, Colour::Green]);
        let back = toml::to_string(&s).unwrap();
        assert!(back.contains("c = \"red\""), "{back}");
        let err = toml::from_str::<S>("c = \"mauve\"\nlist = []\n")
            .err()
            .map(|e| e.message().to_string())
            .unwrap_or_default();
        assert!(
            err.contains("unknown colour 'mauve'; use red, blue or green"),
            "{err}"
        );
    }

    #[test]
    fn one_of_reads_as_a_sentence() {
        assert_eq!(one_of(&Colour::TABLE[..1]), "red");
        assert_eq!(one_of(&Colour::TABLE[..2]), "red or blue");
    }
}
