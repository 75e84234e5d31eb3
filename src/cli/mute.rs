//! `earshot mute [on|off|toggle]`: mute or unmute the running `earshot
//! run` through its control socket in the state directory; one line when
//! none is running.

use std::path::Path;

use anyhow::{bail, Result};

use crate::device::control::{self, ControlError};

pub fn run(config_path: Option<&Path>, action: Option<String>) -> Result<bool> {
    let config = super::load_config(config_path)?.config;
    let action = action.unwrap_or_else(|| "toggle".into());
    if !["on", "off", "toggle", "status"].contains(&action.as_str()) {
        bail!("earshot mute {action}: use on, off, toggle or status");
    }
    let path = control::socket_path(&config.state_dir);
    match control::send(&path, &format!("mute {action}")) {
        Ok(reply) if reply.starts_with("error") => bail!("{reply}"),
        Ok(reply) => {
            println!("{reply}");
            Ok(true)
        }
        Err(e @ ControlError::NotRunning(_)) => {
            eprintln!("earshot: {e}; nothing to mute");
            Ok(false)
        }
        Err(e) => bail!("{e}"),
    }
}
