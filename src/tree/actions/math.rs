//! Spoken arithmetic through the calculator tool (R-TOOL's evaluator and
//! bounds): "what's twelve times seven" → "That's 84."

use super::{Action, ActionCall, ActionEnv, ActionError, ActionOutput};
use crate::tools::calculator::{evaluate, format_result, CalcError};
use crate::tree::spoken_math::to_expression;

/// `calculate`: `args.expression` (default: the utterance) in words or digits.
pub struct Calculate;

impl Action for Calculate {
    fn name(&self) -> &'static str {
        "calculate"
    }
    fn changes_state(&self) -> bool {
        false
    }
    fn run(&self, call: &ActionCall, _: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let spoken = call.arg_or_text("expression");
        if let Some(conversion) = crate::tree::units::conversion(&spoken) {
            return Ok(ActionOutput::said(conversion.say()));
        }
        // Not arithmetic after all: say nothing, let on_fail decide.
        let Some(expr) = to_expression(&spoken) else {
            return Ok(ActionOutput::failed(""));
        };
        Ok(match evaluate(&expr) {
            Ok(n) => ActionOutput::said(format!("That's {}.", format_result(n))),
            Err(CalcError::DivisionByZero | CalcError::ModuloByZero) => {
                ActionOutput::said("You can't divide by zero.")
            }
            Err(CalcError::TooLarge) => {
                ActionOutput::said("That number is too large for me to work out.")
            }
            Err(CalcError::ComplexResult) => ActionOutput::said("That has no real-number answer."),
            Err(e) => ActionOutput::said(format!("I couldn't work that out: {e}.")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn answers_refuses_and_declines() {
        let dir = tempfile::tempdir().unwrap();
        let env = ActionEnv::local(Store::open_in(dir.path()).unwrap(), "user-1");
        let run = |t: &str| {
            Calculate
                .run(
                    &ActionCall {
                        text: t.into(),
                        ..Default::default()
                    },
                    &env,
                )
                .unwrap()
        };
        assert_eq!(run("what's twelve times seven").say, "That's 84.");
        assert_eq!(run("7 divided by 0").say, "You can't divide by zero.");
        assert_eq!(
            run("9 to the power of 9 to the power of 9").say,
            "That number is too large for me to work out."
        );
        let not_math = run("tell me a joke");
        assert!(!not_math.ok && not_math.say.is_empty());
        // Issue 16: spoken numbers, fractions and percentages, answered in digits.
        for (text, want) in [
            ("nineteen plus six", "That's 25."),
            ("a quarter of two hundred", "That's 50."),
            ("four hundred and ten minus eighty", "That's 330."),
            ("what is six divided by four", "That's 1.5."),
            ("what's 15 percent of 80", "That's 12."),
            ("0.1 plus 0.2", "That's 0.3."),
            (
                "a trillion times a trillion",
                "That's 1000000000000000000000000.",
            ),
            ("cube root of minus 8", "That's -2."),
            ("square root of minus 4", "That has no real-number answer."),
        ] {
            assert_eq!(run(text).say, want, "{text}");
        }
        let digits = format!("{} plus 1", "9".repeat(400));
        assert_eq!(
            run(&digits).say,
            "That number is too large for me to work out."
        );
        // Ambiguous: handed on (on_fail) rather than guessed.
        for text in [
            "80 plus 10 percent",
            "seven into three",
            "nineteen eighty four plus one",
        ] {
            let out = run(text);
            assert!(!out.ok && out.say.is_empty(), "{text}: {out:?}");
        }
    }
}
