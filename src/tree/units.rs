//! Spoken unit conversions: "convert 5 miles to kilometers", "how many
//! ounces in a pound", "what's 20 celsius in fahrenheit".
//!
//! The on-device model answers these with confident wrong numbers ("5
//! miles is 2.22 kilometers", "1 hour is 240 minutes"), and they have one
//! right answer, so the calculator answers them. Only units of one kind
//! convert (length, mass, volume, temperature, time); the factors are the
//! exact definitions (the international yard and pound, US liquid
//! measures). Time stops at the week: a month or a year has no one length.

use std::sync::OnceLock;

use regex::Regex;

/// What is measured: only units of one kind convert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Length,
    Mass,
    Volume,
    Temperature,
    Time,
}

/// A unit: its spoken names (singular and plural), its kind, and its size
/// in the kind's base unit (metre, kilogram, litre, second; unused for
/// temperature).
struct Unit {
    names: &'static [&'static str],
    kind: Kind,
    base: f64,
    /// How the answer says it: singular, plural.
    said: (&'static str, &'static str),
}

const UNITS: &[Unit] = &[
    Unit {
        names: &[
            "millimeter",
            "millimeters",
            "millimetre",
            "millimetres",
            "mm",
        ],
        kind: Kind::Length,
        base: 0.001,
        said: ("millimeter", "millimeters"),
    },
    Unit {
        names: &[
            "centimeter",
            "centimeters",
            "centimetre",
            "centimetres",
            "cm",
        ],
        kind: Kind::Length,
        base: 0.01,
        said: ("centimeter", "centimeters"),
    },
    Unit {
        names: &["meter", "meters", "metre", "metres"],
        kind: Kind::Length,
        base: 1.0,
        said: ("meter", "meters"),
    },
    Unit {
        names: &[
            "kilometer",
            "kilometers",
            "kilometre",
            "kilometres",
            "km",
            "kilometer's",
        ],
        kind: Kind::Length,
        base: 1000.0,
        said: ("kilometer", "kilometers"),
    },
    Unit {
        names: &["inch", "inches"],
        kind: Kind::Length,
        base: 0.0254,
        said: ("inch", "inches"),
    },
    Unit {
        names: &["foot", "feet"],
        kind: Kind::Length,
        base: 0.3048,
        said: ("foot", "feet"),
    },
    Unit {
        names: &["yard", "yards"],
        kind: Kind::Length,
        base: 0.9144,
        said: ("yard", "yards"),
    },
    Unit {
        names: &["mile", "miles"],
        kind: Kind::Length,
        base: 1609.344,
        said: ("mile", "miles"),
    },
    Unit {
        names: &["gram", "grams", "g"],
        kind: Kind::Mass,
        base: 0.001,
        said: ("gram", "grams"),
    },
    Unit {
        names: &["kilogram", "kilograms", "kilo", "kilos", "kg"],
        kind: Kind::Mass,
        base: 1.0,
        said: ("kilogram", "kilograms"),
    },
    Unit {
        names: &["ounce", "ounces", "oz"],
        kind: Kind::Mass,
        base: 0.028_349_523_125,
        said: ("ounce", "ounces"),
    },
    Unit {
        names: &["pound", "pounds", "lb", "lbs"],
        kind: Kind::Mass,
        base: 0.453_592_37,
        said: ("pound", "pounds"),
    },
    Unit {
        names: &["stone", "stones"],
        kind: Kind::Mass,
        base: 6.350_293_18,
        said: ("stone", "stone"),
    },
    Unit {
        names: &[
            "milliliter",
            "milliliters",
            "millilitre",
            "millilitres",
            "ml",
        ],
        kind: Kind::Volume,
        base: 0.001,
        said: ("milliliter", "milliliters"),
    },
    Unit {
        names: &["liter", "liters", "litre", "litres"],
        kind: Kind::Volume,
        base: 1.0,
        said: ("liter", "liters"),
    },
    Unit {
        names: &["gallon", "gallons"],
        kind: Kind::Volume,
        base: 3.785_411_784,
        said: ("gallon", "gallons"),
    },
    Unit {
        names: &["quart", "quarts"],
        kind: Kind::Volume,
        base: 0.946_352_946,
        said: ("quart", "quarts"),
    },
    Unit {
        names: &["pint", "pints"],
        kind: Kind::Volume,
        base: 0.473_176_473,
        said: ("pint", "pints"),
    },
    Unit {
        names: &["cup", "cups"],
        kind: Kind::Volume,
        base: 0.236_588_236_5,
        said: ("cup", "cups"),
    },
    Unit {
        names: &["fluid ounce", "fluid ounces", "fl oz"],
        kind: Kind::Volume,
        base: 0.029_573_529_562_5,
        said: ("fluid ounce", "fluid ounces"),
    },
    Unit {
        names: &["tablespoon", "tablespoons"],
        kind: Kind::Volume,
        base: 0.014_786_764_781_25,
        said: ("tablespoon", "tablespoons"),
    },
    Unit {
        names: &["teaspoon", "teaspoons"],
        kind: Kind::Volume,
        base: 0.004_928_921_593_75,
        said: ("teaspoon", "teaspoons"),
    },
    Unit {
        names: &[
            "celsius",
            "centigrade",
            "degrees celsius",
            "degree celsius",
            "degrees centigrade",
        ],
        kind: Kind::Temperature,
        base: 0.0,
        said: ("degree Celsius", "degrees Celsius"),
    },
    Unit {
        names: &["fahrenheit", "degrees fahrenheit", "degree fahrenheit"],
        kind: Kind::Temperature,
        base: 0.0,
        said: ("degree Fahrenheit", "degrees Fahrenheit"),
    },
    Unit {
        names: &["kelvin", "kelvins"],
        kind: Kind::Temperature,
        base: 0.0,
        said: ("kelvin", "kelvins"),
    },
    Unit {
        names: &["millisecond", "milliseconds", "ms"],
        kind: Kind::Time,
        base: 0.001,
        said: ("millisecond", "milliseconds"),
    },
    Unit {
        names: &["second", "seconds", "sec", "secs"],
        kind: Kind::Time,
        base: 1.0,
        said: ("second", "seconds"),
    },
    Unit {
        names: &["minute", "minutes", "min", "mins"],
        kind: Kind::Time,
        base: 60.0,
        said: ("minute", "minutes"),
    },
    Unit {
        names: &["hour", "hours", "hr", "hrs"],
        kind: Kind::Time,
        base: 3_600.0,
        said: ("hour", "hours"),
    },
    Unit {
        names: &["day", "days"],
        kind: Kind::Time,
        base: 86_400.0,
        said: ("day", "days"),
    },
    Unit {
        names: &["week", "weeks"],
        kind: Kind::Time,
        base: 604_800.0,
        said: ("week", "weeks"),
    },
];

fn unit(name: &str) -> Option<&'static Unit> {
    let name = name.trim().to_lowercase();
    let name = name
        .strip_prefix("degrees ")
        .filter(|n| !n.is_empty())
        .map_or(name.as_str(), |n| n);
    UNITS.iter().find(|u| u.names.contains(&name))
}

/// A conversion asked: how much of which unit, into which.
pub struct Conversion {
    value: f64,
    from: &'static Unit,
    to: &'static Unit,
}

fn shapes() -> &'static [Regex] {
    static SHAPES: OnceLock<Vec<Regex>> = OnceLock::new();
    SHAPES.get_or_init(|| {
        [
            // "convert 5 miles to kilometers", "what's 20 celsius in fahrenheit"
            r"^(?:convert |change |turn )?(?:what'?s |what is |how much is |how many is |how far is |how heavy is |how long is |how tall is |how big is |how hot is |how cold is |how warm is )?(?P<n>[\w.,' -]+?) (?P<from>[a-z' ]+?) (?:in|to|into|in to|as) (?P<to>[a-z' ]+?)$",
            // "how many ounces in a pound", "how many feet are in 3 miles"
            r"^how many (?P<to>[a-z' ]+?) (?:are |is )?(?:in|make|to) (?:a |an |one )?(?P<n>[\w.,' -]+? )?(?P<from>[a-z' ]+?)$",
            // "how many inches is a foot", "how many pounds is 5 kilos"
            r"^how many (?P<to>[a-z' ]+?) (?:is|are|make|makes) (?:a |an |one )?(?P<n>[\w.,' -]+? )?(?P<from>[a-z' ]+?)$",
        ]
        .iter()
        .map(|p| crate::small_regex::new(&format!("(?i){p}")).expect("static regex"))
        .collect()
    })
}

/// The conversion `text` asks for, if it is one: a number (said or
/// written; "a" and none mean one), a unit, and a unit of the same kind.
pub fn conversion(text: &str) -> Option<Conversion> {
    let t = crate::tree::fit::tidy(text).to_lowercase();
    let t = t.trim_end_matches(['?', '.', '!']).trim();
    for shape in shapes() {
        let Some(c) = shape.captures(t) else { continue };
        let (Some(from), Some(to)) = (
            unit(&c["from"]),
            c.name("to").and_then(|m| unit(m.as_str())),
        ) else {
            continue;
        };
        if from.kind != to.kind || std::ptr::eq(from, to) {
            continue;
        }
        let value = match c.name("n").map(|m| m.as_str().trim()) {
            None | Some("") | Some("a") | Some("an") | Some("one") => 1.0,
            Some(n) => crate::nlu::numbers::parse_number(&n.replace(',', ""))?,
        };
        if !value.is_finite() || value.abs() > 1e12 {
            return None;
        }
        return Some(Conversion { value, from, to });
    }
    None
}

impl Conversion {
    /// The answer: "5 miles is 8.05 kilometers."
    pub fn say(&self) -> String {
        let result = match self.from.kind {
            Kind::Temperature => {
                let celsius = match self.from.said.0 {
                    "degree Fahrenheit" => (self.value - 32.0) * 5.0 / 9.0,
                    "kelvin" => self.value - 273.15,
                    _ => self.value,
                };
                match self.to.said.0 {
                    "degree Fahrenheit" => celsius * 9.0 / 5.0 + 32.0,
                    "kelvin" => celsius + 273.15,
                    _ => celsius,
                }
            }
            _ => self.value * self.from.base / self.to.base,
        };
        let name = |u: &Unit, n: f64| {
            if (n - 1.0).abs() < 1e-9 {
                u.said.0
            } else {
                u.said.1
            }
        };
        format!(
            "{} {} is {} {}.",
            number(self.value),
            name(self.from, self.value),
            number(result),
            name(self.to, result)
        )
    }
}

/// A number as said: at most three significant decimals, no trailing
/// zeros ("8.047", "16", "0.0625").
fn number(x: f64) -> String {
    let rounded = if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        let digits = (-x.abs().log10()).ceil().clamp(0.0, 8.0) as usize + 2;
        format!("{x:.digits$}")
    };
    let trimmed = if rounded.contains('.') {
        rounded
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        rounded
    };
    if trimmed == "-0" {
        "0".into()
    } else {
        trimmed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(q: &str) -> Option<String> {
        conversion(q).map(|c| c.say())
    }

    #[test]
    fn lengths_masses_volumes_and_temperatures_convert() {
        assert_eq!(
            said("convert 5 miles to kilometers").as_deref(),
            Some("5 miles is 8.05 kilometers.")
        );
        assert_eq!(
            said("How many ounces in a pound?").as_deref(),
            Some("1 pound is 16 ounces.")
        );
        assert_eq!(
            said("how many feet are in a mile").as_deref(),
            Some("1 mile is 5280 feet.")
        );
        assert_eq!(
            said("what's 20 celsius in fahrenheit").as_deref(),
            Some("20 degrees Celsius is 68 degrees Fahrenheit.")
        );
        assert_eq!(
            said("convert 350 degrees fahrenheit to celsius").as_deref(),
            Some("350 degrees Fahrenheit is 176.7 degrees Celsius.")
        );
        assert_eq!(
            said("how many cups in a liter").as_deref(),
            Some("1 liter is 4.23 cups.")
        );
        assert_eq!(
            said("ten kilos in pounds").as_deref(),
            Some("10 kilograms is 22.05 pounds.")
        );
        assert_eq!(
            said("how many grams in an ounce").as_deref(),
            Some("1 ounce is 28.35 grams.")
        );
        assert_eq!(
            said("2.5 inches to centimeters").as_deref(),
            Some("2.5 inches is 6.35 centimeters.")
        );
    }

    #[test]
    fn other_shapes_of_the_question() {
        assert_eq!(
            said("how many inches is a foot").as_deref(),
            Some("1 foot is 12 inches.")
        );
        assert_eq!(
            said("how many pounds is 5 kilos").as_deref(),
            Some("5 kilograms is 11.02 pounds.")
        );
        assert_eq!(
            said("how tall is 6 feet in centimeters").as_deref(),
            Some("6 feet is 182.9 centimeters.")
        );
    }

    #[test]
    fn lengths_of_time_convert_up_to_the_week() {
        assert_eq!(
            said("How many seconds in an hour?").as_deref(),
            Some("1 hour is 3600 seconds.")
        );
        assert_eq!(
            said("how many days in a week").as_deref(),
            Some("1 week is 7 days.")
        );
        assert_eq!(
            said("how many hours is 90 minutes").as_deref(),
            Some("90 minutes is 1.5 hours.")
        );
        assert_eq!(
            said("how many minutes are in three hours").as_deref(),
            Some("3 hours is 180 minutes.")
        );
    }

    #[test]
    fn other_sentences_and_mixed_kinds_are_not_conversions() {
        for other in [
            "how many miles to london",
            "convert 5 miles to kilograms",
            "how many days in a month",
            "how many minutes to midnight",
            "how many hours to london",
            "remind me in 10 minutes to call mom",
            "20 minutes to 6",
            "20 dollars in euros",
            "put five pounds of potatoes on my list",
            "what's 5 plus 3",
            "how many pounds in a pound",
            "set a timer for 10 minutes",
        ] {
            assert!(conversion(other).is_none(), "{other}");
        }
    }
}
