//! `earshot config show [--json]`: the effective config, secrets masked,
//! with where each value came from.

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::app::backends::choices_for;

pub fn show(config: Option<&Path>, json: bool) -> Result<()> {
    let loaded = super::load_config(config)?;
    let rows = loaded.rows();
    if json {
        let items: Vec<_> = rows
            .iter()
            .map(|(k, v, s)| {
                let mut item = json!({"key": k, "value": v, "source": s.to_string()});
                if let Some(choices) = choices_for(k) {
                    let names: Vec<&str> = choices.iter().map(|e| e.form).collect();
                    item["choices"] = json!(names);
                }
                item
            })
            .collect();
        super::print_json(&json!({
            "file": loaded.file.as_ref().map(|p| p.display().to_string()),
            "settings": items,
        }));
    } else {
        match &loaded.file {
            Some(f) => println!("# config file: {}", f.display()),
            None => println!("# no config file found; defaults and environment only"),
        }
        let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        for (key, value, source) in rows {
            match choices_for(&key) {
                Some(choices) => println!(
                    "{key:<width$} = {value:<40} # {source}; one of {}",
                    crate::choice::one_of(choices)
                ),
                None => println!("{key:<width$} = {value:<40} # {source}"),
            }
        }
    }
    Ok(())
}
