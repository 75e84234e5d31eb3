//! `earshot run [--input DEV|FILE.wav|none] [--output DEV|FILE.wav|paced:FILE.wav]
//! [--button SPEC] [--push-to-talk] [--no-barge-in] [--json] [--wake MODE]`: the voice
//! loop until SIGTERM/SIGINT (or the end of a WAV input), and the Wyoming
//! satellites of `wyoming.satellites` beside it (`--input none`: only them).
//!
//! Models load before systemd is told `READY=1`; the loop feeds the
//! watchdog every iteration.

use std::path::Path;

use anyhow::Result;

use crate::cancel::CancelToken;
use crate::device::notify::Notifier;

/// Command-line overrides of `[audio]` and `[device]`.
#[derive(Debug, Default, Clone)]
pub struct RunArgs {
    pub input: Option<String>,
    pub output: Option<String>,
    pub button: Option<String>,
    pub push_to_talk: bool,
    pub no_barge_in: bool,
    pub json: bool,
    /// `--wake wake|button|always` over `EARSHOT_WAKE_MODE` and `[wake] mode`.
    pub wake: Option<String>,
}

/// Run the loop. Returns whether it stopped cleanly.
pub fn run(config_path: Option<&Path>, args: RunArgs) -> Result<bool> {
    let notifier = Notifier::from_env();
    notifier.status("loading config and models");
    let mut config = super::load_config(config_path)?.config;
    if let Some(input) = args.input {
        config.audio.input = input;
    }
    if let Some(output) = args.output {
        config.audio.output = output;
    }
    if let Some(spec) = args.button {
        config.device.button = spec.parse().map_err(|e| anyhow::anyhow!("--button: {e}"))?;
    }
    if args.push_to_talk {
        config.audio.push_to_talk = true;
    }
    if args.no_barge_in {
        config.audio.barge_in = false;
    }
    if let Some(mode) = args.wake {
        config.wake.mode = mode.parse().map_err(|e| anyhow::anyhow!("--wake: {e}"))?;
    }
    let shutdown = CancelToken::new();
    super::install_interrupt(&shutdown);
    crate::app::device::run(config, shutdown, &notifier, args.json)
}
