//! Device control by voice: say a fixed sentence, stop, repeat the last
//! answer, pause/resume (do-not-disturb) and volume. State lives in the
//! `device_state` table (keys in [`crate::tree::keys`]); the actions return
//! their changes ([`ActionOutput::device_state`]) and the turn saves them
//! with itself. The voice loop reads `dnd` and `volume` after the turn and
//! applies them.

use serde_json::Value;

use super::{Action, ActionCall, ActionEnv, ActionError, ActionOutput};
use crate::tree::keys;

/// Speak the node's `args.text` (for fixed answers such as "Okay, I'll keep it").
pub struct Say;
/// Stop: end whatever the conversation was waiting for.
pub struct Stop;
/// Say the last answer again.
pub struct Repeat;
/// Pause (`on`) or resume (`!on`) the assistant.
pub struct DoNotDisturb {
    pub on: bool,
}
/// Change the volume by `step` (or to a number said in the utterance).
pub struct Volume {
    pub step: i64,
}

/// Volume when none was ever set.
pub const DEFAULT_VOLUME: i64 = 50;

/// The lowest volume a voice command reaches: a device turned down to
/// nothing would answer the next question in silence with nothing saying
/// why. Silence is an explicit mute, never the end of "quieter".
pub const MIN_VOLUME: i64 = 10;

fn store_err(e: crate::store::StoreError) -> ActionError {
    ActionError::DeviceState(e.to_string())
}

impl Action for Say {
    fn name(&self) -> &'static str {
        "say"
    }
    fn changes_state(&self) -> bool {
        false
    }
    fn run(&self, call: &ActionCall, _: &ActionEnv) -> Result<ActionOutput, ActionError> {
        match call.arg("text").and_then(Value::as_str) {
            Some(text) if !text.trim().is_empty() => Ok(ActionOutput::said(text.trim())),
            _ => Err(ActionError::BadArgument {
                action: "say",
                name: "text",
                reason: "no text to say".into(),
            }),
        }
    }
}

impl Action for Stop {
    fn name(&self) -> &'static str {
        "stop"
    }
    fn changes_state(&self) -> bool {
        false
    }
    fn run(&self, _: &ActionCall, _: &ActionEnv) -> Result<ActionOutput, ActionError> {
        Ok(ActionOutput::said("Okay.").with_phase("idle"))
    }
}

impl Action for Repeat {
    fn name(&self) -> &'static str {
        "repeat"
    }
    fn changes_state(&self) -> bool {
        false
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        // This walk's own unsaved answer, else the stored last answer.
        let last = match call.device.get(keys::LAST_ANSWER) {
            Some(pending) => pending.clone(),
            None => env.store.last_answer().map_err(store_err)?,
        };
        match last {
            Some(last) if !last.trim().is_empty() => Ok(ActionOutput::said(last)),
            _ => Ok(ActionOutput::failed("I haven't said anything yet.")),
        }
    }
}

impl Action for DoNotDisturb {
    fn name(&self) -> &'static str {
        if self.on {
            "dnd_on"
        } else {
            "dnd_off"
        }
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn preview(
        &self,
        call: &ActionCall,
        env: &ActionEnv,
    ) -> Option<Result<ActionOutput, ActionError>> {
        // `run` only returns the change; the turn's save writes it.
        Some(self.run(call, env))
    }
    fn run(&self, _: &ActionCall, _: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let value = if self.on { "on" } else { "off" };
        Ok(ActionOutput::said(if self.on {
            "Okay, I'm paused. Say resume when you want me back."
        } else {
            "I'm back and listening."
        })
        .with_device(keys::DND, value))
    }
}

/// A volume level said in the utterance ("set the volume to 30", "volume
/// to forty"), through the one number parser; only a whole 0–100.
fn said_level(text: &str) -> Option<i64> {
    crate::nlu::numbers::find_numbers(text)
        .into_iter()
        .find_map(|f| {
            // "up by two" is a step, not a level: a level follows "to",
            // "at", "volume" or "level".
            let before = text[..f.bytes.start].trim_end().to_lowercase();
            let level_word = ["to", "at", "volume", "level"]
                .iter()
                .any(|w| before.ends_with(&format!(" {w}")) || before == *w);
            if !level_word {
                return None;
            }
            let v = f.spoken.signed_f64();
            if v.fract() != 0.0 || !(0.0..=100.0).contains(&v) {
                return None;
            }
            // "volume to 5": one to ten is a step of a ten-step scale, as on
            // other speakers (five percent would be barely audible); "5
            // percent" is what it says.
            let after = text[f.bytes.end..].trim_start().to_lowercase();
            let percent = after.starts_with('%') || after.starts_with("percent");
            Some(if (1.0..=10.0).contains(&v) && !percent {
                v as i64 * 10
            } else {
                v as i64
            })
        })
}

impl Action for Volume {
    fn name(&self) -> &'static str {
        if self.step >= 0 {
            "volume_up"
        } else {
            "volume_down"
        }
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn preview(
        &self,
        call: &ActionCall,
        env: &ActionEnv,
    ) -> Option<Result<ActionOutput, ActionError>> {
        // `run` only returns the change; the turn's save writes it.
        Some(self.run(call, env))
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let current = call
            .device_state(env, keys::VOLUME)
            .map_err(store_err)?
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(DEFAULT_VOLUME);
        if crate::tree::fit::asks_volume(&crate::tree::fit::tidy(&call.text)) {
            return Ok(ActionOutput::said(format!(
                "The volume is at {current} percent."
            )));
        }
        let extreme = crate::tree::fit::volume_extreme(&crate::tree::fit::tidy(&call.text))
            .map(|top| if top { 100 } else { MIN_VOLUME });
        let level = extreme
            .or_else(|| said_level(&call.text))
            .unwrap_or(current + self.step)
            .clamp(MIN_VOLUME, 100);
        Ok(ActionOutput::said(match level {
            100 => "Volume is at maximum.".to_string(),
            MIN_VOLUME => format!("Volume is at its lowest, {MIN_VOLUME} percent."),
            l => format!("Volume {l} percent."),
        })
        .with_device(keys::VOLUME, level.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn env() -> (tempfile::TempDir, ActionEnv) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_in(dir.path()).unwrap();
        (dir, ActionEnv::local(store, "user-1"))
    }

    fn call(text: &str) -> ActionCall {
        ActionCall {
            text: text.into(),
            ..Default::default()
        }
    }

    /// A call that sees the device changes an earlier action of the walk made.
    fn after(text: &str, earlier: &ActionOutput) -> ActionCall {
        ActionCall {
            device: earlier.device_state.clone(),
            ..call(text)
        }
    }

    fn changed(out: &ActionOutput, key: &str) -> Option<String> {
        out.device_state.get(key).cloned().flatten()
    }

    #[test]
    fn volume_steps_clamps_and_takes_said_levels() {
        let (_d, env) = env();
        let up = Volume { step: 10 };
        let down = Volume { step: -10 };
        let louder = up.run(&call("louder"), &env).unwrap();
        assert_eq!(louder.say, "Volume 60 percent.");
        assert_eq!(changed(&louder, keys::VOLUME).as_deref(), Some("60"));
        // Nothing is written until the turn is saved.
        assert_eq!(env.store.device_state(keys::VOLUME).unwrap(), None);
        let quieter = down.run(&after("quieter", &louder), &env).unwrap();
        assert_eq!(changed(&quieter, keys::VOLUME).as_deref(), Some("50"));
        env.store.set_device_state(keys::VOLUME, "95").unwrap();
        assert_eq!(
            up.run(&call("louder"), &env).unwrap().say,
            "Volume is at maximum."
        );
        let set = up.run(&call("set the volume to 30"), &env).unwrap();
        assert_eq!(changed(&set, keys::VOLUME).as_deref(), Some("30"));
    }

    #[test]
    fn the_volume_asked_is_said_and_not_changed() {
        let (_d, env) = env();
        let up = Volume { step: 10 };
        let louder = up.run(&call("turn it up"), &env).unwrap();
        for asked in [
            "What's the volume?",
            "how loud are you",
            "what volume is it set to",
        ] {
            let out = up.run(&after(asked, &louder), &env).unwrap();
            assert_eq!(changed(&out, keys::VOLUME), None, "{asked}");
            assert_eq!(out.say, "The volume is at 60 percent.", "{asked}");
        }
        // A bare "volume" is not a question (it waits for "up" or "down").
        assert!(!crate::tree::fit::asks_volume("volume"));
        assert!(!crate::tree::fit::asks_volume(
            "what's the volume of a sphere"
        ));
    }

    #[test]
    fn volume_stops_at_a_floor_and_says_so() {
        let (_d, env) = env();
        let down = Volume { step: -10 };
        // Five "turn it down" from the default never reach silence.
        let mut out = down.run(&call("turn it down"), &env).unwrap();
        for _ in 0..5 {
            out = down.run(&after("turn it down", &out), &env).unwrap();
        }
        assert_eq!(changed(&out, keys::VOLUME).as_deref(), Some("10"));
        assert_eq!(out.say, "Volume is at its lowest, 10 percent.");
        // A level said below the floor stops there too.
        for text in ["set the volume to 0", "volume to five percent"] {
            let out = down.run(&call(text), &env).unwrap();
            assert_eq!(changed(&out, keys::VOLUME).as_deref(), Some("10"), "{text}");
            assert!(out.say.contains("lowest"), "{text}: {}", out.say);
        }
        let out = down.run(&call("volume to 20"), &env).unwrap();
        assert_eq!(out.say, "Volume 20 percent.");
        // One to ten is a ten-step scale.
        let out = down.run(&call("volume to five"), &env).unwrap();
        assert_eq!(out.say, "Volume 50 percent.");
        let out = down.run(&call("set the volume to 10"), &env).unwrap();
        assert_eq!(out.say, "Volume is at maximum.");
        let out = Volume { step: 10 }.run(&call("Max volume."), &env).unwrap();
        assert_eq!(out.say, "Volume is at maximum.");
        let out = down.run(&call("minimum volume"), &env).unwrap();
        assert!(out.say.contains("lowest"), "{}", out.say);
        let out = Volume { step: 10 }
            .run(&call("Turn it up to 80."), &env)
            .unwrap();
        assert_eq!(out.say, "Volume 80 percent.");
    }

    #[test]
    fn pause_resume_and_repeat() {
        let (_d, env) = env();
        assert!(!Repeat.run(&call("say that again"), &env).unwrap().ok);
        env.store
            .set_device_state(keys::LAST_ANSWER, "It's 6:05 PM.")
            .unwrap();
        assert_eq!(
            Repeat.run(&call("repeat"), &env).unwrap().say,
            "It's 6:05 PM."
        );
        let paused = DoNotDisturb { on: true }.run(&call("pause"), &env).unwrap();
        assert_eq!(changed(&paused, keys::DND).as_deref(), Some("on"));
        assert_eq!(env.store.device_state(keys::DND).unwrap(), None);
        let resumed = DoNotDisturb { on: false }
            .run(&call("resume"), &env)
            .unwrap();
        assert_eq!(changed(&resumed, keys::DND).as_deref(), Some("off"));
        let err = Say.run(&call("x"), &env).unwrap_err();
        assert!(matches!(err, ActionError::BadArgument { name: "text", .. }));
        assert_eq!(err.to_string(), "This tree's say node has no text to say.");
    }
}
