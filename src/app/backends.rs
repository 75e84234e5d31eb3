//! Every backend family's name table, gathered for the readers: `earshot
//! devices` lists them, `config show` prints a choice key's accepted
//! values, `doctor` describes what the config picked. The tables
//! themselves live with their families (`stt::Order`, `tts::Engine`,
//! `audio::INPUTS`, `device::button::KINDS`, `tools::TOOLS`, …); the
//! config parses against the same tables at load.

use crate::choice::{Entry, Family};
use crate::config::Config;

/// Every family, in the order a reader sets a device up.
pub fn families() -> Vec<Family> {
    vec![
        Family {
            family: "audio input",
            key: "audio.input",
            entries: crate::audio::INPUTS,
        },
        Family {
            family: "audio output",
            key: "audio.output",
            entries: crate::audio::OUTPUTS,
        },
        Family {
            family: "button",
            key: "device.button",
            entries: crate::device::button::KINDS,
        },
        Family {
            family: "stt order",
            key: "stt.order",
            entries: crate::stt::Order::TABLE,
        },
        Family {
            family: "stt engine",
            key: "stt.order / wyoming.stt_uri",
            entries: crate::stt::ENGINES,
        },
        Family {
            family: "tts engine",
            key: "tts.order",
            entries: crate::tts::Engine::TABLE,
        },
        Family {
            family: "tool",
            key: "tools.enabled",
            entries: crate::tools::TOOLS,
        },
        Family {
            family: "mode",
            key: "mode",
            entries: crate::agent::Mode::TABLE,
        },
        Family {
            family: "scorer",
            key: "nlu.scorer",
            entries: crate::nlu::Scorer::TABLE,
        },
        // Issue 20: the language models and how the on-device one runs.
        Family {
            family: "llm",
            key: "llm.order",
            entries: crate::llm::Source::TABLE,
        },
        Family {
            family: "local llm backend",
            key: "llm.local.backend",
            entries: crate::llm::LocalBackend::TABLE,
        },
    ]
}

/// The accepted values of a config key that is a choice (`tts.order[1]`
/// counts as `tts.order`); `None` for free-form keys.
pub fn choices_for(key: &str) -> Option<&'static [Entry]> {
    let key = key.split('[').next().unwrap_or(key);
    families()
        .into_iter()
        .find(|f| f.key == key)
        .map(|f| f.entries)
}

/// What the config picked in each family, one `key = value (summary)`
/// line each, for `doctor`.
pub fn picked(config: &Config) -> Vec<String> {
    let tts: Vec<String> = config.tts.order.iter().map(|e| e.to_string()).collect();
    let input = crate::audio::kind_of(&config.audio.input, false);
    let output = crate::audio::kind_of(&config.audio.output, true);
    let button = config.device.button.kind().summary;
    vec![
        format!("audio.input = {} ({})", config.audio.input, input.summary),
        format!(
            "audio.output = {} ({})",
            config.audio.output, output.summary
        ),
        format!("device.button = {} ({button})", config.device.button),
        format!(
            "stt.order = {} ({})",
            config.stt.order,
            config.stt.order.summary()
        ),
        format!("tts.order = {}", tts.join(", ")),
        format!("mode = {} ({})", config.mode, config.mode.summary()),
        format!(
            "nlu.scorer = {} ({})",
            config.nlu.scorer,
            config.nlu.scorer.summary()
        ),
    ]
}

/// Names in `tools.enabled` that are not in the tool table (ignored by
/// the registry; `doctor` warns).
pub fn unknown_tools(config: &Config) -> Vec<String> {
    config
        .tools
        .enabled
        .iter()
        .filter(|name| !crate::tools::is_known_tool(name))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_choice_key_has_its_table() {
        assert_eq!(choices_for("tts.order[2]").map(|t| t.len()), Some(4));
        assert!(choices_for("stt.order")
            .unwrap()
            .iter()
            .any(|e| e.name == "cloud-only"));
        assert!(choices_for("mode")
            .unwrap()
            .iter()
            .any(|e| e.name == "graph"));
        assert!(choices_for("llm.model").is_none());
        // Every family has entries and distinct names.
        for f in families() {
            let mut names: Vec<_> = f.entries.iter().map(|e| e.name).collect();
            assert!(!names.is_empty(), "{}", f.family);
            names.sort();
            names.dedup();
            assert_eq!(names.len(), f.entries.len(), "{}", f.family);
        }
    }

    #[test]
    fn picked_names_each_choice_and_unknown_tools_are_found() {
        let mut config = Config::default();
        config.tools.enabled.push("teleport".into());
        let lines = picked(&config).join("\n");
        assert!(
            lines.contains("stt.order = local-first (whisper on the device"),
            "{lines}"
        );
        assert!(lines.contains("tts.order = piper, espeak"), "{lines}");
        assert!(lines.contains("device.button = none (no button"), "{lines}");
        assert_eq!(unknown_tools(&config), vec!["teleport".to_string()]);
    }
}
