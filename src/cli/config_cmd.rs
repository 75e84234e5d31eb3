//! `earshot config show [--json]`: the effective config, secrets masked,
//! with where each value came from.

use std::path::Path;

use anyhow::Result;
use serde_json::json;

pub fn show(config: Option<&Path>, json: bool) -> Result<()> {
    let loaded = super::load_config(config)?;
    let rows = loaded.rows();
    if json {
        let items: Vec<_> = rows
            .iter()
            .map(|(k, v, s)| json!({"key": k, "value": v, "source": s.to_string()}))
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
            println!("{key:<width$} = {value:<40} # {source}");
        }
    }
    Ok(())
}
