//! Enumerate audio devices with the names `audio.input` / `audio.output`
//! accept (what `arecord -L` / `aplay -L` would show, through cpal).

use cpal::traits::{DeviceTrait, HostTrait};
use serde::Serialize;

/// One device as `earshot devices` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    /// The value to put in the config (`alsa:` prefix dropped for ALSA).
    pub name: String,
    /// Human description from the backend.
    pub description: String,
    pub input: bool,
    pub output: bool,
    pub is_default_input: bool,
    pub is_default_output: bool,
    /// e.g. `16000-48000 Hz, 1-2 ch` for the input side.
    pub input_formats: Vec<String>,
    pub output_formats: Vec<String>,
}

/// The config name for a cpal device id (`alsa:hw:1,0` → `hw:1,0`).
pub fn config_name(id: &str) -> String {
    id.strip_prefix("alsa:").unwrap_or(id).to_string()
}

fn formats<I: Iterator<Item = cpal::SupportedStreamConfigRange>>(it: I) -> Vec<String> {
    // One summary line: ALSA's `plug`/`null` report hundreds of ranges.
    let ranges: Vec<_> = it.collect();
    if ranges.is_empty() {
        return Vec::new();
    }
    let min_rate = ranges
        .iter()
        .map(|r| r.min_sample_rate())
        .min()
        .unwrap_or(0);
    let max_rate = ranges
        .iter()
        .map(|r| r.max_sample_rate())
        .max()
        .unwrap_or(0);
    let min_ch = ranges.iter().map(|r| r.channels()).min().unwrap_or(0);
    let max_ch = ranges.iter().map(|r| r.channels()).max().unwrap_or(0);
    let mut fmts: Vec<String> = ranges
        .iter()
        .map(|r| format!("{:?}", r.sample_format()))
        .collect();
    fmts.sort();
    fmts.dedup();
    vec![format!(
        "{min_rate}-{max_rate} Hz, {min_ch}-{max_ch} ch, {}",
        fmts.join("/")
    )]
}

/// All devices of the default host (ALSA on Linux).
pub fn list() -> Result<Vec<DeviceInfo>, super::AudioError> {
    let host = cpal::default_host();
    let default_in = host
        .default_input_device()
        .and_then(|d| d.id().ok())
        .map(|id| id.to_string());
    let default_out = host
        .default_output_device()
        .and_then(|d| d.id().ok())
        .map(|id| id.to_string());
    let devices = host
        .devices()
        .map_err(|e| super::AudioError::Backend(format!("cannot list devices: {e}")))?;
    let mut out = Vec::new();
    // ALSA's `default` is often not among the hints (e.g. with a private
    // ALSA_CONFIG_PATH) but is always a valid name: list it first.
    let mut all: Vec<cpal::Device> = Vec::new();
    if let Some(d) = host.default_input_device() {
        all.push(d);
    }
    let default_id = default_in.clone();
    all.extend(
        devices
            .filter(|d| d.id().ok().map(|id| id.to_string()) != default_id || default_id.is_none()),
    );
    for d in all {
        let Ok(id) = d.id() else { continue };
        let id = id.to_string();
        let description = d
            .description()
            .map(|x| x.to_string().replace('\n', " "))
            .unwrap_or_default();
        let input_formats = d.supported_input_configs().map(formats).unwrap_or_default();
        let output_formats = d
            .supported_output_configs()
            .map(formats)
            .unwrap_or_default();
        out.push(DeviceInfo {
            name: config_name(&id),
            description,
            input: !input_formats.is_empty(),
            output: !output_formats.is_empty(),
            is_default_input: default_in.as_deref() == Some(id.as_str()),
            is_default_output: default_out.as_deref() == Some(id.as_str()),
            input_formats,
            output_formats,
        });
    }
    Ok(out)
}
