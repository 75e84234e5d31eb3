//! `earshot devices`: the audio inputs and outputs, with the exact names
//! `audio.input` / `audio.output` accept (like `arecord -L`).

use std::path::Path;

use anyhow::Result;

use crate::audio::devices;

/// List devices, then every backend family's names (the tables the
/// config accepts); `--json` prints `{"devices":[…],"backends":[…]}`.
pub fn run(_config_path: Option<&Path>, json: bool) -> Result<bool> {
    let list = devices::list()?;
    let families = crate::app::backends::families();
    if json {
        super::print_json(&serde_json::json!({ "devices": list, "backends": families }));
        return Ok(true);
    }
    if list.is_empty() {
        println!("No audio devices found (no sound card?). A WAV file path also works as audio.input / audio.output.");
    } else {
        print_devices(&list);
    }
    println!();
    println!("Backends (what each setting accepts):");
    for family in &families {
        println!("  {} ({}):", family.family, family.key);
        let width = family
            .entries
            .iter()
            .map(|e| e.form.len())
            .max()
            .unwrap_or(0);
        for entry in family.entries {
            println!("    {:<width$}  {}", entry.form, entry.summary);
        }
    }
    Ok(true)
}

fn print_devices(list: &[devices::DeviceInfo]) {
    for (title, want_input) in [
        ("Inputs (audio.input)", true),
        ("Outputs (audio.output)", false),
    ] {
        println!("{title}:");
        for d in list
            .iter()
            .filter(|d| if want_input { d.input } else { d.output })
        {
            let default =
                if (want_input && d.is_default_input) || (!want_input && d.is_default_output) {
                    "  [default]"
                } else {
                    ""
                };
            println!("  {}{default}", d.name);
            if !d.description.is_empty() && d.description != d.name {
                println!("      {}", d.description);
            }
            let formats = if want_input {
                &d.input_formats
            } else {
                &d.output_formats
            };
            if let Some(first) = formats.first() {
                let more = formats.len().saturating_sub(1);
                if more > 0 {
                    println!("      {first} (+{more} more)");
                } else {
                    println!("      {first}");
                }
            }
        }
    }
}
